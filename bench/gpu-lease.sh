#!/usr/bin/env bash
# One lease of a GPU machine, in one go: the CUDA tests; where each packed epoch's device time
# goes, by kernel group, for this checkout and (where OLD names one) an older one
# (bench/gpu_groups.py); bench/gpu.py (packed against one at a time, eager and as captured CUDA
# graphs, TF32 and deterministic mode, packed against alone at several dropout rates,
# --gpus-per-trial auto's decisions); `orthotune plan` of the paper presets on the GPU, as
# JSON; and what torch.compile makes of a packed layer's elementwise tail (bench/compiled_tail.py,
# its table in the log). Runs where Ray, Optuna and OGB are absent (the planner and the trainer need none of
# them). Every step has its own time limit; each step's output goes to a log, and after every
# step the logs are packed into $OUT/logs.tgz, so a step that runs out of time keeps what it
# measured. At most 6 files come back: logs.tgz and the JSON of each measuring step.
#
#   bash bench/gpu-lease.sh DATA_ROOT [STEP...]   # steps: env tests smoke groups groups-old bench plan-full plan-semi compile
#   OLD=.old bash bench/gpu-lease.sh ...          # .old: an older checkout (git archive COMMIT | tar -x -C .old)
set -u
DATA_ROOT=${1:?usage: bench/gpu-lease.sh DATA_ROOT [STEP...]}
shift
STEPS=${*:-env tests groups groups-old bench plan-full plan-semi compile}
OUT=${OUT:-gpu-out}
LOGS=$(mktemp -d)
mkdir -p "$OUT"
PY=${PYTHON:-python3}
# the repository root is the orthotune package: import it by that name without installing
SITE=$(mktemp -d)
# the temporary folders go when the script ends (rm does not follow the link into the checkout)
trap 'rm -rf "$LOGS" "$SITE" ${OLD_SITE:+"$OLD_SITE"}' EXIT
ln -s "$PWD" "$SITE/orthotune"
export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export ORTHOTUNE_DATA_ROOT="$DATA_ROOT" ORTHOTUNE_CACHE="${ORTHOTUNE_CACHE:-$SITE/cache}"
BENCH_ARGS=${BENCH_ARGS:---graph --cells none --configs 256 --epochs 200 --alone 8 --packs auto \
--equal-configs 4 --equal-epochs 100 --dropouts 0 0.2 0.5}
PARTS=${PARTS:-throughput precision equality shares}
GROUPS_ARGS=${GROUPS_ARGS:---packs 64 256 --graph}
PLAN_ARGS=${PLAN_ARGS:---gpus-per-trial auto}

step() {  # step NAME SECONDS COMMAND...: run with a limit, output to the step's log
    local name=$1 limit=$2
    shift 2
    echo "== $name ($(date -u +%H:%M:%S), limit ${limit}s)"
    timeout "$limit" "$@" > "$LOGS/$name.log" 2>&1
    echo "== $name: exit $? ($(date -u +%H:%M:%S))"
    tail -n "${TAIL:-12}" "$LOGS/$name.log" | cut -c1-400
    tar -czf "$OUT/logs.tgz" -C "$LOGS" .
}

for s in $STEPS; do
    case $s in
        env) step env 30 bash -c "nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv;
              nproc; $PY -c 'import sys, torch, torch_geometric; print(sys.version.split()[0], torch.__version__,
              torch_geometric.__version__, torch.cuda.get_device_name())'" ;;
        tests) step tests "${TESTS_S:-90}" $PY -m pytest -q -p no:cacheprovider -o addopts= ${TEST_ARGS:-\
              tests/training/test_cuda.py} ;;
        smoke) step smoke "${SMOKE_S:-60}" $PY -m orthotune.cli train --dataset cora --epochs 30 --device cuda \
              --no-tf32 --deterministic --cuda-graph --data-root "$DATA_ROOT" --json ;;
        groups) step groups "${GROUPS_S:-60}" $PY bench/gpu_groups.py --data-root "$DATA_ROOT" $GROUPS_ARGS \
              --label "$(git rev-parse --short HEAD 2>/dev/null || echo this)" --out "$OUT/groups.json" ;;
        groups-old) if [ -d "${OLD:-}" ]; then
              OLD_SITE=$(mktemp -d); ln -s "$PWD/$OLD" "$OLD_SITE/orthotune"
              step groups-old "${GROUPS_S:-60}" env PYTHONPATH="$OLD_SITE" $PY bench/gpu_groups.py \
                  --data-root "$DATA_ROOT" $GROUPS_ARGS --label "${OLD_LABEL:-older}" \
                  --out "$OUT/groups-old.json"
              else echo "== groups-old: skipped (OLD names no folder)"; fi ;;
        bench) step bench "${BENCH_S:-200}" $PY bench/gpu.py --data-root "$DATA_ROOT" $BENCH_ARGS \
              --parts $PARTS --out "$OUT/gpu.json" ;;
        plan-full|plan-semi) step "$s" "${PLAN_S:-120}" bash -c "$PY -m orthotune.cli plan --space paper-${s#plan-} \
              --gpus 1 $PLAN_ARGS --data-root '$DATA_ROOT' --json > '$OUT/$s.json'" ;;
        compile) step compile "${COMPILE_S:-150}" $PY bench/compiled_tail.py --device cuda ;;
        *) echo "unknown step $s (env tests smoke groups groups-old bench plan-full plan-semi compile)"; exit 2 ;;
    esac
done
