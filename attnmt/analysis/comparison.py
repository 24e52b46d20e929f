"""The verdicts of a comparison of variants: every pair tested (attnmt.analysis.significance's Welch test with
the test set's variance), the pairs as families with Holm's correction, a verdict in words, and the seeds a
pair would need.

The primary family is every variant against the baseline (`none`) and against the best by mean; the other
pairs form a second family. A pair is ranked when its Holm-adjusted p is below alpha, never with one seed on
either side (the seed variance is then unmeasured). A pair that is not distinguishable carries `seeds_needed`:
seeds per variant for 80 % power against the observed difference and PLAN_DIFFERENCES at the family's level.
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from attnmt.analysis.significance import (
  ALPHA,
  PLAN_DIFFERENCES,
  corpus_bleu,
  holm,
  pair_test,
  seed_summary,
  seeds_needed,
  sentence_replicates,
  sentence_statistics,
  variant_summary,
  welch_test,
)


def verdict(
  a: str, b: str, difference: float, p_adjusted: float, seeds_a: int, seeds_b: int, alpha: float = ALPHA
) -> str:
  """'A > B' when the family-adjusted p is below alpha, else 'A ≈ B: not distinguishable with K seeds'; with
  one seed on either side 'not ranked'."""
  if min(seeds_a, seeds_b) < 2:
    return f'{a} vs {b}: not ranked with 1 seed (seed variance unmeasured; train more seeds to rank them)'
  if p_adjusted < alpha:
    return f'{a} > {b}' if difference > 0 else f'{b} > {a}'
  k = f'{seeds_a} seeds' if seeds_a == seeds_b else f'{seeds_a} and {seeds_b} seeds'
  return f'{a} ≈ {b}: not distinguishable with {k}'


def _pairs_wanted(variants: list[dict], base: Optional[int], best: int) -> list[tuple[int, int, str]]:
  """(v, ref, family) of every pair once: each variant against the baseline, then against the best (the
  primary family), then every other pair, the higher mean first."""
  wanted = []
  for ref, family in ((base, 'baseline'), (best, 'best')):
    for v in range(len(variants)):
      if ref is not None and ref != v and not any({v, ref} == {x, y} for x, y, _ in wanted):
        wanted.append((v, ref, family))
  order = sorted(range(len(variants)), key=lambda v: -variants[v]['mean'])
  for i, v in enumerate(order):
    for ref in order[i + 1 :]:
      if not any({v, ref} == {x, y} for x, y, _ in wanted):
        wanted.append((v, ref, 'other'))
  return wanted


def compare(
  names: Sequence[str],
  per_seed_hypotheses: Sequence[Sequence[Sequence[str]]],
  references: Sequence[str],
  baseline: Optional[str] = None,
  n_samples: int = 1000,
  seed: int = 12345,
  alpha: float = ALPHA,
) -> dict:
  """Every variant's per-seed corpus BLEU, mean, sd and t interval (seeds, test set added), and every pair
  (against the baseline, against the best, then the rest: 'against') with its difference, t interval, two-sided
  p, Holm-adjusted p within its family ('family': 'primary' or 'other'), verdict and, when not ranked, the seeds
  per variant that would detect the observed difference and those of PLAN_DIFFERENCES ('seeds_needed').
  `per_seed_hypotheses[v][k]` holds seed k's outputs of variant v for `references`, in order."""
  if len(names) != len(per_seed_hypotheses) or not names:
    raise ValueError('give one list of per-seed hypotheses per variant name')
  stats = [np.stack([sentence_statistics(h, references) for h in hyps]) for hyps in per_seed_hypotheses]
  return compare_statistics(names, stats, baseline, n_samples, seed, alpha)


def compare_statistics(
  names, stats, baseline=None, n_samples: int = 1000, seed: int = 12345, alpha: float = ALPHA
) -> dict:
  """compare from the sentence statistics (K_v x N x D per variant) instead of the texts."""
  observed = [[corpus_bleu(s.sum(0)) for s in per_variant] for per_variant in stats]
  out = compare_scores(names, observed, baseline, alpha, sentence_replicates(stats, n_samples, seed))
  return out | {'n_samples': n_samples, 'seed': seed}


