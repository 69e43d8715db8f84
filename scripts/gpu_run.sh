#!/usr/bin/env bash
# The GPU proof in stages, each sized to one 10-minute call of a lent GPU machine (docs/GPU.md, "Running the GPU
# proof"). Runs with the machine's own python3 and the repository's src/ (PYTHONPATH), nothing installed.
#
#   scripts/gpu_run.sh tests mfu       # pytest -m gpu; ALBERT-large 512 bf16 LAMB: kernel profile + MFU levers
#   scripts/gpu_run.sh demo            # scripts/demo_gpu.py: ALBERT-base pretrained DEMO_MINUTES, then sentiment;
#                                      # then bench/gpu_mfu.py at the demo's shape (demo-mfu.json)
#   scripts/gpu_run.sh experiment      # litebert experiment sentence-objective, EXP_MINUTES per arm
#   scripts/gpu_run.sh loop            # bench/bench_loop.py: the demo's loop against its bare step (loop-vs-step.json);
#                                      # bench/gpu_loop.py: the demo's loop, one change at a time (where its speed goes)
#   scripts/gpu_run.sh labels          # litebert experiment label-efficiency on the demo stage's model (WORK/demo):
#                                      # pretrained, task-adapted, control and bag of words at 250, 1000, all labels
#   scripts/gpu_run.sh all             # all four stages (more than one call's time; more than 8 result files)
#   scripts/gpu_run.sh --dry-run all   # every stage at toy size on the CPU (tests/scripts/test_gpu_script.py)
#
# Results: OUT (default runs/gpu-proof), flat, per stage STAGE.log and STAGE.json (+ STAGE.md, STAGE.png for demo
# and experiment); models, stores and checkpoints stay in WORK (default runs/gpu-work). The stages of one call share
# DEADLINE seconds (default 570): each step gets what is left, a step with too little left is recorded as skipped,
# so the call ends, with its results written, inside the 10-minute cap.
# Environment: PYTHON (python3), OUT, WORK, DEADLINE, DRY_RUN=1 (as --dry-run), DEMO_MINUTES (5), EXP_MINUTES (2),
# MFU_VARIANTS (';'-separated bench/gpu_mfu.py argument lists), TESTS_TIMEOUT (240).
set -uo pipefail
START=$SECONDS  # the call's clock starts here: the CUDA check below imports torch, which takes seconds
cd "$(dirname "$0")/.."
REPO=$(pwd)
PYTHON=${PYTHON:-python3}
OUT=${OUT:-$REPO/runs/gpu-proof}
WORK=${WORK:-$REPO/runs/gpu-work}
DEADLINE=${DEADLINE:-570}
DRY_RUN=${DRY_RUN:-0}
DEMO_MINUTES=${DEMO_MINUTES:-5}
EXP_MINUTES=${EXP_MINUTES:-2}
TESTS_TIMEOUT=${TESTS_TIMEOUT:-240}
export PYTHONPATH="$REPO/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1

stages=()
for arg in "$@"; do
  case "$arg" in
    --dry-run) DRY_RUN=1 ;;
    tests|mfu|demo|experiment|loop|labels) stages+=("$arg") ;;
    all) stages+=(tests mfu demo experiment) ;;
    -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu_run.sh: unknown stage '$arg'; stages: tests mfu demo experiment loop labels all (and --dry-run)" >&2; exit 2 ;;
  esac
