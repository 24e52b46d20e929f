r"""Where the bench-config training step (or the main job's: --model=main) spends its time: per part, measured
against its FLOPs.

    python -m tools.profile_step                  # 3 profiled steps after warm-up; prints a table
    python -m tools.profile_step --kernels=pallas # the same with the fused Pallas kernels (model.kernels, a GPU)
    python -m tools.profile_step --variants='{"mine": {"patch": "my_patches:old_loss"}}' --rounds=8
    python -m tools.profile_step --model=main --rows=32 --width=40   # the main job's model, one row block's batch

Traces the jitted, state-donating `train_step` with `jax.profiler`, reads the trace back
(`jax.profiler.ProfileData`) and assigns every executed HLO op of the step to a part by the
`op_name` metadata that JAX gives it (read from the compiled module's HloModuleProto): forward or
backward (`transpose(...)`) of the encoder, the decoder (its scan, embeddings and keys), the output
layer, the vocabulary projection and loss, and the rest (optimiser, zero-filled buffers the scans
write into). For each part it reports the wall time during which at least one thread ran one of its
ops (parts run one after another, so these add up to about the step), the busy time summed over
threads, and the time the part's model FLOPs (benchmarks/flops.py) would take at the measured
matmul peak. Busy time counts the thread that runs each op; work a library product hands to its own
worker tasks is not in it, so for the large products busy is about the wall time, not twice it,
and an Eigen product running alone may be missing from its part (the step time still includes it).

On an accelerator the trace also has the device's own timeline: `benchmarks.traces.device_kernels` counts the kernels a
step launches and the time the device is busy running them (their union over streams), by kind of
kernel (matrix products, copies and fills, the rest), against the step's wall time. A step whose
device is idle most of its wall time is bound by launching kernels, not by running them (jax issue
2491). `--keep_trace=DIR` keeps the trace (`profile_step.xplane.pb`) to read again elsewhere.

With `--variants` (tools/variants.py) it profiles the step as it is, a second compilation of it
(the control) and every variant in interleaved rounds, and reports each part's median paired
difference from `base`: part times resolve changes of a few ms that whole-step timings cannot.
"""

from __future__ import annotations

import collections
import dataclasses
import glob
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import jax
from absl import app, flags

from attnmt.model import forms
from attnmt.model.config import ModelConfig
from benchmarks import cases, flops, traces
from benchmarks.timing import matmul_peak
from tools import variants as variants_lib

PARTS = (
  'encoder fwd',
  'decoder fwd',
  'output layer fwd',
  'vocab + loss fwd',
  'vocab + loss bwd',
  'output layer bwd',
  'decoder bwd',
  'encoder bwd',
  'optimiser',
  'no op_name (XLA copies, zero fills)',
)
# Ops that only run other ops (a loop, a branch, a call): their trace events contain their body's.
_CONTAINERS = ('while', 'conditional', 'call')


def part_of(op_name: str) -> str:
  """The part of the step an op belongs to, from its JAX `op_name` metadata."""
  if not op_name:
    return 'no op_name (XLA copies, zero fills)'
  backward = 'transpose(' in op_name
  if 'decoder.token_nll' in op_name:  # fused_loss.projected_nll, whose op_names also read '/decoder'
    return 'vocab + loss bwd' if backward else 'vocab + loss fwd'
  if 'Seq2Seq.encode' in op_name:
    return 'encoder bwd' if backward else 'encoder fwd'
  if '_output_features' in op_name:
    return 'output layer bwd' if backward else 'output layer fwd'
  if '/decoder' in op_name:
    return 'decoder bwd' if backward else 'decoder fwd'
  if 'jvp()' in op_name:
    return 'vocab + loss bwd' if backward else 'vocab + loss fwd'
  return 'optimiser'