def compare_scores(names, observed, baseline=None, alpha: float = ALPHA, reps=None) -> dict:
  """compare from per-seed scores alone (`observed[v]`: variant v's per-seed BLEU), with `reps` (per variant
  R x K, sentence_replicates) carrying the test set's variance in; without them the test covers the seeds
  only (the test set held fixed), and pairs with one seed on a side get no p-value."""
  if len(names) != len(observed) or not names or any(len(o) == 0 for o in observed):
    raise ValueError('give every variant a name and at least one per-seed score')
  variants = []
  for v, name in enumerate(names):
    if reps is None:
      summary = seed_summary(observed[v], alpha)
      summary |= {'test_variance': 0.0, 'interval': summary['ci']}
    else:
      summary = variant_summary(observed[v], reps[v], alpha)
    variants.append({'variant': name, **summary})
  best = max(range(len(names)), key=lambda v: variants[v]['mean'])
  base = names.index(baseline) if baseline in names else None
  pairs = []
  for v, ref, against in _pairs_wanted(variants, base, best):
    k_a, k_b = variants[v]['seeds'], variants[ref]['seeds']
    diff = variants[v]['mean'] - variants[ref]['mean']
    if reps is not None:
      test = pair_test(observed[v], observed[ref], reps[v], reps[ref], alpha)
    elif min(k_a, k_b) >= 2:
      test = welch_test(observed[v], observed[ref], 0.0, alpha) | {'test_variance': 0.0}
    else:
      test = {'interval': None, 'p_value': None, 'df': None, 'se': None, 'test_variance': None}
    tv = test['test_variance']
    pairs.append(
      {'a': names[v], 'b': names[ref], 'against': against, 'family': 'other' if against == 'other' else 'primary'}
      | {'difference': diff, 'interval': test['interval'], 'p_value': test['p_value'], 'df': test['df']}
      | {'se': test['se'], 'test_variance': tv, 'seeds': [k_a, k_b]}
    )
  ranked = min(r['seeds'] for r in variants) >= 2
  families = {}
  for family in ('primary', 'other'):
    members = [p for p in pairs if p['family'] == family]
    families[family] = len(members)
    for p, adjusted in zip(members, holm([1.0 if p['p_value'] is None else p['p_value'] for p in members])):
      p['p_adjusted'] = adjusted
      p['verdict'] = verdict(p['a'], p['b'], p['difference'], adjusted, *p['seeds'], alpha=alpha)
      p['ranked'] = ranked and adjusted < alpha
      p['seeds_needed'] = None if p['ranked'] or not ranked else _plan(p, variants, names, alpha / len(members))
  method = "Welch's t over seeds" + (
    ' (test set held fixed)' if reps is None else " with the test set's variance added"
  )
  return {
    'method': method + '; two-sided; Holm over each family',
    'baseline': None if base is None else names[base],
    'alpha': alpha,
    'families': families,
    'ranked': ranked,
    'best': names[best],
    'variants': variants,
    'pairs': pairs,
  }


def _plan(pair: dict, variants: list[dict], names: list, level: float) -> dict:
  """Seeds per variant for 80 % power at `level` (alpha over the family size, Bonferroni: the step of Holm that
  is hardest to pass) for the observed difference and PLAN_DIFFERENCES, from the pair's pooled seed sd."""
  a, b = variants[names.index(pair['a'])], variants[names.index(pair['b'])]
  sd = float(np.sqrt((a['sd'] ** 2 + b['sd'] ** 2) / 2))
  out = {'level': level, 'sd': sd, 'observed': seeds_needed(pair['difference'], sd, pair['test_variance'], level)}
  for d in PLAN_DIFFERENCES:
    out[f'{d:g}'] = seeds_needed(d, sd, pair['test_variance'], level)
  return out
