"""Is the comparison of variants calibrated? A/A checks of attnmt.analysis.significance, simulated and on real
runs (attnmt/analysis/calibration.py; docs/results/calibration.md).

Simulated: identical variants at K = 2, 3, 5, 10 seeds, the share ranked (should be at most 5 %), and the
power against a true gap of one seed sd at K = 3, 5, 10:

    python -m experiments.calibrate --simulate --experiments=1000

Real: every seed of every variant in a translations file (an analysis's translations.json.gz) treated as
seeds of one variant, split every way into two groups of 2, 3 and 4, each split compared as two variants;
with the seed sd of BLEU and the seeds a ranking needs:

    python -m experiments.calibrate --translations=docs/results/calibration/translations.json.gz
"""

import numpy as np
from absl import app, flags

from attnmt.analysis import calibration, significance, stored
from experiments import common

flags.DEFINE_bool('simulate', False, 'Run the simulated A/A check and the power at one seed sd.')
flags.DEFINE_integer('experiments', 1000, 'Simulated experiments per number of seeds.')
flags.DEFINE_integer('sentences', 400, 'Test sentences per simulated experiment.')
flags.DEFINE_integer('bootstrap_samples', 200, 'Sentence bootstrap replicates per simulated experiment.')
flags.DEFINE_string('translations', None, 'A translations.json.gz: the real A/A check over splits of its seeds.')
flags.DEFINE_list('halves', ['2', '3', '4'], 'Group sizes of the real splits.')
FLAGS = flags.FLAGS


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f'unexpected arguments {argv[1:]}')
  common.run_guarded(_calibrate)


def _calibrate():
  if not FLAGS.simulate and not FLAGS.translations:
    raise ValueError('nothing to do: pass --simulate, --translations=FILE, or both')
  if FLAGS.experiments < 1 or FLAGS.sentences < 1 or FLAGS.bootstrap_samples < 2:
    raise ValueError('--experiments and --sentences must be >= 1 and --bootstrap_samples >= 2')
  if FLAGS.simulate:
    _simulated()
  if FLAGS.translations:
    _real(FLAGS.translations, [int(h) for h in FLAGS.halves])


def _simulated():
  n, kw = FLAGS.experiments, {'sentences': FLAGS.sentences, 'n_samples': FLAGS.bootstrap_samples}
  print(
    f'Simulated A/A: {n} experiments per K, {FLAGS.sentences} sentences, {FLAGS.bootstrap_samples} bootstrap replicates'
  )
  print('| seeds per variant | ranked (identical variants) | share | Monte Carlo s.e. | power at 1 seed sd |')
  print('|---|---|---|---|---|')
  for k in (2, 3, 5, 10):
    aa = calibration.share_ranked(k, n, seed=k, **kw)
    power = '–' if k == 2 else f"{calibration.share_ranked(k, n, seed=100 + k, gap_sd=1.0, **kw)['share']:.1%}"
    print(f"| {k} | {aa['ranked']} of {n} | {aa['share']:.1%} | {aa['mc_se']:.1%} | {power} |", flush=True)
  print(f"seed sd of BLEU in the generator: {aa['seed_sd_bleu']:.2f}")


def _real(path: str, halves: list[int]):
  doc = stored.load(path)
  refs = doc['references']
  stats = np.concatenate(
    [np.stack([significance.sentence_statistics(h, refs) for h in v['greedy']]) for v in doc['variants']]
  )
  names = [f"{v['variant']} seed {s}" for v in doc['variants'] for s in v['seeds']]
  if any(h < 2 or 2 * h > len(names) for h in halves):
    raise ValueError(
      f'--halves={",".join(map(str, halves))}: {len(names)} seeds split into two groups of 2 to {len(names) // 2} only'
    )
  bleu = calibration.seed_bleu(stats)
  sd = float(bleu.std(ddof=1))
  print(f'Real A/A: {len(names)} seeds of one variant from {path}')
  print('test BLEU per seed: ' + ', '.join(f'{b:.2f}' for b in bleu))
  print(f'mean {bleu.mean():.2f}, seed sd {sd:.2f}')
  print('| seeds per group | splits | ranked | share |')
  print('|---|---|---|---|')
  for half in halves:
    out = calibration.splits(stats, half)
    print(f"| {half} + {half} | {out['splits']} | {out['ranked']} | {out['share']:.1%} |", flush=True)
  plan = calibration.seed_plan(sd)
  print(
    f'Seeds per variant for 80 % power at seed sd {sd:.2f} (Welch t, two-sided; family of m pairs: level 0.05 / m):'
  )
  for m, row in plan.items():
    cells = ', '.join(f'{d:g} BLEU: {"> 1000" if k is None else k}' for d, k in row.items())
    print(f'  m = {m}: {cells}')


if __name__ == '__main__':
  app.run(main, flags_parser=common.parse_flags)
