#!/usr/bin/env bash
# The GPU numbers of the README, in one short session on a machine with a GPU (run from the repo root):
#   1. `bench perf --device cuda` (groups a-g at the paper's sizes: e = ResNet-20 gradients at n = 64,
#      vmap vs loop; f = the runner's whole step of ResNet-20 at 8 x 128 and 64 x 32 and of the 3 x 650
#      LSTM at 32 x 32, vectorised and looped, against one model at the same total batch [targets 1.5x,
#      2x]; g = the CPU target, ResNet-8 at 64 x 4, vectorised vs loop and a short run on both paths);
#   2. group a on the machine's CPU cores (simulated vs one gloo process per worker, more cores than a laptop);
#   3. a Choco-sign ResNet-20 run at n = 64 on the GPU, on synthetic files in CIFAR-10's on-disk format
#      (the step time of the paper-sized model; accuracy means nothing on random images);
#   4. the rehearsal and GPU-hours plan (`bench plan --scale gpu --device cuda`) of $STUDIES, whose
#      plan.csv files belong in results/baselines/ and whose totals belong in docs/plan.md.
# PARTS selects what runs (default "perf cpu run plan"); device time is scarce, so a session that has
# only a few minutes may run e.g. PARTS="plan perf". Results go to $OUT (default results/gpu).
# Missing packages (mnist1d) may be carried as wheels in .devwheels/.
set -euo pipefail
OUT=${OUT:-results/gpu}
PARTS=${PARTS:-perf cpu run plan}
STUDIES=${STUDIES:-table1 scaling social social-lstm}
mkdir -p "$OUT"
has() { [[ " $PARTS " == *" $1 "* ]]; }
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 CHOCO_BENCH_CACHE=${CHOCO_BENCH_CACHE:-/tmp/choco-bench-cache}
if ! python3 -c "import mnist1d" 2>/dev/null && ls .devwheels/*.whl >/dev/null 2>&1; then
    python3 -m pip install --no-deps -q .devwheels/*.whl
fi
python3 -m pytest -q -p no:cacheprovider tests/test_run.py -k cuda 2>&1 | tail -n 3 | tee "$OUT/gpu.txt" || true
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee -a "$OUT/gpu.txt"
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)" | tee -a "$OUT/gpu.txt"
if has plan; then
    for study in $STUDIES; do
        python3 -m bench plan --configfile "config/$study.yaml" --scale gpu --device cuda 2>&1 \
            | tee "$OUT/plan-$study.log" || echo "plan $study FAILED"
        cp "results/$study/plan.csv" "$OUT/plan-$study.csv" 2>/dev/null || true
    done
fi
if has perf; then
    python3 -m bench perf --device cuda --name gpu-h200 --out-dir "$OUT" 2>&1 | tee "$OUT/perf-cuda.log" || echo "perf cuda FAILED"
fi
if has cpu; then
    python3 -m bench perf --device cpu --only a --name cpu-a-$(nproc)core --out-dir "$OUT" 2>&1 | tee "$OUT/perf-cpu-a.log" || echo "perf cpu FAILED"
fi
has run || exit 0
DATA=$(mktemp -d)
python3 -c "import sys; from bench.data.fake import write_cifar; write_cifar(sys.argv[1], 4096, test_size=2048)" \
    "$DATA/cifar-10-batches-py"
python3 -m bench run --task cifar10-resnet20 --algorithm choco --compressor sign --topology ring --nodes 64 \
    --epochs 2 --device cuda --set batch_size=32 --set gamma=0.5 --set "data_root=$DATA" \
    --out "$DATA/run" 2>&1 | tail -n 20 | tee "$OUT/resnet20-n64.log"
cp "$DATA/run/run.json" "$OUT/resnet20-n64-run.json"
python3 - "$DATA/run" <<'PY' | tee -a "$OUT/resnet20-n64.log"
import sys, pandas as pd
m = pd.read_parquet(f"{sys.argv[1]}/metrics.parquet")
print(m[["step", "epoch", "train_loss", "test_acc", "consensus_distance", "time_compute_s", "wall_s"]].to_string())
PY
