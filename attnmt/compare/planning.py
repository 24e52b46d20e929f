"""How many seeds per variant would decide an undecided contrast: the smallest K at which, with 80 %
probability, its simultaneous interval would lie above or below 0, or its two one-sided tests would put it
inside (-delta, delta) (attnmt.compare.family).

Planned the way the test will run: K - 1 degrees of freedom (the paired t's, and the unpaired t's at equal
seeds), the estimate over the standard error a t variable shifted by true difference / standard error. The
seed sd is the page's (`page_sd`: every variant's seed variance pooled, so a plan does not rest on its own
two variants' few seeds) and is itself an estimate: the plan is given at it and at its one-sided 95 % upper
bound (chi-square), a range rather than one optimistic number. It plans an unpaired contrast's variance,
2 sd^2 / K, for every contrast, which a paired one beats when same-numbered seeds correlate. The test set's
variance stays in the standard error at every K, so a difference smaller than the test set can resolve is out
of reach of any number of seeds. The seeds are fresh ones: the look that made the plan has spent its alpha.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from attnmt.compare import pair_tests

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
  crit = pair_tests.t_quantile(1 - level / 2, df)  # ranking: the two-sided interval excludes 0
  one_sided = pair_tests.t_quantile(1 - level, df)  # equivalence: TOST, each one-sided test at `level`
  with np.errstate(divide='ignore', invalid='ignore'):
    mu = np.where(se > 0, abs(difference) / se, np.inf)
    width = np.where(se > 0, delta / se - one_sided, np.inf)  # |estimate| / se below this: equivalence
  low = np.maximum(width, 0.0)
  cdf = pair_tests.t_cdf
  # undecided: low <= |mu + T| <= crit (empty when the equivalence region reaches the ranking one)
  undecided = np.where(
    low < crit, (cdf(crit - mu, df) - cdf(low - mu, df)) + (cdf(-low - mu, df) - cdf(-crit - mu, df)), 0.0
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


def page_sd(variants: list[dict]) -> dict:
  """The seed sd of a whole page: every variant's seed variance pooled (those with 2 seeds or more), its
  degrees of freedom (the sum of K_v - 1) and its one-sided 95 % upper bound (chi-square). A contrast's own two
  variants give few degrees of freedom (2 at 2 seeds each: an upper bound 4.4 times the estimate); the page's
  are what the plans are made at. None without any variant of 2 seeds."""
  rows = [(v['sd'], v['seeds']) for v in variants if v['seeds'] >= 2 and v['sd'] is not None]
  df = sum(k - 1 for _, k in rows)
  if not df:
    return None
  sd = float(np.sqrt(sum(s**2 * (k - 1) for s, k in rows) / df))
  return {'sd': sd, 'df': df, 'upper': float(sd * np.sqrt(df / _stats().chi2.ppf(0.05, df)))}


def plan_contrast(pair: dict, spread: dict, level: float, delta: float) -> dict:
  """`plan` of a tested contrast (verdicts' pair) at the page's seed sd (`page_sd`)."""
  return plan_at(pair['difference'], spread['sd'], spread['upper'], pair['test_variance'] or 0.0, level, delta)


def plan(difference, sd_a, k_a, sd_b, k_b, test_variance, level, delta) -> dict:
  """`plan_at` the pair's own pooled seed sd and its upper bound (K_a + K_b - 2 df)."""
  return plan_at(difference, *pooled_sd(sd_a, k_a, sd_b, k_b), test_variance, level, delta)


def plan_at(difference, sd, upper, test_variance, level, delta) -> dict:
  """Seeds per variant to decide a contrast: at its observed difference and at the hardest one (delta / 2,
  where ranking and equivalence both need the interval narrower than delta), each at the seed sd `sd` and at
  its upper bound `upper` ('…_upper'). None: out of reach of MAX_SEEDS."""
  out = {'level': level, 'delta': delta, 'sd': sd, 'sd_upper': upper}
  for key, d in (('observed', difference), ('hardest', delta / 2)):
    out[key] = seeds_to_decide(d, sd, test_variance, level, delta)
    out[key + '_upper'] = seeds_to_decide(d, upper, test_variance, level, delta)
  return out