def ideal_gflop(cfg: ModelConfig, b: int, s: int, t: int) -> dict[str, float]:
  """Model GFLOP per part, split the way `part_of` splits the ops (backward = 2 x forward)."""
  enc = (flops.encoder_flops(cfg, b, s) + flops.memory_flops(cfg, b, s)) / 1e9
  g = forms.build(cfg).output_size()  # the width the vocabulary projection reads (bahdanau's deep output)
  vocab = 2 * b * t * g * cfg.target_vocab_size / 1e9
  out = 2 * b * t * (cfg.decoder_hidden_size + cfg.annotation_size + cfg.embed_size) * g / 1e9
  dec = flops.decoder_flops(cfg, b, s, t) / 1e9 - vocab - out
  fwd = {'encoder': enc, 'decoder': dec, 'output layer': out, 'vocab + loss': vocab}
  result = {f'{k} fwd': v for k, v in fwd.items()}
  result.update({f'{k} bwd': 2 * v for k, v in fwd.items()})
  result['optimiser'] = result['no op_name (XLA copies, zero fills)'] = 0.0
  return result


def _proto_fields(buf: bytes):
  """(field number, value) of a serialized protocol buffer: ints for varints, bytes otherwise."""
  i = 0

  def varint():
    nonlocal i
    result = shift = 0
    while True:
      byte = buf[i]
      i += 1
      result |= (byte & 0x7F) << shift
      if byte < 0x80:
        return result
      shift += 7

  while i < len(buf):
    key = varint()
    wire = key & 7
    if wire == 0:
      value = varint()
    elif wire in (1, 5):
      size = 8 if wire == 1 else 4
      value, i = buf[i : i + size], i + size
    elif wire == 2:
      size = varint()
      value, i = buf[i : i + size], i + size
    else:
      raise ValueError(f'unsupported protocol-buffer wire type {wire}')
    yield key >> 3, value


def instructions(module_proto: bytes) -> dict[str, tuple[str, str]]:
  """HLO instruction name -> (opcode, JAX op_name) of a serialized xla.HloModuleProto.

  Field numbers from xla/service/hlo.proto: HloModuleProto.computations = 3,
  HloComputationProto.instructions = 2, HloInstructionProto.name = 1, .opcode = 2, .metadata = 7,
  OpMetadata.op_name = 2.
  """
  out = {}
  for number, computation in _proto_fields(module_proto):
    if number != 3:
      continue
    for number, instruction in _proto_fields(computation):
      if number != 2:
        continue
      name = opcode = op_name = ''
      for key, value in _proto_fields(instruction):
        if key == 1:
          name = value.decode()
        elif key == 2:
          opcode = value.decode()
        elif key == 7:
          op_name = next((v.decode() for k, v in _proto_fields(value) if k == 2), '')
      out[name] = (opcode, op_name)
  return out


def _parts_of_trace(trace_dir: str, module: str, ops: dict[str, tuple[str, str]], steps: int):
  """Wall and busy seconds per part, top ops per part and the step time, from one trace."""
  data = jax.profiler.ProfileData.from_file(glob.glob(f'{trace_dir}/**/*.xplane.pb', recursive=True)[0])
  intervals, busy, step_span = collections.defaultdict(list), collections.Counter(), []
  by_op = collections.defaultdict(collections.Counter)
  for plane in data.planes:
    for line in plane.lines:
      for ev in line.events:
        if 'ThunkExecutor::Execute (wait' in ev.name:
          step_span.append(ev.duration_ns)
        stats = dict(ev.stats)
        if stats.get('hlo_module') != module or ops.get(ev.name, ('', ''))[0] in _CONTAINERS:
          continue
        part = part_of(ops.get(ev.name, ('', ''))[1])
        intervals[part].append((ev.start_ns, ev.start_ns + ev.duration_ns))
        busy[part] += ev.duration_ns
        by_op[part][ev.name] += ev.duration_ns
  wall = {p: traces.merged_length(intervals[p]) / steps / 1e9 for p in PARTS}
  step_s = sum(sorted(step_span)[:steps]) / max(1, min(steps, len(step_span))) / 1e9
  return wall, {p: busy[p] / steps / 1e9 for p in PARTS}, by_op, step_s


