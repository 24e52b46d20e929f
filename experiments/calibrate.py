"""Is the comparison of variants calibrated? The error over the whole family, simulated with known truth and on
real runs (attnmt/compare/calibration.py; docs/results/calibration.md).

Simulated (--simulate): five variants, four identical and one far below (the main job's shape), at K = 2, 3, 5
and 10 seeds, with and without sentence-by-sentence differences between the variants, and on a length bucket
of 45 sentences; the seed design (identical variants whose seed variances differ up to 225 times, same-numbered
seeds correlated, families of 1, 3 and 10 contrasts, paired and unpaired, and the power paired against
unpaired); designs of rounds (sequential, at their exact boundaries); an equivalence claimed when the true
difference is exactly delta; the power curves (the probability of a decision by true difference and K,
and by rounds); and the faithfulness pages' family of ratio measures (`faithfulness`). Every table is printed, and with --out written as calibration.json and power.png:

    python -m experiments.calibrate --simulate --experiments=1000 --out=docs/results/calibration

Real (--translations): every seed of every variant in a translations file (an analysis's translations.json.gz)
treated as seeds of one variant, split every way into groups (2 groups of 2, 3 and 4 seeds, and 4 groups of 2),
each split compared as that many variants, every pair of them one family:

    python -m experiments.calibrate --translations=docs/results/calibration/translations.json.gz

Pairing (--pairing): how much same-numbered seeds of several variants correlate on stored runs (the rounds
of a design pooled when several files are given):

    python -m experiments.calibrate --pairing=docs/results/main_gpu/translations.json.gz
"""

import dataclasses
import json
import math
import os

import numpy as np
import scipy.stats
from absl import app, flags

from attnmt import plots
from attnmt.analysis import stored
from attnmt.compare import calibration, family, planning, sequential, pair_tests, seed_design
from attnmt.faithfulness import calibration as faith_calibration
from experiments import analyze_inputs, common

flags.DEFINE_bool('simulate', False, 'Run the simulated checks and the power curves.')
flags.DEFINE_integer('experiments', 1000, 'Simulated experiments per row.')
flags.DEFINE_integer('sentences', 400, 'Test sentences per simulated experiment.')
flags.DEFINE_float('interaction_sd', 0.3, "Sentence-by-sentence differences: each variant's effect per sentence.")
flags.DEFINE_string('translations', None, 'A translations.json.gz: the real A/A check over splits of its seeds.')
flags.DEFINE_list('splits', ['2x2', '2x3', '2x4', '4x2'], 'Real splits as GROUPSxSEEDS.')
flags.DEFINE_list(
  'pairing',
  [],
  'translations.json.gz files of several variants on one test set (the rounds of a design: one per round): how '
  'much their same-numbered seeds correlate.',
)
flags.DEFINE_string('out', None, 'With --simulate: write calibration.json and power.png here.')
RECORDED = {  # each part of --simulate and its key in calibration.json
  'family': 'family_errors',
  'design': 'design_errors',
  'rounds': 'sequential',
  'equivalence': 'equivalence_at_delta',
  'power': 'power',
  'rounds_power': 'rounds_power',
  'aso': 'aso',
  'faithfulness': 'faithfulness',
}
PARTS = tuple(RECORDED)
flags.DEFINE_list(
  'parts',
  list(PARTS),
  'With --simulate: which checks (a part already in --out/calibration.json is kept when not run again).',
)
FLAGS = flags.FLAGS

FAMILY = (0.0, 0.0, 0.0, 0.0, -1.0)  # four identical variants and one far below (13 BLEU)


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f'unexpected arguments {argv[1:]}')
  common.run_guarded(_calibrate)


