r"""The distinct batch shapes a run's training steps take (each one compiles the training step again), and what
data.train_shapes = k would make of them.

    python -m tools.batch_shapes --config=experiments/configs/main_ablation.py --seeds=5
    python -m tools.batch_shapes --config=experiments/configs/main_ablation.py --seeds=1 --config.data.pad_to_multiple=16

Reads the training batches exactly as training does (`seeds.training_batches` per seed, `seeds.stack_batches` padding
the seeds' batches to common widths) for `train.num_steps` steps (or `--steps`), trains nothing, and prints
each (source width, target width) with the step it first appears at and how many steps take it; then, for each k,
the widths data.train_shapes=k chooses, the shapes they leave and the padded positions they add. On a GPU a
compilation of the main job's 5-seed step takes about 17 s against 5 ms per step (benchmarks/README.md, "On a
GPU"), so the shapes, not the steps, are most of a short run's training time there.
"""

from __future__ import annotations

import collections

from absl import app, flags
from ml_collections import config_flags

from attnmt import data
from attnmt.data import batching
from attnmt.training import seeds as seed_axis, shapes as train_shapes


def _define_flags():
  """The command's flags, defined only when it runs: `shapes` is imported by tests beside other flag owners."""
  config_flags.DEFINE_config_file('config', 'experiments/configs/default.py', 'Config file.', lock_config=True)
  flags.DEFINE_integer('seeds', 1, 'seeds trained together (their batches are padded to common widths)')
  flags.DEFINE_integer('steps', 0, 'steps to read (0: train.num_steps)')


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


def main(argv):
  del argv
  f = flags.FLAGS
  steps = f.steps or f.config.train.num_steps
  found = shapes(f.config, f.seeds, steps)
  print(f'{len(found)} batch shape(s) in {steps} steps of {f.seeds} seed(s): each compiles the training step')
  print('| source width | target width | first step | steps |')
  print('| --- | --- | --- | --- |')
  for (s, t), v in found.items():
    print(f'| {s} | {t} | {v["first_step"]} | {v["steps"]} |')
  print('\n| data.train_shapes | widths | step shapes | padded positions added |')
  print('| --- | --- | --- | --- |')
  for row in choices(f.config, f.seeds, steps):
    widths = ', '.join(map(str, row['widths']))
    print(f'| {row["k"]} | {widths} | {row["shapes"]} | {100 * row["padded_positions_added"]:+.1f} % |')


if __name__ == '__main__':
  _define_flags()
  app.run(main)