class _Program:
  """One compiled training step (a variant of tools/variants.py) that can be profiled repeatedly."""

  def __init__(self, cfg: ModelConfig, sizes: cases.Sizes, variant: variants_lib.Variant = variants_lib.Variant()):
    self.compiled, self.state, self.batch = variants_lib.compile_step(variant, cfg, sizes)
    (module,) = self.compiled.runtime_executable().hlo_modules()
    self.module = module.name
    self.ops = instructions(module.as_serialized_hlo_module_proto())
    if not any(op_name for _, op_name in self.ops.values()):
      raise RuntimeError('the compiled step carries no op_name metadata: parts cannot be told apart')

  def run(self, steps: int):
    for _ in range(steps):
      self.state, metrics = self.compiled(self.state, self.batch)
      jax.block_until_ready(metrics)

  def wall_s(self, steps: int) -> float:
    """The median wall time of one step, each waited for, without the profiler."""
    times = []
    for _ in range(steps):
      start = time.perf_counter()
      self.run(1)
      times.append(time.perf_counter() - start)
    return statistics.median(times)

  def profile(self, steps: int, keep_trace: str | None = None, step_wall_s: float | None = None):
    """_parts_of_trace's figures, and device_kernels' (with `step_wall_s`) as a fifth."""
    with tempfile.TemporaryDirectory() as tmp:
      with jax.profiler.trace(tmp):
        self.run(steps)
      (trace,) = glob.glob(f'{tmp}/**/*.xplane.pb', recursive=True)
      if keep_trace:
        Path(keep_trace).mkdir(parents=True, exist_ok=True)
        shutil.copy(trace, Path(keep_trace) / 'profile_step.xplane.pb')
      parts = _parts_of_trace(tmp, self.module, self.ops, steps)
      kernels = None
      if step_wall_s is not None:
        kernels = traces.device_kernels(jax.profiler.ProfileData.from_file(trace), steps, step_wall_s)
      return (*parts, kernels)


def profile(
  cfg: ModelConfig = cases.BENCH_MODEL,
  sizes: cases.Sizes = cases.Sizes(),
  steps: int = 3,
  peak_sizes: tuple[int, ...] = (1024, 2048),
  keep_trace: str | None = None,
) -> dict:
  """Per part: wall, busy, model GFLOP, the time those FLOPs take at the peak, and the top 5 ops; on an
  accelerator also the device's kernels (`device_kernels`) against the step's unprofiled wall time."""
  program = _Program(cfg, sizes)
  program.run(3)
  step_wall_s = program.wall_s(max(steps, 5))
  wall, busy, by_op, step_s, kernels = program.profile(steps, keep_trace, step_wall_s)
  peak = matmul_peak(peak_sizes, 6)['gflops']
  ideal = ideal_gflop(cfg, sizes.batch, sizes.src_len, sizes.tgt_len)
  parts = {
    p: {
      'wall_s': wall[p],
      'busy_s': busy[p],
      'gflop': ideal[p],
      'ideal_s': ideal[p] / peak,
      'top_ops': {k: v / steps / 1e9 for k, v in by_op[p].most_common(5)},
    }
    for p in PARTS
  }
  return {'peak_gflops': peak, 'step_s': step_s, 'step_wall_s': step_wall_s, 'parts': parts, 'device_kernels': kernels}


def compare(
  variants: dict[str, variants_lib.Variant],
  rounds: int,
  steps: int = 2,
  cfg: ModelConfig = cases.BENCH_MODEL,
  sizes: cases.Sizes = cases.Sizes(),
) -> dict:
  """Part walls of the step as it is ('base'), of the control ('base_again') and of each variant.

  Each round profiles `steps` steps of every variant, in alternating order; returns per variant the
  median over rounds of each part's wall time and of the step, and the median paired difference
  from base. The control's differences are the noise floor.
  """
  programs = {k: _Program(cfg, sizes, v) for k, v in variants_lib.with_controls(variants).items()}
  for program in programs.values():
    program.run(2)
  walls = {k: [] for k in programs}
  names = list(programs)
  for i in range(rounds):
    for name in names if i % 2 == 0 else names[::-1]:
      wall, _, _, step_s, _ = programs[name].profile(steps)
      walls[name].append({**wall, 'step': step_s})
  keys = [*PARTS, 'step']
  return {
    name: {
      k: {
        'median_s': statistics.median([r[k] for r in rows]),
        'minus_base_s': statistics.median([r[k] - b[k] for r, b in zip(rows, walls['base'])]),
      }
      for k in keys
    }
    for name, rows in walls.items()
  }


