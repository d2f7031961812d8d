#!/usr/bin/env bash
# One lease of a GPU machine, in one go: the CUDA tests, bench/gpu.py (packed and alone,
# kernels and launches per epoch eager and as captured CUDA graphs, TF32 and deterministic
# mode, packed against alone, --gpus-per-trial auto's decisions) and `orthotune plan` of the
# paper presets on the GPU. Runs where Ray, Optuna and OGB are absent (the planner and the
# trainer need none of them). Every step has its own time limit; what each step prints goes to
# $OUT (or ./gpu-out) as it runs, so a step that runs out of time keeps what it measured.
#
#   bash bench/gpu-lease.sh DATA_ROOT [STEP...]    # steps: env tests bench plan-full plan-semi
set -u
DATA_ROOT=${1:?usage: bench/gpu-lease.sh DATA_ROOT [STEP...]}
shift
STEPS=${*:-env tests bench plan-full}
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
# the repository root is the orthotune package: import it by that name without installing
SITE=$(mktemp -d)
ln -s "$PWD" "$SITE/orthotune"
export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export ORTHOTUNE_DATA_ROOT="$DATA_ROOT" ORTHOTUNE_CACHE="${ORTHOTUNE_CACHE:-$SITE/cache}"
BENCH_ARGS=${BENCH_ARGS:---graph --cells none --configs 256 --epochs 200 --alone 16 --packs 16 64 256 auto}
PARTS=${PARTS:-per_epoch throughput equality shares precision}

step() {  # step NAME SECONDS COMMAND...: run with a limit, output to $OUT/NAME.log
    local name=$1 limit=$2
    shift 2
    echo "== $name ($(date -u +%H:%M:%S), limit ${limit}s)"
    timeout "$limit" "$@" > "$OUT/$name.log" 2>&1
    echo "== $name: exit $? ($(date -u +%H:%M:%S))"
    tail -n "${TAIL:-40}" "$OUT/$name.log"
}

for s in $STEPS; do
    case $s in
        env) step env 30 bash -c "nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv;
              nproc; $PY -c 'import sys, torch, torch_geometric; print(sys.version.split()[0], torch.__version__,
              torch_geometric.__version__, torch.cuda.get_device_name())'" ;;
        tests) step tests "${TESTS_S:-90}" $PY -m pytest -q -p no:cacheprovider -o addopts= ${TEST_ARGS:-\
              -k "not graph_task" tests/training/test_cuda.py tests/training/test_loop.py tests/training/test_packing.py} ;;
        bench) step bench "${BENCH_S:-240}" $PY bench/gpu.py --data-root "$DATA_ROOT" $BENCH_ARGS \
              --parts $PARTS --out "$OUT/gpu.json" ;;
        plan-full|plan-semi) step "$s" "${PLAN_S:-120}" $PY -m orthotune.cli plan --space "paper-${s#plan-}" \
              --gpus-per-trial "${GPUS_PER_TRIAL:-0.125}" --data-root "$DATA_ROOT" ;;
        *) echo "unknown step $s (env tests bench plan-full plan-semi)"; exit 2 ;;
    esac
done
