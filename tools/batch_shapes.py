r"""The distinct batch shapes a run's training steps take (each one compiles the training step again), and what
data.train_shapes = k would make of them.

    python -m tools.batch_shapes --config=experiments/configs/main_ablation.py --seeds=5
    python -m tools.batch_shapes --config=experiments/configs/main_ablation.py --seeds=1 --config.data.pad_to_multiple=16
    XLA_FLAGS='--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1' taskset -c 0 \
      python -m tools.batch_shapes --config=experiments/configs/main_ablation.py --time_calls=7 --out=F.json

Reads the training batches exactly as training does (`seeds.training_batches` per seed, `seeds.stack_batches` padding
the seeds' batches to common widths) for `train.num_steps` steps (or `--steps`), trains nothing, and prints
each (source width, target width) with the step it first appears at and how many steps take it; then, for each k,
the widths data.train_shapes=k chooses, the shapes they leave and the padded positions they add. On a GPU a
compilation of the main job's 5-seed step takes about 17 s against 5 ms per step (benchmarks/README.md, "On a
GPU"), so the shapes, not the steps, are most of a short run's training time there.

With `--time_calls=n` it also times the training step (`benchmarks.cases.train_program`: the config's model, the
plain jitted step, one seed, random tokens) at each shape, the median of n calls after 2 warm-ups, and the mean
over the run's steps: what the run's batching costs per step. Under the flags above (one thread, one core) that is
what a CPU sweep's per-core processes run. `--out` keeps the table as JSON.
"""

from __future__ import annotations

import collections
import json
import statistics
import time

import jax
from absl import app, flags
from ml_collections import config_flags

from attnmt import data, errors
from attnmt.data import batching, catalogue, sources
from attnmt.errors import ConfigError
from attnmt.model.config import ModelConfig
from attnmt.training import seeds as seed_axis, settings, shapes as train_shapes
from benchmarks import cases
from experiments import common


def _define_flags():
  """The command's flags, defined only when it runs: `shapes` is imported by tests beside other flag owners."""
  config_flags.DEFINE_config_file('config', 'experiments/configs/default.py', 'Config file.', lock_config=True)
  flags.DEFINE_integer('seeds', 1, 'seeds trained together (their batches are padded to common widths)')
  flags.DEFINE_integer('steps', 0, 'steps to read (0: train.num_steps)')
  flags.DEFINE_integer('time_calls', 0, 'time the training step at each shape: median of this many calls (0: no)')
  flags.DEFINE_string('out', None, 'a JSON file for the shapes (and their times with --time_calls)')


def shapes(config, num_seeds: int, steps: int) -> dict[tuple[int, int], dict]:
  """(source width, target width) -> {'first_step', 'steps'} over `steps` stacked training batches."""
  d = config.data
  iterators = seed_axis.training_batches(data.prepare(d), d, range(num_seeds))
  seen: dict[tuple[int, int], dict] = {}
  counts = collections.Counter()
  for step in range(steps):
    batch = seed_axis.stack_batches([next(it) for it in iterators])
    shape = (int(batch['src'].shape[-1]), int(batch['tgt_in'].shape[-1]))
    counts[shape] += 1
    seen.setdefault(shape, {'first_step': step})
  return {k: {**v, 'steps': counts[k]} for k, v in sorted(seen.items(), key=lambda kv: kv[1]['first_step'])}


def choices(config, num_seeds: int, steps: int) -> list[dict]:
  """For k = 1 ... the number of widths: the widths data.train_shapes=k chooses (attnmt.training.shapes), the step
  shapes left, and the padded positions (rows x width, source and target) against every width its own."""
  d = config.data
  planned = train_shapes.stacked_shapes(seed_axis.training_batches(data.prepare(d), d, range(num_seeds)), steps)
  counts = train_shapes.width_counts(planned)
  before = sum(w * n for w, n in counts.items())
  rows = []
  for k in range(1, len(counts) + 1):
    widths = batching.choose_widths(counts, k)

    def rounded(w, widths=widths):
      return min(x for x in widths if x >= w)

    rows.append(
      {
        'k': k,
        'widths': list(widths),
        'shapes': len({(rounded(s), rounded(t)) for _, s, t in planned}),
        'padded_positions_added': batching.padded_positions(counts, widths) / before - 1,
      }
    )
  return rows