done
if [ ${#stages[@]} -eq 0 ]; then
  echo "gpu_run.sh: name the stages to run: tests mfu demo experiment loop labels all (--help)" >&2
  exit 2
fi
if [ "$DRY_RUN" != 1 ] && ! "$PYTHON" -c 'import torch, sys; sys.exit(not torch.cuda.is_available())' 2>/dev/null; then
  echo "gpu_run.sh: $PYTHON sees no CUDA GPU; run on a GPU machine, or with --dry-run for the CPU smoke run" >&2
  exit 2
fi
mkdir -p "$OUT" "$WORK"
status=0

left() { echo $(( DEADLINE - (SECONDS - START) )); }

# step LOG LIMIT CMD...: run CMD with at most LIMIT seconds (and what the call has left, less the 20 s a stopped
# command gets to save its work and 10 s for the summaries), output appended to LOG; returns CMD's status, 124 (or
# 137, killed after the 20 s) when stopped by the time limit, 125 when skipped for lack of time.
step() {
  local log=$1 limit=$2; shift 2
  local budget; budget=$(( $(left) - 30 ))
  [ "$limit" -lt "$budget" ] && budget=$limit
  if [ "$budget" -lt 20 ]; then
    echo "[gpu_run] skipped (only $(left) s of the call left): $*" | tee -a "$log"
    return 125
  fi
  echo "[gpu_run $(date -u +%H:%M:%S)] ($budget s) $*" >>"$log"
  timeout --signal=TERM --kill-after=20 "$budget" "$@" >>"$log" 2>&1
  local rc=$?
  [ $rc -eq 124 ] || [ $rc -eq 137 ] && echo "[gpu_run] stopped at its time limit ($budget s): $*" >>"$log"
  return $rc
}

header() {  # the machine and software, at the top of each stage's log
  {
    echo "# gpu_run.sh $1 $( [ "$DRY_RUN" = 1 ] && echo '(dry run)'), $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
    "$PYTHON" -c 'import sys, torch
print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)'
  } >"$OUT/$1.log" 2>&1
}

stage_tests() {
  header tests
  local files=(tests)
  [ "$DRY_RUN" = 1 ] && files=(tests/system/test_gpu_pretrain.py)  # on a CPU every gpu test skips: collect few
  rm -f "$WORK/tests.xml"  # a run stopped before pytest writes it must not report an earlier call's
  step "$OUT/tests.log" "$TESTS_TIMEOUT" "$PYTHON" -m pytest -m gpu -q -p no:cacheprovider \
    --continue-on-collection-errors --junitxml="$WORK/tests.xml" "${files[@]}"
  local rc=$?
  "$PYTHON" scripts/gpu_summary.py tests "$WORK/tests.xml" "$OUT/tests.json" --exit-status $rc
}

stage_mfu() {
  header mfu
  local common=() variants profile=(--compile)
  if [ "$DRY_RUN" = 1 ]; then
    common=(--device cpu --preset tiny --batch 2 --seq-len 16 --predictions 3 --warmup 1 --steps 1 --peak-tflops 1)
    profile=(--device cpu --preset tiny --batch 2 --seq-len 32 --predictions 4)
    local toy="--dtype fp32 --attention auto;--dtype bf16 --attention math;--dtype fp32 --attention auto --model hf"
    variants=${MFU_VARIANTS:-$toy}
  else  # the compiled step first (it warms the compile cache for the others), HF's beside it, then one lever each
    local levers="--compile;--compile --model hf --attention auto;--compile --compile-optimizer"
    levers+=";--compile --attention cudnn"
    levers+=";--compile --compile-mode max-autotune-no-cudagraphs"  # the longest compile last: cut first
    variants=${MFU_VARIANTS:-$levers}
  fi
  rm -f "$WORK"/mfu-*.json "$WORK"/mfu-*.args "$WORK/profile.json"
  step "$OUT/mfu.log" 150 "$PYTHON" bench/gpu_profile.py "${profile[@]}" --steps 3 --top 25 --json "$WORK/profile.json"
  local i=0 v
  IFS=';' read -ra list <<<"$variants"
  for v in "${list[@]}"; do
    i=$((i + 1))
    # shellcheck disable=SC2086  # each variant is a list of arguments
    step "$OUT/mfu.log" 180 "$PYTHON" bench/gpu_mfu.py ${common[@]+"${common[@]}"} $v --json "$WORK/mfu-$i.json"
    echo "$v" >"$WORK/mfu-$i.args"
  done
  "$PYTHON" scripts/gpu_summary.py mfu "$WORK" "$OUT/mfu.json"
}

stage_demo() {
  header demo
  local args=(--out "$WORK/demo" --minutes "$DEMO_MINUTES" --workers 16)
  [ "$DRY_RUN" = 1 ] && args=(--toy --out "$WORK/demo")
  step "$OUT/demo.log" 100000 "$PYTHON" scripts/demo_gpu.py "${args[@]}"
  local rc=$?
  for f in report.json:demo.json report.md:demo.md pretraining.png:demo.png plateau.json:demo-plateau.json; do
    [ -f "$WORK/demo/${f%%:*}" ] && cp "$WORK/demo/${f%%:*}" "$OUT/${f##*:}"
  done
  # The benchmark's step at the demo's shape and settings (demo_gpu.GPU: ALBERT-base's width at 6 layers, 128 x 128,
  # 20 predictions, bf16, LAMB, not compiled) on synthetic batches: the demo's median MFU over this one is how much
  # of the step's speed the data pipeline and the loop keep.
  local shape=(--preset albert-base-v2 --num-layers 6 --batch 128 --seq-len 128 --predictions 20)
  [ "$DRY_RUN" = 1 ] && shape=(--device cpu --preset tiny --batch 2 --seq-len 16 --predictions 3 --warmup 1
                               --steps 1 --peak-tflops 1 --dtype fp32 --attention auto)
  rm -f "$OUT/demo-mfu.json"
  step "$OUT/demo.log" 90 "$PYTHON" bench/gpu_mfu.py "${shape[@]}" --json "$OUT/demo-mfu.json"
  local brc=$?
  [ $rc -eq 0 ] && rc=$brc
  return $rc
}

stage_experiment() {
  header experiment
  local args
  if [ "$DRY_RUN" = 1 ]; then
    args=(--device cpu --steps 3 --corpus data/corpus/moby_dick.txt.xz --tokenizer data/albert-30k
          --hidden-size 32 --num-layers 2 --embedding-size 16 --seq-len 64 --batch 8 --eval-examples 24
          --sentiment-steps 2 --mc-steps 2 --finetune-batch 8 --max-train-examples 16 --max-eval-examples 30)
  else  # the demo's shape and rate: keep in step with demo_gpu.GPU (docs/EXPERIMENTS.md, "On a GPU")
    local corpus=(data/corpus-large/*.txt.xz)
    if [ ! -f "${corpus[0]}" ]; then
      echo "gpu_run.sh: data/corpus-large/*.txt.xz is missing: build it with python3" \
        "scripts/build_corpus_large.py and carry data/corpus-large" | tee -a "$OUT/experiment.log" >&2
      return 1
    fi
    args=(--device cuda --minutes "$EXP_MINUTES" --corpus "${corpus[@]}" --tokenizer data/albert-30k
          --hidden-size 768 --num-layers 6 --embedding-size 128 --seq-len 128 --batch 128 --lr 0.00176
          --data-workers 6
          --eval-examples 2000 --finetune-batch 32 --finetune-lr 5e-5 --sentiment-steps 600 --mc-steps 300)
  fi
  step "$OUT/experiment.log" 100000 "$PYTHON" -m litebert.cli experiment sentence-objective \
    --out "$WORK/experiment" "${args[@]}"
  local rc=$?
  for f in results.json:experiment.json results.md:experiment.md curves.png:experiment.png; do
    [ -f "$WORK/experiment/${f%%:*}" ] && cp "$WORK/experiment/${f%%:*}" "$OUT/${f##*:}"
  done
  return $rc
}

stage_labels() {
  header labels
  local model="$WORK/demo/pretrain/model" args
  if [ ! -f "$model/config.json" ]; then
    echo "gpu_run.sh: $model is missing: the labels stage reads the demo stage's model (run demo first, same WORK)" \
      | tee -a "$OUT/labels.log" >&2
    return 1
  fi
  # the GPU demo's own fine-tuning rates (demo_gpu.py); three seeds below the whole split, TAPT 300 steps
  args=(--device cuda --sizes 250,1000,all --seeds 3 --seq-len 128 --finetune-batch 32 --tapt-steps 300
        --lrs 1e-5,3e-5,1e-4 --control-lrs 3e-5,1e-4)
  [ "$DRY_RUN" = 1 ] && args=(--device cpu --sizes 40,all --seeds 2 --seq-len 32 --finetune-batch 8 --min-steps 2
                              --epochs 0.001 --evaluations 1 --tapt-steps 2 --lrs 1e-4 --control-lrs 1e-4)
  step "$OUT/labels.log" 100000 "$PYTHON" -m litebert.cli experiment label-efficiency --model "$model" \
    --out "$WORK/labels" "${args[@]}"
  local rc=$?
  for f in results.json:labels.json results.md:labels.md label-efficiency.png:labels.png; do
    [ -f "$WORK/labels/${f%%:*}" ] && cp "$WORK/labels/${f%%:*}" "$OUT/${f##*:}"
  done
  return $rc
}

stage_loop() {
  header loop
  # the real loop against its bare step at the GPU demo's shape, blocks of one read interval (10 steps)
  local pairs=(--device cuda --shapes gpu-demo --pairs 30) args=(--steps 300 --store "$WORK/loop/store-30k")
  if [ "$DRY_RUN" = 1 ]; then
    pairs=(--device cpu --shapes tiny --pairs 2 --warmup 1 --block 3 --toy)
    args=(--device cpu --toy --steps 12 --skip 2)  # its own toy store (the 30k vocabulary)
  fi
  rm -f "$OUT/loop-vs-step.json"
  step "$OUT/loop.log" 240 "$PYTHON" bench/bench_loop.py "${pairs[@]}" --no-doc --work "$WORK/loop" \
    --json "$OUT/loop-vs-step.json"
  local rc=$?
  step "$OUT/loop.log" 480 "$PYTHON" bench/gpu_loop.py "${args[@]}" --work "$WORK/loop" --json "$OUT/loop.json"
  local grc=$?
  [ $rc -eq 0 ] && rc=$grc
  return $rc
}

for s in "${stages[@]}"; do
  echo "[gpu_run] stage $s ($(left) s of the call left)"
  "stage_$s"
  rc=$?
  echo "[gpu_run] stage $s: exit status $rc ($(( SECONDS - START )) s since the start)" | tee -a "$OUT/$s.log"
  [ $rc -ne 0 ] && status=1
done
ls -l "$OUT"
exit $status
