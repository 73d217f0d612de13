"""Run several `bench run --backend dist` configurations in ONE launch of ranks (started by the
tests with RANK/WORLD_SIZE set), so the process start-up is paid once: `python dist_cases.py OUT ARGS_JSON`."""
import json
import sys
from datetime import timedelta

import torch.distributed as dist

from bench.run import start


def main() -> int:
    out, cases = sys.argv[1], json.loads(sys.argv[2])
    dist.init_process_group("gloo", timeout=timedelta(seconds=60))
    status = 0
    for name, settings in cases.items():
        status |= start({**settings, "backend": "dist", "quiet": True}, f"{out}/{name}")
        dist.barrier()
    dist.destroy_process_group()
    return status


if __name__ == "__main__":
    raise SystemExit(main())
