"""How many seeds per variant would decide an undecided contrast: the smallest K at which its simultaneous
interval would, with 80 % probability, lie above or below 0 or inside (-delta, delta) (attnmt.compare.family).

Planned the way the test will run, not more hopefully: Welch's degrees of freedom at equal seeds lie between
K - 1 and 2(K - 1) and are K - 1 when one variant's seeds vary far more, so the plan takes K - 1; the estimate
over the standard error is a t variable shifted by true difference / standard error. The seed sd is itself
estimated from few seeds: the plan is given at the pooled estimate and at its one-sided 95 % upper bound
(chi-square), a range rather than one optimistic number. The test set's variance stays in the standard error
at every K, so a difference smaller than the test set can resolve is out of reach of any number of seeds.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

POWER = 0.8  # the probability of a decision the plan asks for
MAX_SEEDS = 1000  # the plan gives up beyond this


def _stats():
  import scipy.stats

  return scipy.stats


def decision_probability(difference, sd, seeds, test_variance, level, delta):
  """P(the contrast is decided with `seeds` per variant): its interval at `level` (two-sided) excludes 0, or its
  1 - 2 level interval lies inside (-delta, delta) (TOST at `level` per side), for a true `difference` and seed
  sd `sd` (for a paired contrast, the sd of the per-seed differences over sqrt 2); `seeds` may be an array."""
  k = np.asarray(seeds, float)
  se = np.sqrt(2 * sd**2 / k + test_variance)
  df = np.maximum(k - 1, 1)
  t = _stats().t
  crit = t.ppf(1 - level / 2, df)  # ranking: the two-sided interval excludes 0
  one_sided = t.ppf(1 - level, df)  # equivalence: TOST, each one-sided test at `level`
  with np.errstate(divide='ignore', invalid='ignore'):
    mu = np.where(se > 0, abs(difference) / se, np.inf)
    width = np.where(se > 0, delta / se - one_sided, np.inf)  # |estimate| / se below this: equivalence
  low = np.maximum(width, 0.0)
  # undecided: low <= |mu + T| <= crit (empty when the equivalence region reaches the ranking one)
  undecided = np.where(
    low < crit, (t.cdf(crit - mu, df) - t.cdf(low - mu, df)) + (t.cdf(-low - mu, df) - t.cdf(-crit - mu, df)), 0.0
  )
  return np.clip(1 - np.nan_to_num(undecided, nan=0.0), 0.0, 1.0)


def seeds_to_decide(difference, sd, test_variance, level, delta, power: float = POWER) -> Optional[int]:
  """The smallest seeds per variant (2..MAX_SEEDS) whose decision_probability reaches `power`; None if none."""
  k = np.arange(2, MAX_SEEDS + 1)
  reached = np.nonzero(decision_probability(difference, sd, k, test_variance, level, delta) >= power)[0]
  return int(k[reached[0]]) if reached.size else None


def pooled_sd(sd_a: float, k_a: int, sd_b: float, k_b: int) -> tuple[float, float]:
  """The pair's pooled seed sd and its one-sided 95 % upper confidence bound (chi-square, K_a + K_b - 2 df)."""
  df = k_a + k_b - 2
  sd = float(np.sqrt((sd_a**2 * (k_a - 1) + sd_b**2 * (k_b - 1)) / df))
  return sd, float(sd * np.sqrt(df / _stats().chi2.ppf(0.05, df)))


def plan_contrast(pair: dict, variant_a: dict, variant_b: dict, level: float, delta: float) -> dict:
  """`plan` of a tested contrast (verdicts' pair with its 'design', 'se' and 'test_variance'): a paired contrast
  is planned from the sd of its per-seed differences (K - 1 df), an unpaired one from the variants' pooled sd."""
  tv = pair['test_variance'] or 0.0
  k_a, k_b = variant_a['seeds'], variant_b['seeds']
  if pair.get('design') == 'paired':
    sd_half = float(np.sqrt(max(pair['se'] ** 2 - tv, 0.0) * k_a / 2))  # sd of a - b over sqrt 2
    return plan(pair['difference'], sd_half, k_a, sd_half, 1, tv, level, delta) | {'design': 'paired'}
  return plan(pair['difference'], variant_a['sd'], k_a, variant_b['sd'], k_b, tv, level, delta)


def plan(difference, sd_a, k_a, sd_b, k_b, test_variance, level, delta) -> dict:
  """Seeds per variant to decide a contrast: at its observed difference and at the hardest one (delta / 2,
  where ranking and equivalence both need the interval narrower than delta), each at the pooled seed sd and
  at its upper bound ('…_upper'). None: out of reach of MAX_SEEDS."""
  sd, upper = pooled_sd(sd_a, k_a, sd_b, k_b)
  out = {'level': level, 'delta': delta, 'sd': sd, 'sd_upper': upper}
  for key, d in (('observed', difference), ('hardest', delta / 2)):
    out[key] = seeds_to_decide(d, sd, test_variance, level, delta)
    out[key + '_upper'] = seeds_to_decide(d, upper, test_variance, level, delta)
  return out