_ROUNDS = flags.DEFINE_integer('rounds', 8, 'with --variants: profiled rounds of 2 steps per variant')
_KEEP_TRACE = flags.DEFINE_string('keep_trace', None, 'a folder to keep the trace in (profile_step.xplane.pb)')
_KERNELS = flags.DEFINE_enum(
  'kernels',
  'xla',
  ['xla', 'pallas'],
  "the bench config's model.kernels: 'pallas' profiles the fused kernels' step (a GPU)",
)


def main(argv):
  del argv
  if variants_lib.FLAG.value:
    try:
      variants = variants_lib.parse(variants_lib.FLAG.value)
    except ValueError as e:
      raise SystemExit(f'--variants: {e}')
    cfg, sizes = variants_lib.model_and_sizes()
    r = compare(variants, _ROUNDS.value, cfg=dataclasses.replace(cfg, kernels=_KERNELS.value), sizes=sizes)
    print(
      f'medians over {_ROUNDS.value} interleaved rounds of 2 profiled steps (ms); in brackets: median '
      'paired difference from base; base_again (the same program) shows the noise'
    )
    print('| part | ' + ' | '.join(r) + ' |')
    print('|---' * (len(r) + 1) + '|')
    for k in r['base']:
      print(
        f'| {k} | '
        + ' | '.join(
          f'{1e3 * v[k]["median_s"]:.1f}' + (f' ({1e3 * v[k]["minus_base_s"]:+.1f})' if name != 'base' else '')
          for name, v in r.items()
        )
        + ' |'
      )
    return
  cfg, sizes = variants_lib.model_and_sizes()
  r = profile(dataclasses.replace(cfg, kernels=_KERNELS.value), sizes, keep_trace=_KEEP_TRACE.value)
  print(f'matmul peak {r["peak_gflops"]:.1f} GFLOP/s; profiled step {r["step_s"]:.3f} s (the profiler adds some)')
  print('| part | wall (s) | busy, all threads (s) | model GFLOP | ideal at peak (s) | wall - ideal (s) |')
  print('| --- | --- | --- | --- | --- | --- |')
  tot = collections.Counter()
  for p, v in r['parts'].items():
    print(
      f'| {p} | {v["wall_s"]:.3f} | {v["busy_s"]:.3f} | {v["gflop"]:.1f} | {v["ideal_s"]:.3f} | {v["wall_s"] - v["ideal_s"]:+.3f} |'
    )
    for k in ('wall_s', 'busy_s', 'gflop', 'ideal_s'):
      tot[k] += v[k]
  print(
    f'| total | {tot["wall_s"]:.3f} | {tot["busy_s"]:.3f} | {tot["gflop"]:.1f} | {tot["ideal_s"]:.3f} | '
    f'{tot["wall_s"] - tot["ideal_s"]:+.3f} |'
  )
  for p, v in r['parts'].items():
    print(f'  {p}: ' + ', '.join(f'{k} {1e3 * t:.1f} ms' for k, t in v['top_ops'].items()))
  k = r['device_kernels']
  if k:
    print(
      f'device: {k["kernels_per_step"]:.0f} kernels per step, mean {k["mean_kernel_us"]:.1f} us each; busy '
      f'{1e3 * k["busy_s"]:.2f} ms of the {1e3 * k["step_wall_s"]:.2f} ms step (unprofiled wall), idle '
      f'{100 * k["idle_fraction"]:.0f} %'
    )
    print('  by kind: ' + ', '.join(f'{kind} {1e3 * t:.2f} ms' for kind, t in k['by_kind_s'].items()))
    print('  costliest kernels: ' + ', '.join(f'{n} {1e3 * t:.3f} ms' for n, t in k['top_kernels_s'].items()))
  else:
    print(f'device: no device timeline in the trace ({jax.default_backend()}: ops run on host threads)')


if __name__ == '__main__':
  variants_lib.define_size_flags()
  app.run(main)
