r"""Where the bench-config training step spends its time: per part, measured against its FLOPs.

    python -m benchmarks.profile_step            # 3 profiled steps after warm-up; prints a table
    python -m benchmarks.profile_step --patches=no_attention_kernel --rounds=8   # part by part A/B

Traces the jitted, state-donating `train_step` with `jax.profiler`, reads the trace back
(`jax.profiler.ProfileData`) and assigns every executed HLO op (thunk) to a part of the step by the
`op_name` metadata that JAX gives it: forward or backward (`transpose(...)`) of the encoder, the
decoder (its scan, embeddings and keys), the output layer, the vocabulary projection and loss, and
the rest (optimiser, zero-filled buffers the scans write into). For each part it reports the wall
time during which at least one thread ran one of its ops (parts run one after another, so these
add up to about the step), the busy time summed over threads, and the time the part's model FLOPs
(benchmarks/flops.py) would take at the measured matmul peak. Busy time counts the thread that
runs each op; work a library product hands to its own worker threads is not in it, so for the
large products busy is about the wall time, not twice it.
"""
from __future__ import annotations

import collections
import contextlib
import glob
import re
import statistics
import tempfile

import jax
from absl import app, flags

from attnmt.config import ModelConfig
from benchmarks import cases, flops
from benchmarks import patches as patches_lib
from benchmarks.timing import matmul_peak

PARTS = ('encoder fwd', 'decoder fwd', 'output layer fwd', 'vocab + loss fwd', 'vocab + loss bwd',
         'output layer bwd', 'decoder bwd', 'encoder bwd', 'optimiser', 'no op_name (XLA copies, zero fills)')


def part_of(op_name: str) -> str:
  """The part of the step an op belongs to, from its JAX `op_name` metadata."""
  if not op_name:
    return 'no op_name (XLA copies, zero fills)'
  backward = 'transpose(' in op_name
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
  vocab = 2 * b * t * cfg.output_size * cfg.target_vocab_size / 1e9
  out = 2 * b * t * (cfg.decoder_hidden_size + cfg.annotation_size + cfg.embed_size) * cfg.output_size / 1e9
  dec = flops.decoder_flops(cfg, b, s, t) / 1e9 - vocab - out
  fwd = {'encoder': enc, 'decoder': dec, 'output layer': out, 'vocab + loss': vocab}
  result = {f'{k} fwd': v for k, v in fwd.items()}
  result.update({f'{k} bwd': 2 * v for k, v in fwd.items()})
  result['optimiser'] = result['no op_name (XLA copies, zero fills)'] = 0.0
  return result


def _merged_length(intervals: list[tuple[int, int]]) -> int:
  total, end = 0, None
  for s, e in sorted(intervals):
    if end is None or s > end:
      total += e - s
      end = e
    elif e > end:
      total += e - end
      end = e
  return total


def _parts_of_trace(trace_dir: str, op_names: dict[str, str], steps: int):
  """Wall and busy nanoseconds per part, top ops per part and the step spans, from one trace."""
  data = jax.profiler.ProfileData.from_file(glob.glob(f'{trace_dir}/**/*.xplane.pb', recursive=True)[0])
  intervals, busy, step_span = collections.defaultdict(list), collections.Counter(), []
  by_op = collections.defaultdict(collections.Counter)
  for plane in data.planes:
    for line in plane.lines:
      for ev in line.events:
        if 'ThunkExecutor::Execute (wait' in ev.name:
          step_span.append(ev.duration_ns)
        if 'XLAEigen' not in line.name or ev.name.startswith(('ThunkExecutor', 'SlinkyThreadPool', 'end:')):
          continue
        part = part_of(op_names.get(ev.name, ''))
        intervals[part].append((ev.start_ns, ev.start_ns + ev.duration_ns))
        busy[part] += ev.duration_ns
        by_op[part][ev.name] += ev.duration_ns
  wall = {p: _merged_length(intervals[p]) / steps / 1e9 for p in PARTS}
  step_s = sum(sorted(step_span)[:steps]) / max(1, min(steps, len(step_span))) / 1e9
  return wall, {p: busy[p] / steps / 1e9 for p in PARTS}, by_op, step_s


class _Program:
  """One compiled training step (traced under the given patches) that can be profiled repeatedly."""

  def __init__(self, cfg: ModelConfig, sizes: cases.Sizes, patches=()):
    with contextlib.ExitStack() as stack:
      for factory in patches:
        stack.enter_context(factory())
      jitted, self.state, self.batch = cases.train_program(cfg, sizes)
      self.compiled = jitted.lower(self.state, self.batch).compile()
    self.op_names = {m.group(1): m.group(2) for m in
                     re.finditer(r'^\s*(?:ROOT )?%(\S+) = [^\n]*?op_name="([^"]*)"', self.compiled.as_text(), re.M)}

  def run(self, steps: int):
    for _ in range(steps):
      self.state, metrics = self.compiled(self.state, self.batch)
      jax.block_until_ready(metrics)

  def profile(self, steps: int):
    with tempfile.TemporaryDirectory() as tmp:
      with jax.profiler.trace(tmp):
        self.run(steps)
      return _parts_of_trace(tmp, self.op_names, steps)


