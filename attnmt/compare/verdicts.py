"""The verdicts of a comparison of variants: each variant's per-seed BLEU and interval, and every contrast of a
declared family (attnmt.compare.family) tested by attnmt.compare.pair_tests (paired by seed where the seeds
match, else unpaired) with the test set's variance, its simultaneous interval, its answer (A > B, A ≈ B within ±delta, undecided) and, when undecided,
the seeds per variant that would decide it (attnmt.compare.planning).

`level` is the part of alpha this analysis may spend: all of it for a single look, a look's share in a design
that trains seeds in rounds (attnmt.compare.sequential). Contrasts decided at an earlier look are passed in
`decided` and keep their verdicts.
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from attnmt.compare import family, pair_tests, planning, stochastic_order
from attnmt.compare.pair_tests import corpus_bleu, jackknife, seed_summary, sentence_statistics, variant_summary

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
  seeds: Optional[Sequence[Sequence[int]]] = None,
  equivalence_level: Optional[float] = None,
) -> dict:
  """Every variant's per-seed score, mean, sd and 95 % t interval, and every contrast of the family
  `contrasts` (family.contrast_pairs) with its difference, simultaneous interval (coverage 1 - level / m),
  two-sided p, adjusted p (below alpha exactly when the interval excludes 0), adjusted equivalence p (below
  alpha exactly when the equivalence interval, coverage 1 - 2 level / m, lies within ±delta: TOST at level / m
  per side), answer ('decision') and verdict, the 'design' it was tested by (pair_tests.pair_test: paired by
  seed, unpaired, or the sentences alone), and for an undecided contrast 'seeds_to_decide' (planning.plan_contrast
  at the family's level and the page's seed sd, 'seed_sd'). `observed[v]`: variant v's per-seed BLEU; `seeds[v]`: the seed number of each (the
  contrasts of variants with the same seeds are paired; None: every contrast unpaired); `jack[v]`: its K x N
  jackknife over sentences (pair_tests.jackknife), which carries the test set's variance in; without it the
  test covers the seeds only (the test set held fixed) and one seed gets no interval.
  `equivalence_level`: the budget of the tests of equivalence when it differs from `level` (a look of a
  group-sequential design, whose one-sided boundaries differ from its two-sided ones); each one-sided test is
  at equivalence_level / m. `decided`: {(a, b): contrast} from earlier looks, kept as they are. `plan` False
  leaves out the seed plans and the almost-stochastic-order comparison beside the verdicts ('aso',
  stochastic_order.aso_or_none at level / m; simulations, which only read the decisions)."""
  if len(names) != len(observed) or not names or any(len(o) == 0 for o in observed):
    raise ValueError('give every variant a name and at least one per-seed score')
  bad = [n for n, o in zip(names, observed) if not np.isfinite(np.asarray(o, float)).all()]
  if bad:
    raise ValueError(f'{", ".join(bad)}: a per-seed score is not a finite number; fix or drop that seed')
  if delta != 0:  # 0: no margin declared, no equivalence claimed (the faithfulness page's measures)
    family.checked('delta', delta, 'delta')
  alpha = family.check_alpha(alpha)
  if seeds is not None and [len(s) for s in seeds] != [len(o) for o in observed]:
    raise ValueError('give one seed number per per-seed score of every variant (seeds), or none')
  names, spec = list(names), family.spec_text(contrasts)
  level = alpha if level is None else level
  equivalence_level = level if equivalence_level is None else equivalence_level
  variants = []
  for v, name in enumerate(names):
    if jack is None:
      summary = seed_summary(observed[v], alpha)
      summary |= {'test_variance': 0.0, 'interval': summary['ci']}
    else:
      summary = variant_summary(observed[v], jack[v], alpha)
    variants.append({'variant': name, **summary})
  spread = planning.page_sd(variants)  # the seed sd every plan of this page is made at
  wanted = family.contrast_pairs(names, spec) if len(names) > 1 else []  # one variant: nothing to contrast
  per_contrast = level / max(len(wanted), 1)
  tost = equivalence_level / max(len(wanted), 1)
  pairs = []
  for i, j in wanted:
    if spec == 'all' and variants[j]['mean'] > variants[i]['mean']:
      i, j = j, i  # every pair: the higher mean first, for reading (the family is the same)
    earlier = (decided or {}).get((names[i], names[j])) or (decided or {}).get((names[j], names[i]))
    if earlier is not None:
      pairs.append(earlier)
      continue
    pair = _contrast(names, variants, observed, jack, seeds, i, j, (per_contrast, tost), delta, alpha, spread, plan)
    pairs.append(pair)
  return {
    'method': _method(pairs, jack is None, len(wanted)),
    'designs': sorted({p['design'] for p in pairs if p.get('design')}),
    'baseline': baseline if baseline in names else None,
    'alpha': alpha,
    'level': level,
    'equivalence_level': equivalence_level,
    'delta': delta,
    'contrasts': spec,
    'family_size': len(wanted),
    'ranked': min(v['seeds'] for v in variants) >= 2,
    'variants': variants,
    'seed_sd': spread,
    'pairs': pairs,
  }


def _method(pairs: list[dict], fixed_test_set: bool, m: int) -> str:
  """The test in words: the designs its contrasts used, the test set's part, the family's adjustment."""
  words = {
    pair_tests.PAIRED: 'paired t over the same-numbered seeds (K - 1 df)',
    pair_tests.UNPAIRED: 'unpaired t over seeds (min(K_A, K_B) - 1 df)',
    pair_tests.SENTENCES: 'one seed: the test sentences alone (ranks nothing)',
  }
  used = [words[d] for d in words if any(p.get('design') == d for p in pairs)] or [words[pair_tests.PAIRED]]
  test_set = ' (test set held fixed)' if fixed_test_set else " with the test set's variance (jackknife over sentences)"
  return '; '.join(used) + test_set + f'; simultaneous intervals, Bonferroni over {m} contrast(s)'


def _contrast(names, variants, observed, jack, seeds, i, j, levels, delta, alpha, spread, plan) -> dict:
  """One contrast of the family: ranked at levels[0] (two-sided), equivalent by TOST at levels[1] per side;
  with `plan`, planned when undecided at the page's seed sd `spread` (None: no plan) and ASO beside it."""
  per_contrast, tost = levels
  k = [variants[i]['seeds'], variants[j]['seeds']]
  jack_i, jack_j = (None, None) if jack is None else (jack[i], jack[j])
  seeds_i, seeds_j = (None, None) if seeds is None else (seeds[i], seeds[j])
  test = pair_tests.pair_test(observed[i], observed[j], jack_i, jack_j, per_contrast, delta, seeds_i, seeds_j, tost)
  scale = alpha / per_contrast  # adjusted p < alpha exactly when p < the contrast's level
  p, p_eq = test['p_value'], test.get('p_equivalent')
  diff = variants[i]['mean'] - variants[j]['mean']
  out = {'a': names[i], 'b': names[j], 'difference': diff, 'seeds': k, 'level': per_contrast, 'tost_level': tost}
  out |= {key: test.get(key) for key in ('design', 'interval', 'equivalence_interval', 'p_value', 'df', 'se')}
  out['test_variance'] = test.get('test_variance')
  out['p_adjusted'] = None if p is None else min(1.0, p * scale)
  out['p_equivalent_adjusted'] = None if p_eq is None else min(1.0, p_eq * alpha / tost)
  interval, within = (test['interval'], test.get('equivalence_interval')) if min(k) >= 2 else (None, None)
  out['decision'] = family.decision(interval, delta, k, within)
  out['verdict'] = family.verdict(names[i], names[j], diff, interval, delta, k, within)
  out['ranked'] = out['decision'] == family.GREATER
  out['seeds_to_decide'] = None
  if out['decision'] == family.UNDECIDED and plan and spread:
    out['seeds_to_decide'] = planning.plan_contrast(out, spread, per_contrast, delta)
  out['aso'] = stochastic_order.aso_or_none(observed[i], observed[j], per_contrast) if plan else None
  return out
