#!/usr/bin/env bash
# The trainer's checks on a CUDA GPU, in one run: the trainer's tests (CUDA-only ones included: compiled
# FlexAttention, the shape ladder's sync checks, bf16, compile == eager) and bench_train's step times and model
# FLOPs utilisation (MFU) of every switch, base and tiny presets, bf16. Logs go to $OUT (default: gpu_check_out/).
#   bash benchmarks/gpu_check.sh [tests|bench|all] [pytest -n workers]
#   bash benchmarks/gpu_check.sh pairs OLD_TREE   # step times before/after a change: this tree and OLD_TREE (made by
#       `git archive REV synprep syntrain benchmarks | tar -x -C OLD_TREE`) alternating, each with its own bench
#       script and count_ops (PAIRS rounds, default 3; PRESET default base; MAX_TOKENS default 16384)
# Needs the project's dependencies importable (pip install -e '.[train]' with a CUDA build of torch) and pytest-xdist.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu_check_out}; mkdir -p "$OUT"
what=${1:-all}; workers=${2:-12}
if [ "$what" = pairs ]; then
  old=${2:?"pairs needs the older tree's folder"}
  for round in $(seq "${PAIRS:-3}"); do
    for tree in "$old" "$PWD"; do
      name=$([ "$tree" = "$PWD" ] && echo after || echo before)
      PYTHONPATH="$tree${PYTHONPATH:+:$PYTHONPATH}" python3 "$tree/benchmarks/bench_train.py" --preset "${PRESET:-base}" \
        --precision bf16 --attention-dropout 0 --max-tokens "${MAX_TOKENS:-16384}" --steps 10 --rounds 2 \
        --switches pascal 2>&1 | grep -E "^(vanilla|pascal) |^host" | sed "s|^|$name $round: |" | tee -a "$OUT/pairs.log"
    done
  done
  for tree in "$old" "$PWD"; do
    PYTHONPATH="$tree${PYTHONPATH:+:$PYTHONPATH}" python3 benchmarks/count_ops.py --steps 20 2>&1 \
      | grep -E "^(vanilla|pascal) " | sed "s|^|$tree: |" | tee -a "$OUT/pairs.log"
  done
  exit 0
fi
export SYNPREP_PROGRESS_SECONDS=3600 PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/device.txt"
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)" | tee -a "$OUT/device.txt"
TESTS="tests/test_syntrain.py tests/test_shapes_compile.py tests/test_attention_ops.py tests/test_declared_embedding.py
  tests/test_model_config.py tests/test_new_column.py tests/test_switch_compat.py tests/test_switch_registry.py
  tests/test_syntax_switches.py tests/test_syntrain_cli.py tests/test_toy_switch.py tests/test_tree_decoding.py
  tests/test_faults_run.py tests/test_precision.py tests/test_faults_outputs.py"
if [ "$what" != bench ]; then
  timeout "${TEST_SECONDS:-240}" python3 -m pytest -p no:cacheprovider -n "$workers" -v -rfEs --durations=15 $TESTS \
    2>&1 | grep -v "^\[gw[0-9]*\] \[ *[0-9]*%\] PASSED" | tee "$OUT/tests.log"
fi
if [ "$what" != tests ]; then
  for preset in base tiny; do
    timeout "${BENCH_SECONDS:-100}" python3 benchmarks/bench_train.py --preset "$preset" --precision bf16 \
      --attention-dropout 0 --max-tokens "${MAX_TOKENS:-16384}" --steps 10 --rounds 2 \
      --switches pascal,directed,directed-double,dbsa,syncattn,lisa,sh,linearized,parent,gcn 2>&1 | tee "$OUT/bench_$preset.log"
  done
fi