def _calibrate():
  if not FLAGS.simulate and not FLAGS.translations and not FLAGS.pairing:
    raise ValueError('nothing to do: pass --simulate, --translations=FILE, --pairing=FILE, or several')
  if FLAGS.experiments < 1 or FLAGS.sentences < 2:
    raise ValueError('--experiments must be >= 1 and --sentences >= 2')
  if not (math.isfinite(FLAGS.interaction_sd) and FLAGS.interaction_sd >= 0):
    raise ValueError(f'--interaction_sd must be a finite number >= 0 (logit units), got {FLAGS.interaction_sd}')
  unknown = sorted(set(FLAGS.parts) - set(PARTS)) or ([] if FLAGS.parts else ['(no part named)'])
  if unknown:
    raise ValueError(f'--parts: unknown {", ".join(unknown)}; choose from {", ".join(PARTS)}')
  analyze_inputs.output_dir(FLAGS.out, what='calibration.json and power.png')
  if FLAGS.simulate:
    _simulated(FLAGS.experiments, FLAGS.sentences, FLAGS.interaction_sd, FLAGS.out)
  if FLAGS.translations:
    _real(FLAGS.translations, [_groups(s) for s in FLAGS.splits])
  if FLAGS.pairing:
    _pairing(FLAGS.pairing)


def _pairing(paths: list[str]):
  docs = [stored.load(p) for p in paths]
  path = ', '.join(paths) if len(paths) < 3 else f'{paths[0]} and {len(paths) - 1} more'
  if any(d['references'] != docs[0]['references'] for d in docs):
    raise ValueError(f'--pairing: {path} translate different test sentences; give files of one test set')
  doc = stored.pool_seeds({**docs[0], 'variants': [v for d in docs for v in d['variants']]})
  refs = doc['references']
  names = [v['variant'] for v in doc['variants']]
  bleu = [
    [pair_tests.corpus_bleu(pair_tests.sentence_statistics(h, refs).sum(0)) for h in v['greedy']]
    for v in doc['variants']
  ]
  rows = calibration.seed_pairing(names, bleu, [v['seeds'] for v in doc['variants']])
  print(f'Same-numbered seeds of {path}: per-seed BLEU correlation, var(a - b) / (var a + var b)')
  print('| pair | seeds | correlation | variance ratio |')
  print('|---|---|---|---|')
  for r in rows:
    cells = ['–' if r[k] is None else f'{r[k]:.2f}' for k in ('correlation', 'variance_ratio')]
    print(f"| {r['a']} ~ {r['b']} | {r['seeds']} | {cells[0]} | {cells[1]} |")
  known = [r['correlation'] for r in rows if r['correlation'] is not None]
  if known:
    print(f'mean correlation {np.mean(known):.2f} over {len(known)} pair(s), from {min(known):.2f} to {max(known):.2f}')


def _groups(text: str) -> tuple[int, int]:
  groups, _, size = text.partition('x')
  try:
    return int(groups), int(size)
  except ValueError:
    raise ValueError(f'--splits entry {text!r} is not GROUPSxSEEDS, e.g. 4x2') from None