def step_seconds(config, shape: tuple[int, int], calls: int) -> float:
  """Median seconds of `calls` calls of the config's training step (one seed, data.batch_size rows) at
  (source width, target width) `shape`, after 2 warm-up calls."""
  d = config.data
  cfg = ModelConfig.from_dict(
    {**config.model.to_dict(), 'source_vocab_size': d.vocab_size, 'target_vocab_size': d.vocab_size}
  )
  jitted, state, batch = cases.train_program(cfg, cases.Sizes(batch=d.batch_size, src_len=shape[0], tgt_len=shape[1]))
  compiled = jitted.lower(state, batch).compile()
  times = []
  for i in range(2 + calls):
    start = time.perf_counter()
    state = jax.block_until_ready(compiled(state, batch))[0]
    if i >= 2:
      times.append(time.perf_counter() - start)
  return statistics.median(times)


def check_flags(f) -> None:
  """Every flag and setting, before the data are prepared or a step compiled: a ConfigError (one line, exit status
  2 under run_guarded) for counts out of range, an --out that cannot be written, and a config training would refuse
  (its values, the model's component names, the dataset's name)."""
  if f.seeds < 1:
    raise ConfigError(f'--seeds={f.seeds}: no seed to read batches for; pass a whole number from 1 up, e.g. --seeds=5')
  if f.steps < 0:
    raise ConfigError(
      f'--steps={f.steps}: a negative count of steps; pass a whole number from 1 up, or 0 for train.num_steps'
    )
  if f.time_calls < 0:
    raise ConfigError(
      f'--time_calls={f.time_calls}: a negative count of calls; pass a whole number from 1 up to time the step, or 0 '
      'not to'
    )
  problem = errors.out_problem(f.out, 'shapes.json') if f.out else None
  if problem:
    raise ConfigError(problem)
  config = f.config
  settings.validate(config)
  d = config.data
  ModelConfig.from_dict(
    {**config.model.to_dict(), 'source_vocab_size': d.vocab_size, 'target_vocab_size': d.vocab_size}
  )
  if d.name not in sources.OWN_DATASETS and not catalogue.is_catalogue_name(d.name):
    raise sources.unknown_name_error(d.name)


def main(argv):
  del argv
  common.run_guarded(report)


def report():
  """The shapes, their times with --time_calls, and the train_shapes table, after check_flags."""
  f = flags.FLAGS
  check_flags(f)
  steps = f.steps or f.config.train.num_steps
  found = shapes(f.config, f.seeds, steps)
  print(f'{len(found)} batch shape(s) in {steps} steps of {f.seeds} seed(s): each compiles the training step')
  print('| source width | target width | first step | steps |' + (' step |' if f.time_calls else ''))
  print('| --- | --- | --- | --- |' + (' --- |' if f.time_calls else ''))
  for (s, t), v in found.items():
    if f.time_calls:
      v['step_s'] = step_seconds(f.config, (s, t), f.time_calls)
    print(
      f'| {s} | {t} | {v["first_step"]} | {v["steps"]} |' + (f' {1e3 * v["step_s"]:.1f} ms |' if f.time_calls else '')
    )
  mean_s = None
  if f.time_calls:
    mean_s = sum(v['step_s'] * v['steps'] for v in found.values()) / steps
    print(f'mean step over the {steps} steps: {1e3 * mean_s:.1f} ms (median of {f.time_calls} calls per shape)')
  if f.out:
    rows = [{'source_width': s, 'target_width': t, **v} for (s, t), v in found.items()]
    with open(f.out, 'w') as out:
      json.dump(
        {'steps': steps, 'seeds': f.seeds, 'data': f.config.data.to_dict(), 'shapes': rows, 'mean_step_s': mean_s},
        out,
        indent=1,
      )
  print('\n| data.train_shapes | widths | step shapes | padded positions added |')
  print('| --- | --- | --- | --- |')
  for row in choices(f.config, f.seeds, steps):
    widths = ', '.join(map(str, row['widths']))
    print(f'| {row["k"]} | {widths} | {row["shapes"]} | {100 * row["padded_positions_added"]:+.1f} % |')


if __name__ == '__main__':
  _define_flags()
  app.run(main, flags_parser=common.parse_flags)
