r"""Paired A/B of the bench-config training step inside one process, with the same program as a control.

    python -m benchmarks.ab_step --variants='{"vw512": {"xla_cpu_prefer_vector_width": 512}}'
    python -m benchmarks.ab_step --pairs=60                       # the control alone: the noise floor
    python -m benchmarks.ab_step --patches=optax_clip --pairs=150  # a code variant (benchmarks/patches.py)

On a shared machine the same step varies by ±5–10 % between runs, far more than most single changes
buy, so comparing two `bench` runs tells little. Here every variant is compiled in the same process
(variants differ by XLA compiler options passed to `.compile(compiler_options=...)`), then all of
them run one step each in turn, the order reversed every round, so slow phases of the machine hit
every variant alike. Each variant is reported as the median of its paired differences against
`base`. `base_again`, a second compilation of the unchanged program, is always included: its
difference from `base` is what noise alone gives.

A code change is compared the same way: `--patches` names context managers in benchmarks/patches.py
(PATCHES) that change the library while that variant is traced and compiled. Several names joined
by `+` (`a+b`) apply together as one variant.
"""
from __future__ import annotations

import json
import statistics
import time

from absl import app, flags

from benchmarks import patches as patches_lib

_VARIANTS = flags.DEFINE_string('variants', '{}', 'JSON: name -> XLA compiler options for that variant')
_PAIRS = flags.DEFINE_integer('pairs', 40, 'timed steps per variant, taken in turn (after 2 warm-up steps each)')


def paired_summary(base: list[float], other: list[float]) -> dict:
  """Differences other - base, pair by pair: their median, quartiles, mean and its standard error."""
  if len(base) != len(other) or len(base) < 2:
    raise ValueError(f'need two equally long lists of at least 2 times, got {len(base)} and {len(other)}')
  diffs = [o - b for b, o in zip(base, other)]
  q1, _, q3 = statistics.quantiles(diffs, n=4, method='inclusive')
  mean = statistics.fmean(diffs)
  return {'median': statistics.median(diffs), 'q1': q1, 'q3': q3, 'mean': mean,
          'mean_se': statistics.stdev(diffs) / len(diffs) ** 0.5}


def run(variants: dict[str, dict], steps: int, patches: dict[str, list] | None = None) -> dict:
  import contextlib

  import jax
  from benchmarks import cases

  patches = patches or {}
  variants = {'base': {}, 'base_again': {}, **variants, **{k: {} for k in patches}}
  compiled, states = {}, {}
  for name, options in variants.items():
    with contextlib.ExitStack() as stack:
      for factory in patches.get(name, []):
        stack.enter_context(factory())
      jitted, states[name], batch = cases.train_program(cases.BENCH_MODEL, cases.Sizes())
      compiled[name] = jitted.lower(states[name], batch).compile(compiler_options=options or None)

  def one_step(name):
    start = time.perf_counter()
    states[name], metrics = compiled[name](states[name], batch)
    jax.block_until_ready(metrics)
    return time.perf_counter() - start

  for _ in range(2):
    for name in variants:
      one_step(name)
  times = {name: [] for name in variants}
  order = list(variants)
  for i in range(steps):
    for name in (order if i % 2 == 0 else order[::-1]):
      times[name].append(one_step(name))
  return {'steps': steps, 'variants': variants,
          'median_s': {k: statistics.median(v) for k, v in times.items()},
          'vs_base': {k: paired_summary(times['base'], v) for k, v in times.items() if k != 'base'},
          'times_s': times}


def main(argv):
  del argv
  try:
    variants = json.loads(_VARIANTS.value)
  except json.JSONDecodeError as e:
    raise SystemExit(f'--variants is not valid JSON ({e}); pass e.g. '
                     '\'{"vw512": {"xla_cpu_prefer_vector_width": 512}}\'')
  if not isinstance(variants, dict) or not all(isinstance(v, dict) for v in variants.values()):
    raise SystemExit('--variants must map names to objects of XLA compiler options, e.g. '
                     '\'{"vw512": {"xla_cpu_prefer_vector_width": 512}}\'')
  if _PAIRS.value < 2:
    raise SystemExit(f'--pairs={_PAIRS.value} is too few to pair; use at least 2 (40 or more to resolve ~1 %)')
  try:
    patches = patches_lib.patch_contexts(patches_lib.PATCHES_FLAG.value)
  except ValueError as e:
    raise SystemExit(f'--patches: {e}')
  clash = set(patches) & (set(variants) | {'base', 'base_again'})
  if clash:
    raise SystemExit(f'--patches and --variants both name {sorted(clash)[0]!r}; give each variant its own name')
  result = run(variants, _PAIRS.value, patches)
  for name, median in result['median_s'].items():
    line = f'{name:20s} median {median:.4f} s'
    if name in result['vs_base']:
      d = {k: 1e3 * v for k, v in result['vs_base'][name].items()}
      line += (f'   paired - base: median {d["median"]:+.1f} ms (quartiles {d["q1"]:+.1f} .. {d["q3"]:+.1f}),'
               f' mean {d["mean"]:+.1f} ± {d["mean_se"]:.1f} ms')
    print(line)
  print('base_again is the unchanged program compiled a second time: its difference is the noise floor.')


if __name__ == '__main__':
  app.run(main)
