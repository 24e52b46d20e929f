r"""Paired A/B of the bench-config training step inside one process, with the same program as a control.

    python -m tools.ab_step --variants='{"vw512": {"xla": {"xla_cpu_prefer_vector_width": 512}}}'
    python -m tools.ab_step --variants='{"mine": {"patch": "my_patches:old_loss"}}' --pairs=150
    python -m tools.ab_step --pairs=60                 # the control alone: the noise floor
    python -m tools.ab_step --model=main --rows=64 --width=40 --variants=...   # the main job's model and batch

On a shared machine the same step varies by 5-10 % between runs, more than most single changes buy,
so comparing two `bench` runs tells little. Here every variant (tools/variants.py: XLA compiler
options, model fields, or a patch that swaps in the code being compared) is compiled in the same
process, then all of them run one step each in turn, the order reversed every round, so slow phases
of the machine hit every variant alike. Each variant is reported as the median of its paired
differences against `base`. `base_again`, a second compilation of the unchanged step, is always
included: its difference from `base` is what noise alone gives. `--model=main` times the main job's model
(experiments/configs/main_ablation.py) instead of the bench config's, at `--rows` x `--width` (0: the model's
own batch), and `--out` keeps every time as JSON.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
import sys
import time

import jax
import jax.numpy as jnp
from absl import app, flags

from attnmt.model.config import ModelConfig
from benchmarks import cases
from attnmt import errors
from tools import variants as variants_lib

_PAIRS = flags.DEFINE_integer('pairs', 40, 'timed steps per variant, taken in turn (after 2 warm-up steps each)')


def paired_summary(base: list[float], other: list[float]) -> dict:
  """Differences other - base, pair by pair: their median, quartiles, mean and its standard error."""
  if len(base) != len(other) or len(base) < 2:
    raise ValueError(f'need two equally long lists of at least 2 times, got {len(base)} and {len(other)}')
  diffs = [o - b for b, o in zip(base, other)]
  q1, _, q3 = statistics.quantiles(diffs, n=4, method='inclusive')
  mean = statistics.fmean(diffs)
  return {
    'median': statistics.median(diffs),
    'q1': q1,
    'q3': q3,
    'mean': mean,
    'mean_se': statistics.stdev(diffs) / len(diffs) ** 0.5,
  }


def run(
  variants: dict[str, variants_lib.Variant],
  steps: int,
  cfg: ModelConfig = cases.BENCH_MODEL,
  sizes: cases.Sizes = cases.Sizes(),
) -> dict:
  """Compiles base, base_again and every variant, then times `steps` rounds of one step each."""
  variants = variants_lib.with_controls(variants)
  compiled, states, batches, compile_s = {}, {}, {}, {}
  for name, variant in variants.items():
    start = time.perf_counter()
    compiled[name], states[name], batches[name] = variants_lib.compile_step(variant, cfg, sizes)
    compile_s[name] = time.perf_counter() - start  # tracing, lowering and XLA's compilation (no cache: jit's own)

  def one_step(name):
    start = time.perf_counter()
    states[name], metrics = compiled[name](states[name], batches[name])
    jax.block_until_ready(metrics)
    return time.perf_counter() - start

  for _ in range(2):
    for name in variants:
      one_step(name)
  times = {name: [] for name in variants}
  order = list(variants)
  for i in range(steps):
    for name in order if i % 2 == 0 else order[::-1]:
      times[name].append(one_step(name))
  return {
    'steps': steps,
    'median_s': {k: statistics.median(v) for k, v in times.items()},
    'compile_s': compile_s,
    'vs_base': {k: paired_summary(times['base'], v) for k, v in times.items() if k != 'base'},
    'times_s': times,
  }


def _fail(message: str):
  print(f'error: {message}', file=sys.stderr)
  sys.exit(2)


def check_variants(variants: dict[str, variants_lib.Variant], cfg: ModelConfig) -> None:
  """Every variant's model fields against ModelConfig and the component registries, and its XLA options on a
  one-addition program (milliseconds), before the step is compiled (about 34 s for base and base_again on 2 cores):
  a ValueError naming the variant."""
  probe = jax.jit(lambda x: x + 1).lower(jnp.zeros(1, jnp.float32))
  for name, variant in variants.items():
    try:
      variants_lib.model_of(variant, cfg)
    except ValueError as e:
      raise ValueError(f'variant {name!r}: {e}') from None
    if variant.xla:
      try:
        probe.compile(compiler_options=variant.xla)
      except (jax.errors.JaxRuntimeError, TypeError, ValueError) as e:
        reason = ' '.join(str(e).removeprefix('INVALID_ARGUMENT: ').split())[:300]
        raise ValueError(
          f'variant {name!r}: XLA refuses the options {variant.xla} ({reason}); name options this XLA knows, '
          'with values of their type, e.g. {"xla_cpu_prefer_vector_width": 512}'
        ) from None


def main(argv):
  del argv
  if _PAIRS.value < 2:
    _fail(f'--pairs={_PAIRS.value} is too few to pair; use at least 2 (40 or more to resolve ~1 %)')
  problem = errors.out_problem(flags.FLAGS.out, 'ab_step.json') if flags.FLAGS.out else None
  if problem:  # before the compilations and the timing, which a failed write would lose
    _fail(problem)
  cfg, sizes = variants_lib.model_and_sizes()
  try:
    variants = variants_lib.parse(variants_lib.FLAG.value)
    check_variants(variants, cfg)
  except ValueError as e:
    _fail(f'--variants: {e}')
  result = run(variants, _PAIRS.value, cfg, sizes)
  if flags.FLAGS.out:
    with open(flags.FLAGS.out, 'w') as f:
      json.dump(
        {'model': flags.FLAGS.model, 'sizes': dataclasses.asdict(sizes), 'variants': variants_lib.FLAG.value, **result},
        f,
        indent=1,
      )
  for name, median in result['median_s'].items():
    line = f'{name:20s} median {median:.4f} s (compiled in {result["compile_s"][name]:.1f} s)'
    if name in result['vs_base']:
      d = {k: 1e3 * v for k, v in result['vs_base'][name].items()}
      line += (
        f'   paired - base: median {d["median"]:+.1f} ms (quartiles {d["q1"]:+.1f} .. {d["q3"]:+.1f}),'
        f' mean {d["mean"]:+.1f} ± {d["mean_se"]:.1f} ms'
      )
    print(line)
  print('base_again is the unchanged program compiled a second time: its difference is the noise floor.')


def _define_flags():
  """The flags only this command reads, defined when it runs: tests import ab_step beside benchmarks.bench, whose
  --model, --width and --out are other flags."""
  variants_lib.define_size_flags()
  flags.DEFINE_string('out', None, 'a JSON file for the times and the paired summaries')


if __name__ == '__main__':
  _define_flags()
  app.run(main)