def profile(cfg: ModelConfig = cases.BENCH_MODEL, sizes: cases.Sizes = cases.Sizes(), steps: int = 3) -> dict:
  program = _Program(cfg, sizes)
  program.run(3)
  wall, busy, by_op, step_s = program.profile(steps)
  peak = matmul_peak((1024, 2048), 6)['gflops']
  ideal = ideal_gflop(cfg, sizes.batch, sizes.src_len, sizes.tgt_len)
  parts = {p: {'wall_s': wall[p], 'busy_s': busy[p], 'gflop': ideal[p], 'ideal_s': ideal[p] / peak,
               'top_ops': {k: v / steps / 1e9 for k, v in by_op[p].most_common(5)}} for p in PARTS}
  return {'peak_gflops': peak, 'step_s': step_s, 'parts': parts}


def compare(patches: dict[str, list], rounds: int, steps: int = 2, cfg: ModelConfig = cases.BENCH_MODEL,
            sizes: cases.Sizes = cases.Sizes()) -> dict:
  """Part walls of the step as it is ('base') and under each patch, profiled in interleaved rounds.

  Each round profiles `steps` steps of every variant, in alternating order; returns per variant the
  median over rounds of each part's wall time and of the step, and the median paired difference
  from base. 'base_again', the unchanged step compiled a second time, is the control: its
  differences are the noise floor. Parts resolve changes that full-step timings cannot.
  """
  programs = {'base': _Program(cfg, sizes), 'base_again': _Program(cfg, sizes),
              **{k: _Program(cfg, sizes, v) for k, v in patches.items()}}
  for program in programs.values():
    program.run(2)
  walls = {k: [] for k in programs}
  names = list(programs)
  for i in range(rounds):
    for name in (names if i % 2 == 0 else names[::-1]):
      wall, _, _, step_s = programs[name].profile(steps)
      walls[name].append({**wall, 'step': step_s})
  keys = [*PARTS, 'step']
  median = lambda xs: statistics.median(xs)
  return {name: {k: {'median_s': median([r[k] for r in rows]),
                     'minus_base_s': median([r[k] - b[k] for r, b in zip(rows, walls['base'])])}
                 for k in keys} for name, rows in walls.items()}


_ROUNDS = flags.DEFINE_integer('rounds', 8, 'with --patches: profiled rounds of 2 steps per variant')


def main(argv):
  del argv
  if patches_lib.PATCHES_FLAG.value:
    try:
      patches = patches_lib.patch_contexts(patches_lib.PATCHES_FLAG.value)
    except ValueError as e:
      raise SystemExit(str(e))
    r = compare(patches, _ROUNDS.value)
    print(f'medians over {_ROUNDS.value} interleaved rounds of 2 profiled steps (ms); in brackets: median '
          'paired difference from base; base_again (the same program) shows the noise')
    print('| part | ' + ' | '.join(r) + ' |')
    print('|---' * (len(r) + 1) + '|')
    for k in r['base']:
      print(f'| {k} | ' + ' | '.join(f'{1e3 * v[k]["median_s"]:.1f}' + (
          f' ({1e3 * v[k]["minus_base_s"]:+.1f})' if name != 'base' else '') for name, v in r.items()) + ' |')
    return
  r = profile()
  print(f'matmul peak {r["peak_gflops"]:.1f} GFLOP/s; profiled step {r["step_s"]:.3f} s (the profiler adds some)')
  print('| part | wall (s) | busy, both threads (s) | model GFLOP | ideal at peak (s) | wall - ideal (s) |')
  print('| --- | --- | --- | --- | --- | --- |')
  tot = collections.Counter()
  for p, v in r['parts'].items():
    print(f'| {p} | {v["wall_s"]:.3f} | {v["busy_s"]:.3f} | {v["gflop"]:.1f} | {v["ideal_s"]:.3f} | {v["wall_s"] - v["ideal_s"]:+.3f} |')
    for k in ('wall_s', 'busy_s', 'gflop', 'ideal_s'):
      tot[k] += v[k]
  for p, v in r['parts'].items():
    print(f'  {p}: ' + ', '.join(f'{k} {1e3 * t:.1f} ms' for k, t in v['top_ops'].items()))
  print(f'| total | {tot["wall_s"]:.3f} | {tot["busy_s"]:.3f} | {tot["gflop"]:.1f} | {tot["ideal_s"]:.3f} | '
        f'{tot["wall_s"] - tot["ideal_s"]:+.3f} |')


if __name__ == '__main__':
  app.run(main)
