#!/usr/bin/env bash
# Everything to measure on one GPU, in one run of about 10 minutes, for benchmarks/README.md ("On a GPU")
# and docs/results/main_gpu.md. The host has no network: it installs from a wheelhouse made beforehand on a
# machine with network, holding what the host's image lacks, e.g.
#   ./launch.sh wheelhouse .device/wheelhouse --python-version=3.12 \
#       --skip=jax,jaxlib,flax,optax,orbax-checkpoint,numpy,scipy,matplotlib,sacrebleu,sentencepiece,absl-py,tqdm
# then, on the GPU host (the folder carried along, ignored by git):
#   ATTNMT_WHEELHOUSE=.device/wheelhouse OUT=/somewhere benchmarks/device_check.sh
# Steps, each with its own time limit so that one slow step leaves the others their time:
#   1. the device and versions;  2. the bench config, float32 and bfloat16 (train step, greedy, beam);
#   3. the main job's model: K = 1, 2, 4, 8, 16, 32 seeds vmapped;  4. the main job with 5 seeds per variant
#   (none, additive, dot, general, concat), end to end, timed, with its verdicts and translations;
#   5. the training step by part (the scan's per-step overhead against the products).
# Outputs (at most 8 files, flat, as the device tool returns them) go to $OUT. The limits add up to under
# 10 minutes; the main job resumes from $WORK when the script runs again on the same (warm) machine.
# ATTNMT_DEVICE_CHECK=dry runs every step tiny on whatever backend is there (the suite runs it on the CPU): the
# bench steps on the main job's model (float32 only), the main job on the synthetic task, 2 steps, one process.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/attnmt_device_check}
DRY=${ATTNMT_DEVICE_CHECK:-}
WORK=${ATTNMT_DEVICE_WORK:-/tmp/attnmt_device_work}
mkdir -p "$OUT" "$WORK"
LOG=$OUT/device_check.log
: > "$LOG"
say() { echo "== $* ($(date -u +%H:%M:%S))" | tee -a "$LOG"; }
step() {  # step SECONDS NAME COMMAND...: runs it with a time limit; a failure or timeout is logged, not fatal
  local limit=$1 name=$2 start rc
  shift 2
  say "$name"
  start=$(date +%s)
  timeout "$limit" "$@" >> "$LOG" 2>&1
  rc=$?
  say "$name: exit $rc after $(($(date +%s) - start)) s$([ $rc = 124 ] && echo ' (time limit)')"
}

if [ -n "$DRY" ]; then
  quick=(--quick --steps=2 --model=main) seeds=1,2 only_bench=train main_limit=600 slow=4  # the main job's model
  main_flags=(--config.data.name=synthetic_numbers --config.data.synthetic_size=300 --config.data.synthetic_eval_size=40
    --config.data.tokenizer=word --config.data.vocab_size=64 --config.data.max_source_length=16
    --config.data.max_target_length=32 --config.model.embed_size=16 --config.model.encoder_hidden_size=16
    --config.model.decoder_hidden_size=32 --config.model.attention_size=16 --config.model.output_size=16
    --config.train.num_steps=2 --config.train.eval_every=0 --config.train.checkpoint_every=2
    --config.sweep.scores=none,additive --config.train.seeds=0,1 --config.sweep.processes=1
    "--config.data.data_dir=$WORK/data")
else
  quick=(--steps=5) seeds=1,2,4,8,16,32 only_bench=train,decode main_limit=240 slow=1
  main_flags=(--config.sweep.scores=none,additive,dot,general,concat)   # train.seeds=auto: 5 on an accelerator
fi

say "device"
{
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
  ./launch.sh train --helpshort >/dev/null   # the set-up (from ATTNMT_WHEELHOUSE when set), once
  "${ATTNMT_VENV:-.venv}/bin/python" -c 'import jax, flax, sys; print(sys.version.split()[0], "jax", jax.__version__, "flax", flax.__version__, jax.devices())'
} >> "$LOG" 2>&1 || say "device: set-up failed (see above)"
PY=${ATTNMT_VENV:-.venv}/bin/python
step $((90 * slow)) "bench config, float32" "$PY" -m benchmarks.bench "${quick[@]}" --only=$only_bench --out="$OUT/bench_f32.json"
[ -n "$DRY" ] || step 90 "bench config, bfloat16" "$PY" -m benchmarks.bench "${quick[@]}" --only=$only_bench --dtype=bfloat16 --out="$OUT/bench_bf16.json"
step $((100 * slow)) "main model, seeds $seeds vmapped" "$PY" -m benchmarks.bench "${quick[@]}" --model=main --only=train,seeds --seeds=$seeds --out="$OUT/bench_main_seeds.json"
start=$(date +%s)
step "$main_limit" "main job" ./launch.sh main "--workdir=$WORK/main" "${main_flags[@]}"
echo "main job wall time: $(($(date +%s) - start)) s" | tee -a "$LOG"
for f in results.md analysis/analysis.md analysis/translations.json.gz; do
  [ -f "$WORK/main/$f" ] && cp "$WORK/main/$f" "$OUT/main_$(basename "$f")"
done
[ -n "$DRY" ] || step 60 "training step by part (bench config)" "$PY" -m tools.profile_step
say "done"
