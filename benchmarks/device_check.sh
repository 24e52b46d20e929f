#!/usr/bin/env bash
# Everything to measure on one GPU (the default parts about 11 minutes, the main job about 10), for
# benchmarks/README.md ("On a GPU") and docs/results/main_gpu.md. The host has no network: it installs from a
# wheelhouse made beforehand on a
# machine with network, holding what the host's image lacks, e.g.
#   ./launch.sh wheelhouse .device/wheelhouse --python-version=3.12 --skip=jax,jaxlib,numpy,scipy,matplotlib,\
#       pyarrow,grpcio,h5py,tensorstore,pillow,contourpy,fonttools,kiwisolver,ml-dtypes,opencv-python-headless,lxml
# (the large packages a GPU image has; the small ones travel, so a version the image lacks is at hand), and the
# prepared corpus as data_cache/ (the main job's data.data_dir) or the wheelhouse's SWORD modules.
# then, on the GPU host (the folder carried along, ignored by git):
#   ATTNMT_WHEELHOUSE=.device/wheelhouse OUT=/somewhere benchmarks/device_check.sh
# Parts, each with its own time limit so that one slow part leaves the others their time, in this order:
#   compile       one variant of the main job (5 seeds, 400 steps, no analysis) from an empty compilation cache,
#                 with every training width its own shape (data.train_shapes=0) and with one (=1): the wall time
#                 and the time to the first step, the host's compilation against the device's work (JSON in the log);
#   kernels       the fused Pallas kernels (attnmt/model/kernels/) against the readable step, in one decoder
#                 recurrence at the main job's and the bench config's sizes (benchmarks/kernels.py, 60 s each):
#                 time per step, kernels per step, and whether they equal it, the first check of the Triton
#                 kernels on a GPU (JSON in the log);
#   fused_step    the bench config's whole training step with model.kernels=pallas against the readable one
#                 (tools/ab_step, paired), then profiled on the device's timeline (kernels per step, by kind);
#   seeds         the main job's model: K = 1, 2, 4, 5, 8, 16, 32 seeds in one vmapped program (per-seed cost);
#   profile       the bench config's training step on the device's timeline: kernels per step, the device's
#                 busy time against the step's wall time (launch-bound or not), by kind; keeps the trace;
#   concurrent    5 processes of 5 vmapped seeds sharing the device (the main job's layout) against one alone;
#   decode_seeds  greedy decoding by the main job's 5 seeds: one vmapped program against the seeds in turn;
#   unroll        the bench config's step with every scan unrolled 2, 4 and 8 steps (tools/ab_step, paired);
#   host          the main job's training of one variant (5 seeds, 400 steps) under cProfile: where the
#                 host's time goes (train_host.prof, read with python -m pstats; written when the command
#                 ends, after the final evaluation and analysis: 150 s were too few on an H100, 300 now);
#   bench         the bench config, float32 (train step, greedy, beam);   bf16  its train step in bfloat16;
#   main          the main job with 5 seeds per variant (none, additive, dot, general, concat), end to end, its
#                 variants as 5 processes at once;   main_one  the same job as one process.
# ATTNMT_DEVICE_PARTS picks the parts (default: every one but host and the main jobs, about 11 minutes; main alone
# about 10; each resumes from $WORK when the script runs again on the same, still warm, machine). A cut run still
# returns what the earlier parts wrote.
# Outputs (at most 8 files, flat, as the device tool returns them) go to $OUT.
# ATTNMT_DEVICE_CHECK=dry runs the parts tiny on whatever backend is there (the suite runs it on the CPU): the
# bench parts on the tests' tiny model (float32 only), the main job on the synthetic task, 2 steps, two shards
# (one batch shape: each new length bucket would compile the step again), kernels on the tiny size in Pallas's
# interpreter; profile, unroll and fused_step are the tools' own tests' (tests/benchmarks/test_tools.py) and do not
# run dry.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/attnmt_device_check}
DRY=${ATTNMT_DEVICE_CHECK:-}
WORK=${ATTNMT_DEVICE_WORK:-/tmp/attnmt_device_work}
PARTS=${ATTNMT_DEVICE_PARTS:-compile,kernels,fused_step,seeds,profile,concurrent,decode_seeds,unroll,bench,bf16}  # main: name it
ALL_PARTS=compile,kernels,fused_step,seeds,profile,concurrent,decode_seeds,unroll,host,bench,bf16,main,main_one
# Checked before anything is written: a misspelt part would be skipped silently, and without a GPU every
# figure would be the CPU's (the dry run is meant for any backend).
for part in ${PARTS//,/ }; do
  [[ ",$ALL_PARTS," == *",$part,"* ]] || {
    echo "device_check.sh: unknown part '$part' in ATTNMT_DEVICE_PARTS; the parts are ${ALL_PARTS//,/, }" >&2
    exit 2
  }
done
if [ -z "$DRY" ] && ! nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
  echo "device_check.sh: no GPU here (nvidia-smi lists none), so it would measure the CPU; run it on the GPU host (ATTNMT_DEVICE_CHECK=dry for the dry run on any backend)" >&2
  exit 1
fi
mkdir -p "$OUT" "$WORK"
LOG=$OUT/device_check.log
: > "$LOG"
say() { echo "== $* ($(date -u +%H:%M:%S))" | tee -a "$LOG"; }
step() {  # step SECONDS NAME COMMAND...: runs it with a time limit; a failure or timeout is logged, not fatal
  local limit=$1 name=$2 start rc
  shift 2
  say "$name"
  start=$(date +%s)
  if [ "$(type -t "$1")" = function ]; then  # a shell function sets its own time limits
    "$@" >> "$LOG" 2>&1
  else
    timeout "$limit" "$@" >> "$LOG" 2>&1
  fi
  rc=$?
  say "$name: exit $rc after $(($(date +%s) - start)) s$([ $rc = 124 ] && echo ' (time limit)')"
}

if [ -n "$DRY" ]; then
  quick=(--quick --steps=2 --model=tiny) seeds=1,2 only_bench=train slow=4  # the tests' tiny model
  decode_k=2 sharing=2 sharing_steps=20 host_steps=2
  shards=2 mem_fraction=0.5 train_limit=600 report_limit=300
  kernel_sizes=tiny kernel_limit=240
  main_flags=(--config.data.name=synthetic_numbers --config.data.synthetic_size=300 --config.data.synthetic_eval_size=40
    --config.data.tokenizer=word --config.data.vocab_size=64 --config.data.max_source_length=16
    --config.data.max_target_length=32 --config.data.fixed_source_length=16 --config.data.fixed_target_length=32
    --config.model.embed_size=16 --config.model.encoder_hidden_size=16
    --config.model.decoder_hidden_size=32 "--config.sweep.query_timings=bahdanau(deep_output_size=16)"
    --config.train.num_steps=2 --config.train.eval_every=0 --config.train.checkpoint_every=2
    "--config.sweep.scores=none,additive(size=16)" --config.train.seeds=0,1 --config.sweep.processes=1
    "--config.data.data_dir=$WORK/data")
else
  quick=(--steps=5 --model=main) seeds=1,2,4,5,8,16,32 only_bench=train,decode slow=1
  # 200 steps overlapped 10 % (compilations skew the starts); 1,500 ran past a 90 s limit: 1,000 within 180 s
  decode_k=5 sharing=5 sharing_steps=${ATTNMT_SHARING_STEPS:-1000}
  # One variant per process, 12 GB each on 80 GB. On an H100 the main job trained in 441 s and reported in
  # about 119 s (docs/results/main_gpu.md): with the other parts it needs more than one 10-minute call.
  shards=5 mem_fraction=0.15 train_limit=470 report_limit=150 host_steps=400
  kernel_sizes="main bench" kernel_limit=60   # per size; the JSON grows case by case, so a cut keeps what it has
  main_flags=(--config.sweep.scores=none,additive,dot,general,concat)   # train.seeds=auto: 5 on an accelerator
fi

say "device"
{
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
  ./launch.sh train --helpshort >/dev/null   # the set-up (from ATTNMT_WHEELHOUSE when set), once
  "${ATTNMT_VENV:-.venv}/bin/python" -c 'import jax, sys; from importlib import metadata as m
print(sys.version.split()[0], jax.devices(), jax.default_backend())
print(*(f"{p} {m.version(p)}" for p in ("jax", "jaxlib", "flax", "optax", "orbax-checkpoint", "numpy", "tensorflow-datasets", "sacrebleu")), sep=", ")'
} >> "$LOG" 2>&1 || say "device: set-up failed (see above)"
PY=${ATTNMT_VENV:-.venv}/bin/python
if [ -z "$DRY" ]; then  # nvidia-smi saw a GPU; jax must too, or every figure would be the CPU's
  backend=$("$PY" -c 'import jax; print(jax.default_backend())' 2>/dev/null | tail -n 1)
  [ "$backend" = gpu ] || {
    echo "device_check.sh: jax in ${ATTNMT_VENV:-.venv} sees no GPU (backend ${backend:-none: jax did not load}), so it would measure the CPU; install jax with CUDA there (the set-up is in $LOG)" | tee -a "$LOG" >&2
    exit 1
  }
fi
want() { [[ ",$PARTS," == *",$1,"* ]]; }
# Compilation per variant: the same variant from an empty compilation cache with every width its own shape, then
# with one shape (data.train_shapes=1), each compiled ahead on the host's threads (attnmt/training/shapes.py).
compile_once() {
  local k cache
  for k in 0 1; do
    cache="$WORK/compile_cache_$k"  # empty: what is timed is the compilation (the dry run times nothing: its cache)
    [ -z "$DRY" ] || cache=${JAX_COMPILATION_CACHE_DIR:-$cache}
    JAX_COMPILATION_CACHE_DIR="$cache" "$PY" -m benchmarks.wall --out="$WORK/compile_$k.json" -- \
      ./launch.sh main "--workdir=$WORK/compile_$k" "${main_flags[@]}" --config.sweep.scores=additive \
      --config.data.train_shapes=$k --config.train.num_steps=$host_steps --config.train.eval_every=0 \
      --config.sweep.analyze=false > "$WORK/compile_$k.log" 2>&1 || { tail -n 5 "$WORK/compile_$k.log"; return 1; }
    grep -E 'train_shapes|step/s' "$WORK/compile_$k.log" | tr '\r' '\n' | grep -E 'train_shapes| 1/' | tail -n 2
  done
  "$PY" -c 'import json, sys; print(json.dumps({k: json.load(open(p)) for k, p in zip(("every_width", "one_shape"), sys.argv[2:])}, indent=1))' \
    - "$WORK/compile_0.json" "$WORK/compile_1.json"  # into the log: the device returns at most 8 files
}
want compile && step 0 "one variant: every width, then one shape" compile_once
# The fused kernels against the readable step, one process per size; each size's JSON into the log, also when the
# time limit cut it short.
fused_kernels() {
  local size rc=0
  for size in $kernel_sizes; do
    rm -f "$WORK/kernels_$size.json"
    timeout "$kernel_limit" "$PY" -m benchmarks.kernels --size=$size ${DRY:+--dry} --out="$WORK/kernels_$size.json" || rc=$?
    [ -f "$WORK/kernels_$size.json" ] && cat "$WORK/kernels_$size.json" && echo
  done
  return $rc
}
want kernels && step 0 "fused kernels against the readable step ($kernel_sizes)" fused_kernels
[ -n "$DRY" ] || ! want fused_step || step 120 "the training step with the fused kernels (bench config, paired)" "$PY" -m tools.ab_step \
  --pairs=30 --variants='{"pallas": {"model": {"kernels": "pallas"}}}'
[ -n "$DRY" ] || ! want fused_step || step 90 "the fused step on the device's timeline (bench config)" "$PY" -m tools.profile_step \
  --kernels=pallas
want seeds && step $((170 * slow)) "main model, seeds $seeds vmapped" "$PY" -m benchmarks.bench "${quick[@]}" --only=seeds --seeds=$seeds --out="$OUT/bench_main_seeds.json"
[ -n "$DRY" ] || ! want profile || step 60 "training step on the device's timeline (bench config)" "$PY" -m tools.profile_step --keep_trace="$OUT"
# The main job's layout on one device: N processes of K vmapped seeds at once (no probes between the timed steps:
# each process's would load the others'), against one such process alone.
concurrent() {
  local pids=() i
  local args=("${quick[@]}" --steps=$sharing_steps --only=seeds --seeds=$decode_k --noprobe)
  timeout $((60 * slow)) "$PY" -m benchmarks.bench "${args[@]}" --out="$WORK/alone.json" > "$WORK/alone.log" 2>&1 || return
  for ((i = 0; i < sharing; i++)); do
    XLA_PYTHON_CLIENT_MEM_FRACTION=0.15 timeout $((180 * slow)) "$PY" -m benchmarks.bench "${args[@]}" \
      --out="$WORK/together_$i.json" > "$WORK/together_$i.log" 2>&1 &
    pids+=($!)
  done
  for i in "${!pids[@]}"; do wait "${pids[$i]}" || { tail -n 5 "$WORK/together_$i.log"; return 1; }; done
  "$PY" -m benchmarks.sharing "$WORK/alone.json" "$WORK"/together_*.json --out="$OUT/sharing.json"
}
want concurrent && step 0 "$sharing processes of $decode_k seeds at once" concurrent
want decode_seeds && step $((60 * slow)) "main model, greedy decode by $decode_k seeds" "$PY" -m benchmarks.bench "${quick[@]}" --only=decode_seeds --decode_seeds=$decode_k --out="$OUT/bench_main_decode_seeds.json"
[ -n "$DRY" ] || ! want unroll || step 100 "scans unrolled 2, 4, 8 (bench config, paired)" "$PY" -m tools.ab_step --pairs=30 \
  --variants='{"unroll2": {"patch": "tools.scan_unroll:by2"}, "unroll4": {"patch": "tools.scan_unroll:by4"}, "unroll8": {"patch": "tools.scan_unroll:by8"}}'
[ -n "$DRY" ] || ! want bench || step 70 "bench config, float32" "$PY" -m benchmarks.bench --steps=5 --only=$only_bench --out="$OUT/bench_f32.json"
[ -n "$DRY" ] || ! want bf16 || step 45 "bench config, bfloat16" "$PY" -m benchmarks.bench --steps=5 --only=train --dtype=bfloat16 --out="$OUT/bench_bf16.json"
host_profile() {
  timeout $((300 * slow)) "$PY" -m cProfile -o "$OUT/train_host.prof" -m experiments.sweep \
    --config=experiments/configs/main_ablation.py "--workdir=$WORK/host" "${main_flags[@]}" \
    --config.sweep.scores=additive --config.train.num_steps=$host_steps --config.train.eval_every=0 \
    && "$PY" -c 'import pstats, sys; pstats.Stats(sys.argv[1]).sort_stats("cumulative").print_stats(25)' "$OUT/train_host.prof"
}
want host && step 0 "the main job's loop on the host (cProfile)" host_profile
# The main job: its variants train at once, one process (shard) each, on the one device (a small model leaves
# the chip mostly idle, so their launches interleave); then one process writes the tables and the analysis of
# the variants that finished (sweep.report_only), so a run cut by the time limit still reports what it has.
main_job() {
  local pids=() i
  for ((i = 0; i < shards; i++)); do
    XLA_PYTHON_CLIENT_MEM_FRACTION=$mem_fraction timeout "$train_limit" ./launch.sh main "--workdir=$WORK/main" \
      "${main_flags[@]}" "--config.sweep.shard=$i/$shards" > "$WORK/shard_$i.log" 2>&1 &
    pids+=($!)
  done
  for i in "${!pids[@]}"; do
    wait "${pids[$i]}"
    echo "shard $i/$shards: exit $? after $(($(date +%s) - start)) s; last lines:"
    grep -v 'train:' "$WORK/shard_$i.log" | tail -n 4
  done
  timeout "$report_limit" ./launch.sh main "--workdir=$WORK/main" "${main_flags[@]}" --config.sweep.report_only=true
}
if want main; then
  start=$(date +%s)
  step 0 "main job" main_job  # its own limits: train_limit, then report_limit
  echo "main job wall time: $(($(date +%s) - start)) s" | tee -a "$LOG"
  for f in results.md analysis/analysis.md; do
    [ -f "$WORK/main/$f" ] && cp "$WORK/main/$f" "$OUT/main_$(basename "$f")"
  done
  (cd "$WORK" && tar czf "$OUT/main_extra.tgz" --ignore-failed-read shard_*.log main/*.png main/*.json main/*.csv \
    main/analysis/*.png main/analysis/*.json main/analysis/translations.json.gz 2>/dev/null)  # curves, seeds, logs
fi
# The same job as one process, the sweep's own layout on an accelerator (the variants one after another, each
# with its seeds vmapped), for the wall time against the shards at once; its results.md for the seeds' scores.
if want main_one; then
  start=$(date +%s)
  step "$train_limit" "main job, one process" ./launch.sh main "--workdir=$WORK/main_one" "${main_flags[@]}"
  echo "main job (one process) wall time: $(($(date +%s) - start)) s" | tee -a "$LOG"
  [ -f "$WORK/main_one/results.md" ] && cp "$WORK/main_one/results.md" "$OUT/main_one_results.md"
fi
say "done"
