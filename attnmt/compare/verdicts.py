"""The verdicts of a comparison of variants: each variant's per-seed BLEU and interval, and every contrast of a
declared family (attnmt.compare.family) tested by attnmt.compare.pair_tests's Welch test with the test set's
variance, its simultaneous interval, its answer (A > B, A ≈ B within ±delta, undecided) and, when undecided,
the seeds per variant that would decide it (attnmt.compare.planning).

`level` is the part of alpha this analysis may spend: all of it for a single look, a look's share in a design
that trains seeds in rounds (attnmt.compare.sequential). Contrasts decided at an earlier look are passed in
`decided` and keep their verdicts.
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from attnmt.compare import family, planning
from attnmt.compare.pair_tests import (
  corpus_bleu,
  jackknife,
  pair_test,
  seed_summary,
  sentence_statistics,
  variant_summary,
  welch_test,
)

ALPHA, DELTA = family.ALPHA, family.DELTA


def compare(
  names: Sequence[str],
  per_seed_hypotheses: Sequence[Sequence[Sequence[str]]],
  references: Sequence[str],
  baseline: Optional[str] = None,
  **options,
) -> dict:
  """compare_scores from texts: `per_seed_hypotheses[v][k]` holds seed k's outputs of variant v for
  `references`, in order; `options` as compare_scores'."""
  if len(names) != len(per_seed_hypotheses) or not names:
    raise ValueError('give one list of per-seed hypotheses per variant name')
  stats = [np.stack([sentence_statistics(h, references) for h in hyps]) for hyps in per_seed_hypotheses]
  return compare_statistics(names, stats, baseline, **options)


def compare_statistics(names, stats, baseline=None, **options) -> dict:
  """compare_scores from the sentence statistics (K_v x N x D per variant): per-seed corpus BLEU and the
  jackknife over sentences."""
  observed = [[corpus_bleu(s.sum(0)) for s in per_variant] for per_variant in stats]
  return compare_scores(names, observed, baseline, jack=[jackknife(s) for s in stats], **options)


def compare_scores(
  names,
  observed,
  baseline=None,
  jack=None,
  contrasts: str = 'all',
  delta: float = DELTA,
  alpha: float = ALPHA,
  level: Optional[float] = None,
  decided: Optional[dict] = None,
  plan: bool = True,
) -> dict:
  """Every variant's per-seed score, mean, sd and 95 % t interval, and every contrast of the family
  `contrasts` (family.contrast_pairs) with its difference, simultaneous interval (coverage 1 - level / m),
  two-sided p, adjusted p (below alpha exactly when the interval excludes 0), adjusted equivalence p (below
  alpha exactly when the interval lies within ±delta), answer ('decision') and verdict, and for an undecided
  contrast 'seeds_to_decide' (planning.plan at the family's level). `observed[v]`: variant v's per-seed BLEU;
  `jack[v]`: its K x N jackknife over sentences (significance.jackknife), which carries the test set's variance
  in; without it the test covers the seeds only (the test set held fixed) and one seed gets no interval.
  `decided`: {(a, b): contrast} from earlier looks, kept as they are. `plan` False leaves out the seed plans
  (simulations, which only read the decisions)."""
  if len(names) != len(observed) or not names or any(len(o) == 0 for o in observed):
    raise ValueError('give every variant a name and at least one per-seed score')
  bad = [n for n, o in zip(names, observed) if not np.isfinite(np.asarray(o, float)).all()]
  if bad:
    raise ValueError(f'{", ".join(bad)}: a per-seed score is not a finite number; fix or drop that seed')
  names, spec = list(names), family.spec_text(contrasts)
  level = alpha if level is None else level
  variants = []
  for v, name in enumerate(names):
    if jack is None:
      summary = seed_summary(observed[v], alpha)
      summary |= {'test_variance': 0.0, 'interval': summary['ci']}
    else:
      summary = variant_summary(observed[v], jack[v], alpha)
    variants.append({'variant': name, **summary})
  wanted = family.contrast_pairs(names, spec) if len(names) > 1 else []  # one variant: nothing to contrast
  per_contrast = level / max(len(wanted), 1)
  pairs = []
  for i, j in wanted:
    if spec == 'all' and variants[j]['mean'] > variants[i]['mean']:
      i, j = j, i  # every pair: the higher mean first, for reading (the family is the same)
    earlier = (decided or {}).get((names[i], names[j])) or (decided or {}).get((names[j], names[i]))
    if earlier is not None:
      pairs.append(earlier)
      continue
    pair = _contrast(names, variants, observed, jack, i, j, per_contrast, len(wanted), delta, alpha, level, plan)
    pairs.append(pair)
  return {
    'method': "Welch's t over seeds"
    + (' (test set held fixed)' if jack is None else " with the test set's variance (jackknife over sentences)")
    + f'; simultaneous intervals, Bonferroni over {len(wanted)} contrast(s)',
    'baseline': baseline if baseline in names else None,
    'alpha': alpha,
    'level': level,
    'delta': delta,
    'contrasts': spec,
    'family_size': len(wanted),
    'ranked': min(v['seeds'] for v in variants) >= 2,
    'variants': variants,
    'pairs': pairs,
  }


def _contrast(names, variants, observed, jack, i, j, per_contrast, m, delta, alpha, level, plan) -> dict:
  """One contrast of the family, tested at `per_contrast` (two-sided)."""
  k = [variants[i]['seeds'], variants[j]['seeds']]
  if jack is not None:
    test = pair_test(observed[i], observed[j], jack[i], jack[j], per_contrast, delta)
  elif min(k) >= 2:
    test = welch_test(observed[i], observed[j], 0.0, None, per_contrast, delta)
  else:
    test = {'interval': None, 'p_value': None, 'df': None, 'se': None, 'test_variance': None}
  scale = m * alpha / level  # adjusted p < alpha exactly when p < level / m
  p, p_eq = test['p_value'], test.get('p_equivalent')
  diff = variants[i]['mean'] - variants[j]['mean']
  out = {'a': names[i], 'b': names[j], 'difference': diff, 'seeds': k, 'level': per_contrast}
  out |= {key: test[key] for key in ('interval', 'p_value', 'df', 'se', 'test_variance')}
  out['p_adjusted'] = None if p is None else min(1.0, p * scale)
  out['p_equivalent_adjusted'] = None if p_eq is None else min(1.0, 2 * p_eq * scale)
  interval = test['interval'] if min(k) >= 2 else None
  out['decision'] = family.decision(interval, delta, k)
  out['verdict'] = family.verdict(names[i], names[j], diff, interval, delta, k)
  out['ranked'] = out['decision'] == family.GREATER
  out['seeds_to_decide'] = None
  if out['decision'] == family.UNDECIDED and plan:
    a, b = variants[i], variants[j]
    tv = test['test_variance'] or 0.0
    out['seeds_to_decide'] = planning.plan(diff, a['sd'], k[0], b['sd'], k[1], tv, per_contrast, delta)
  return out