def _simulated(n: int, sentences: int, interaction: float, out) -> dict:
  record = {'experiments': n, 'sentences': sentences, 'interaction_sd': interaction, 'family': list(FAMILY)}
  if out and os.path.exists(os.path.join(out, 'calibration.json')):
    kept = _read_record(os.path.join(out, 'calibration.json'))
    if {k: kept.get(k) for k in record} == record:
      record = kept  # the parts not run again stay
    elif set(kept) - set(record) - {RECORDED[p] for p in FLAGS.parts}:  # parts at other settings would be lost
      was = ', '.join(f'--{k}={kept.get(k)}' for k in ('experiments', 'sentences', 'interaction_sd'))
      raise ValueError(f'{out}/calibration.json holds parts run at {was}: run at those, or give another --out')
  parts = set(FLAGS.parts)
  print(f'Simulated: {n} experiments per row, {sentences} sentences; 5 variants, 4 identical, one far below')
  if 'family' in parts:
    print('| seeds per variant | sentence-by-sentence differences | sentences | any wrong claim | Monte Carlo s.e. |')
    print('|---|---|---|---|---|')
    rows = []
    for k in (2, 3, 5, 10):
      for sd in (0.0, interaction):
        rows.append(_row(k, sd, sentences, n, seed=10 * k + (sd > 0)))
    rows.append(_row(5, interaction, 45, n, seed=99))  # a length bucket of 45 sentences
    record['family_errors'] = rows
  if 'design' in parts:
    record['design_errors'] = _design(n)
  design = sequential.Design(seeds_per_round=5, rounds=4)
  if 'rounds' in parts:
    record['sequential'] = _rounds(n, design, sentences, interaction)
  if 'equivalence' in parts:
    gap = calibration.true_differences((0.0, 0.03), sentences)[1]  # delta is set to this true difference
    equivalent = calibration.family_errors(10, n, (0.03, 0.0), sentences=sentences, delta=float(gap), seed=5)
    print(
      f'\nTrue difference exactly delta ({gap:.3f} BLEU), 10 seeds: equivalence claimed in {equivalent["share"]:.1%}'
    )
    record['equivalence_at_delta'] = equivalent | {'delta': float(gap)}
  if 'power' in parts:
    record['power'] = _power(max(n // 5, 2))
  if 'rounds_power' in parts:
    record['rounds_power'] = _rounds_power(max(n // 5, 2))
  if 'aso' in parts:
    record['aso'] = _aso(n)
  if 'faithfulness' in parts:
    record['faithfulness'] = _faithfulness(n)
  if out:
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, 'calibration.json'), 'w') as f:
      json.dump(record, f, indent=1)
    written = [os.path.join(out, 'calibration.json')]
    if 'power' in record:
      written.append(_power_plot(record['power'], out))
    print('Wrote ' + ' and '.join(written))
  return record


# The design the comparison assumes, at its worst: seed variances 1:225 apart, same-numbered seeds correlated.
DESIGNS = {
  1: (0.1, 1.5),
  3: (0.1, 0.5, 1.5),
  10: (0.1, 0.3, 0.9, 1.5, 1.5),
}


def _design(n: int) -> dict:
  """Family error of identical variants with unequal seed variances and correlated seeds, paired and unpaired,
  by family size, rho and K; and the power of one pair at a true difference of 1 and 2 seed sds (sd 0.45,
  margin 0.5), paired against unpaired, by rho."""
  print('\nThe design: identical variants, seed sds 1:15 (variances 1:225), same-numbered seeds correlated rho')
  print('| contrasts | rho | test | K = 2 | K = 3 | K = 5 | K = 10 |')
  print('|---|---|---|---|---|---|---|')
  rows = []
  for m, sds in DESIGNS.items():
    for rho in (0.0, 0.6):
      scenario = seed_design.Scenario(means=(0.0,) * len(sds), seed_sds=sds, rho=rho, sentence_rho=rho / 2)
      for paired in (True, False):
        cells = [seed_design.design_errors(scenario, k, n, paired=paired, seed=k + m) for k in (2, 3, 5, 10)]
        rows.append({'contrasts': m, 'rho': rho, 'paired': paired, 'seed_sds': list(sds), 'by_k': cells})
        shown = ' | '.join(f"{c['share']:.1%} ± {c['mc_se']:.1%}" for c in cells)
        print(f"| {m} | {rho:g} | {'paired' if paired else 'unpaired'} | {shown} |", flush=True)
  power = []
  print('\nPower of one pair (seed sd 0.45, margin 0.5, K = 5): share decided, paired | unpaired')
  for rho in (0.0, 0.3, 0.6, 0.8):
    for gap in (1.0, 2.0):
      scenario = seed_design.Scenario(means=(gap * 0.45, 0.0), seed_sds=(0.45, 0.45), rho=rho, sentence_rho=rho)
      got = [seed_design.design_errors(scenario, 5, n, paired=p, seed=int(10 * rho))['decided_share'] for p in (1, 0)]
      power.append({'rho': rho, 'gap_sd': gap, 'paired': got[0], 'unpaired': got[1]})
      print(f'  rho {rho:g}, true difference {gap:g} seed sd: {got[0]:.0%} | {got[1]:.0%}', flush=True)
  return {'family': rows, 'power': power, 'experiments': n}


def _rounds(n: int, design, sentences: int, interaction: float) -> dict:
  """Any wrong claim over the looks of rounds of 5 seeds up to 4: the sacrebleu generator's family (four
  identical variants and one far below, sentence-by-sentence differences), and the seed design's worst
  (identical variants, seed variances 1:225, rho 0.6), paired and unpaired."""
  seq = calibration.sequential_errors(design, n, FAMILY, sentences=sentences, interaction_sd=interaction, seed=7)
  print(
    f"\nRounds of 5 seeds, up to 4 ({design.spending}, exact boundaries), same family: any wrong claim over all "
    f"looks {seq['share']:.1%} ± {seq['mc_se']:.1%}; every contrast decided by look "
    + ', '.join(f'{x:.0%}' for x in seq['decided_by_look'])
  )
  out = {'bleu': seq | {'design': design.__dict__}, 'design': []}
  for m, sds in DESIGNS.items():
    scenario = seed_design.Scenario(means=(0.0,) * len(sds), seed_sds=sds, rho=0.6, sentence_rho=0.3)
    for paired in (True, False):
      row = seed_design.design_rounds(scenario, design, n, paired=paired, seed=m)
      out['design'].append({'contrasts': m, 'paired': paired, **row})
      print(
        f"  seed sds 1:15, rho 0.6, {m} contrast(s), {'paired' if paired else 'unpaired'}: any wrong claim "
        f"{row['share']:.1%} ± {row['mc_se']:.1%}",
        flush=True,
      )
  return out


# Almost stochastic order beside the t verdicts: (contrasts, seed sds, rho) of identical variants.
ASO_FAMILIES = (
  (1, (0.45, 0.45), 0.0),
  (1, (0.45, 0.45), 0.6),
  (10, (0.45,) * 5, 0.2),
  (10, (0.1, 0.3, 0.9, 1.5, 1.5), 0.6),
)


def _aso(n: int) -> dict:
  """ASO (eps_min < 0.2 at alpha / m, the higher mean first) against the paired t verdicts on the same
  experiments: any wrong ranking over the family of identical variants, by family, rho and K; and the share of
  one pair ranked at a true difference of 1 and 2 seed sds (sd 0.45, rho 0.2)."""
  print('\nASO beside the t verdicts: identical variants, any wrong ranking over the family, ASO | paired t')
  print('| contrasts | seed sds | rho | K = 5 | K = 10 | K = 20 |')
  print('|---|---|---|---|---|---|')
  rows = []
  for m, sds, rho in ASO_FAMILIES:
    scenario = seed_design.Scenario(means=(0.0,) * len(sds), seed_sds=sds, rho=rho, sentence_rho=rho / 2)
    cells = [seed_design.aso_errors(scenario, k, n, seed=k + m) for k in (5, 10, 20)]
    rows.append({'contrasts': m, 'seed_sds': list(sds), 'rho': rho, 'by_k': cells})
    shown = ' | '.join(f"{c['aso']['share']:.1%} \\| {c['t']['share']:.1%}" for c in cells)
    ratio = f'1:{round((max(sds) / min(sds)) ** 2)}' if max(sds) > min(sds) else 'equal'
    print(f'| {m} | {ratio} | {rho:g} | {shown} |', flush=True)
  power = []
  print('Power of one pair (seed sd 0.45, rho 0.2): share ranked, ASO | paired t')
  for gap in (1.0, 2.0):
    scenario = seed_design.Scenario(means=(gap * 0.45, 0.0), seed_sds=(0.45, 0.45), rho=0.2, sentence_rho=0.2)
    for k in (5, 10):
      got = seed_design.aso_errors(scenario, k, n, seed=int(10 * gap) + k)
      power.append({'gap_sd': gap, 'seeds': k, 'aso': got['aso']['ranked_share'], 't': got['t']['ranked_share']})
      print(
        f"  true difference {gap:g} seed sd, K = {k}: {got['aso']['ranked_share']:.0%} | {got['t']['ranked_share']:.0%}"
      )
  return {'family': rows, 'power': power, 'experiments': n}


def _faithfulness(n: int) -> dict:
  """The faithfulness pages' family (attnmt/faithfulness/calibration.py): 9 identical cells, seed sds 1:15,
  rho 0.5, 4 ratio measures kept per sentence, 32 contrasts against the first cell; any wrong ranking at
  K = 2, 3, 5, and at K = 3 with the last cell shifted up (its contrasts' power)."""
  null = faith_calibration.Null()
  print(f'\nThe faithfulness family: 9 identical cells, seed sds 1:15, rho {null.rho:g}, 4 measures x 8 contrasts')
  rows = [faith_calibration.family_errors(null, k, n, seed=k) for k in (2, 3, 5)]
  rows += [faith_calibration.family_errors(null, 3, n, shift=d, seed=10 + i) for i, d in enumerate((0.4, 0.8, 1.5))]
  for r in rows:
    power = f", the shifted cell ranked upwards in {r['power']:.0%} of its contrasts" if r['shift'] else ''
    print(f"  K = {r['seeds']}, shift {r['shift']:g}: any wrong ranking {r['share']:.1%} ± {r['mc_se']:.1%}{power}")
  return {'null': dataclasses.asdict(null), 'rows': rows, 'experiments': n}


def _read_record(path: str) -> dict:
  """An earlier calibration.json, whose parts a run keeps when it does not run them again."""
  try:
    with open(path) as f:
      kept = json.load(f)
    if not isinstance(kept, dict):
      raise ValueError('not a JSON object')
  except (OSError, ValueError) as e:
    raise ValueError(f'{path} cannot be read ({e}); move it away, or give another --out') from None
  return kept


def _rounds_power(n: int) -> dict:
  """P(every contrast decided by each look) of one pair in rounds of 5 seeds up to 8 (O'Brien-Fleming, exact
  boundaries), seed sd 0.45 and margin 0.5 BLEU (the main job's), paired seeds with rho 0.2 (decided.md's
  mean), by true difference."""
  design = sequential.Design(seeds_per_round=5, rounds=8)
  print(f'\nPower by rounds: one pair, rounds of 5 seeds up to 8, seed sd 0.45, margin 0.5, rho 0.2, {n} experiments')
  rows = []
  for d in (0.0, 0.25, 0.5, 1.0):
    scenario = seed_design.Scenario(means=(d, 0.0), seed_sds=(0.45, 0.45), rho=0.2, sentence_rho=0.2)
    row = seed_design.design_rounds(scenario, design, n, seed=int(100 * d)) | {'difference': d}
    rows.append(row)
    looks = ', '.join(f'{x:.0%}' for x in row['decided_by_look'])
    print(f"  difference {d:g}: decided by look 1-8: {looks}; mean seeds {row['mean_seeds']:.1f}", flush=True)
  return {'design': design.__dict__, 'rows': rows, 'experiments': n}


def _row(k, sd, sentences, n, seed) -> dict:
  out = calibration.family_errors(k, n, FAMILY, sentences=sentences, interaction_sd=sd, seed=seed)
  print(
    f"| {k} | {'yes' if sd else 'no'} | {sentences} | {out['wrong']} ({out['share']:.1%}) | {out['mc_se']:.1%} |",
    flush=True,
  )
  return out | {'interaction_sd': sd, 'sentences': sentences}


def _power(n: int) -> dict:
  """P(decision) of one pair at the level of a family of 10 (0.005), margin one seed sd, by gap and K."""
  print(f'\nPower: one pair at level 0.05 / 10, margin one seed sd, {n} experiments per point')
  gaps, out = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0), {}
  for k in (3, 5, 10, 20):
    out[k] = [calibration.decision_rate(k, g, n, 0.005, 1.0, seed=k)['decided'] for g in gaps]
    print(f'  K = {k}: ' + ', '.join(f'gap {g:g} sd: {p:.0%}' for g, p in zip(gaps, out[k])), flush=True)
  return {'gaps_sd': list(gaps), 'decided': {str(k): v for k, v in out.items()}, 'experiments': n}


def _power_plot(power: dict, out: str) -> str:
  fig = plots.mpl().figure.Figure(figsize=(6.5, 4.2), dpi=plots.DPI)
  ax = fig.add_subplot()
  for k, values in power['decided'].items():
    ax.plot(power['gaps_sd'], values, marker='o', label=f'{k} seeds per variant')
  ax.set_xlabel('true difference (seed sds)')
  ax.set_ylabel('P(decided: ranked or equivalent)')
  ax.set_title('Power at a family of 10 (level 0.005 per contrast), margin 1 seed sd')
  ax.axhline(0.8, color='grey', lw=0.5)
  ax.legend()
  return plots.save(fig, os.path.join(out, 'power.png'))


def _real(path: str, splits: list[tuple[int, int]]):
  doc = stored.load(path)
  names = sorted({stored.pooled_name(v) for v in doc['variants']})
  if len(names) > 1:
    raise ValueError(
      f'{path} holds {len(names)} variants ({", ".join(names)}); the real A/A check splits the seeds of one '
      'variant: give the translations of one variant'
    )
  refs = doc['references']
  stats = np.concatenate(
    [np.stack([pair_tests.sentence_statistics(h, refs) for h in v['greedy']]) for v in doc['variants']]
  )
  k = stats.shape[0]
  if any(g < 2 or s < 2 or g * s > k for g, s in splits):
    raise ValueError(f'--splits={",".join(f"{g}x{s}" for g, s in splits)}: {k} seeds hold at most {k // 2} groups of 2')
  bleu = calibration.seed_bleu(stats)
  print(f'Real A/A: {k} seeds of one variant from {path}')
  print('test BLEU per seed: ' + ', '.join(f'{b:.2f}' for b in bleu))
  print(f'mean {bleu.mean():.2f}, seed sd {bleu.std(ddof=1):.2f}')
  print('| groups x seeds | contrasts per split | splits | any pair ranked | share |')
  print('|---|---|---|---|---|')
  for g, s in splits:
    out = calibration.splits(stats, g, s)
    print(f"| {g} x {s} | {g * (g - 1) // 2} | {out['splits']} | {out['wrong']} | {out['share']:.1%} |", flush=True)
  print(f'(every split is one family at {family.ALPHA:g}; any ranking between groups of one variant is wrong)')
  _plan_table(float(bleu.std(ddof=1)), k - 1)


def _plan_table(sd: float, df: int, delta: float = family.DELTA):
  """Seeds per variant that decide a contrast with 80 % probability (planning.seeds_to_decide), by true
  difference and family size, at the seed sd and at its one-sided 95 % upper bound from `df` degrees of freedom."""
  upper = sd * float(np.sqrt(df / scipy.stats.chi2.ppf(0.05, df)))
  print(
    f'Seeds per variant to decide a contrast (80 %, margin ±{delta:g}), seed sd {sd:.2f} – upper bound {upper:.2f}:'
  )
  differences = (0.0, delta / 2, delta, 2 * delta)
  print('| contrasts in the family | ' + ' | '.join(f'true difference {d:g}' for d in differences) + ' |')
  print('|---|' + '---|' * len(differences))
  for m in (1, 3, 10):
    cells = []
    for d in differences:
      ks = [planning.seeds_to_decide(d, x, 0.0, family.ALPHA / m, delta) for x in (sd, upper)]
      cells.append('–'.join('> 1000' if x is None else str(x) for x in ks))
    print(f'| {m} | ' + ' | '.join(cells) + ' |')


if __name__ == '__main__':
  app.run(main, flags_parser=common.parse_flags)
