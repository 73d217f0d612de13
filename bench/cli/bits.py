"""`bench bits`: the per-layer bit accounting of the paper's Table 1, MiB a worker sends per iteration."""
from __future__ import annotations

NAME = "bits"
HELP = "MiB per iteration of each compressor for a model's per-layer shapes"


def add_arguments(p) -> None:
    p.add_argument("--model", default="resnet20", help="resnet20, resnet8, ... (CIFAR ResNet-(6k+2))")
    p.add_argument("--compressors", nargs="+", default=["none", "qsgd:16", "qsgd:8", "qsgd:4", "qsgd:2", "top:0.5",
                   "top:0.1", "top:0.01", "rand:0.5", "rand:0.1", "rand:0.01", "sign"])


def run(args) -> int:
    """MiB (2^20 bytes) one worker sends per iteration, compressing each tensor of the model on its own."""
    from ..compressors import make_compressor
    from ..errors import BenchError
    from ..models import resnet_cifar

    if not args.model.startswith("resnet") or not args.model[6:].isdigit():
        raise BenchError(f"unknown model {args.model!r}; use resnetD with D = 6k+2, e.g. resnet20 or resnet8")
    segments = [p.numel() for p in resnet_cifar(int(args.model[6:])).parameters()]
    print(f"# {args.model}: {sum(segments):,} parameters in {len(segments)} tensors, compressed per tensor")
    print(f"{'compressor':<26}{'paper MiB':>11}{'wire MiB':>11}")
    for spec in args.compressors:
        comp = make_compressor(spec)
        mib = 8 * 2**20
        print(f"{comp.spec:<26}{comp.paper_bits(segments) / mib:>11.4f}{comp.wire_bits(segments) / mib:>11.4f}")
    return 0
