"""Almost stochastic order (attnmt.compare.stochastic_order) against hand-worked grids, a loop-by-loop reference
of its bootstrap, deep-significance's documented example, and where the pages show it."""

import numpy as np
import pytest
from scipy import stats

from attnmt.analysis import pair_table
from attnmt.compare import seed_design, stochastic_order as S, verdicts


def _ratio_loop(a, b, step=S.STEP):
  """The violation ratio point by point, as its definition reads: quantile t of n sorted scores is the
  ceil(n t)-th."""
  a, b = sorted(a), sorted(b)
  total = violated = 0.0
  for t in np.arange(step, 1, step):
    f = a[min(len(a) - 1, max(0, int(np.ceil(len(a) * t)) - 1))]
    g = b[min(len(b) - 1, max(0, int(np.ceil(len(b) * t)) - 1))]
    total += (g - f) ** 2
    violated += (g - f) ** 2 if f < g else 0.0
  return violated / total if total else 0.5


def test_violation_ratio_by_hand():
  # Sorted A = 1, 2, 4, 8 and B = 0, 3, 3, 5: G - F = -1, +1, -1, -3 on the quarters; A is below B on the
  # second quarter only. The grid t = 0.005 ... 0.995 puts 50, 50, 50 and 49 points in the quarters.
  a, b = [8.0, 1.0, 4.0, 2.0], [3.0, 0.0, 5.0, 3.0]
  assert S.violation_ratio(np.array(a), np.array(b)) == pytest.approx(50 / (50 + 50 + 50 + 49 * 9))
  assert _ratio_loop(a, b) == pytest.approx(50 / 591)
  assert abs(50 / 591 - 1 / 12) < 0.002  # the integral over (0, 1): 1 of 12
  assert S.violation_ratio(np.array(b), np.array(a)) == pytest.approx(541 / 591)


def test_violation_ratio_symmetry_ends_and_batches():
  rng = np.random.default_rng(0)
  a, b = rng.normal(size=(7, 5)), rng.normal(size=(7, 6))  # seven pairs, unequal sizes
  ab, ba = S.violation_ratio(a, b), S.violation_ratio(b, a)
  np.testing.assert_allclose(ab + ba, 1.0)  # the whole grid in the numerator: eps(A, B) + eps(B, A) = 1
  np.testing.assert_allclose(ab, [_ratio_loop(x, y) for x, y in zip(a, b)])
  assert S.violation_ratio(np.array([3.0, 4.0]), np.array([1.0, 2.0])) == 0.0  # A above B everywhere
  assert S.violation_ratio(np.array([1.0, 2.0]), np.array([3.0, 4.0])) == 1.0
  assert S.violation_ratio(np.array([1.0, 2.0]), np.array([2.0, 1.0])) == 0.5  # equal distributions


def test_aso_is_the_ratio_plus_its_bootstrap_bound():
  a, b = [21.0, 20.2, 20.9, 19.8, 20.6, 21.3], [20.1, 20.4, 19.7, 20.0, 20.8]
  got = S.aso(a, b, level=0.01, bootstrap=200, seed=3)
  rng = np.random.default_rng(3)  # the draws in aso's order: A's resamples, then B's
  ia, ib = rng.integers(0, 6, (200, 6)), rng.integers(0, 5, (200, 5))
  resampled = [_ratio_loop(np.array(a)[x], np.array(b)[y]) for x, y in zip(ia, ib)]
  eps = _ratio_loop(a, b)
  assert got['eps'] == pytest.approx(eps)
  assert got['eps_min'] == pytest.approx(min(1.0, max(0.0, eps + stats.norm.ppf(0.99) * np.std(resampled))))
  assert got['seeds'] == [6, 5] and got['level'] == 0.01 and got['better'] == (got['eps_min'] < S.THRESHOLD)
  assert S.aso(a, b, level=0.001, bootstrap=200, seed=3)['eps_min'] > got['eps_min']  # a stricter level: higher
  assert S.aso([3.0, 4.0, 5.0], [0.0, 1.0, 2.0])['eps_min'] == 0.0  # disjoint: every resample 0


def test_deep_significance_readme_example():
  # deep-significance's README, scenario 1: np.random.seed(1234), A ~ N(0.9, 0.8) and B ~ N(0, 1), 5 each;
  # `aso(A, B, seed=1234)` documents min_eps = 0.225. The bootstraps draw differently; their sd agrees to MC error.
  legacy = np.random.RandomState(1234)
  a, b = legacy.normal(0.9, 0.8, 5), legacy.normal(0.0, 1.0, 5)
  assert S.violation_ratio(a, b) == 0.0  # A's quantiles above B's at every t
  assert S.aso(a, b, level=0.05, seed=0)['eps_min'] == pytest.approx(0.225, abs=0.015)


def test_bad_input_and_too_few_seeds():
  with pytest.raises(ValueError, match='non-empty'):
    S.aso([], [1.0, 2.0])
  with pytest.raises(ValueError, match='not a finite number'):
    S.aso([1.0, float('nan')], [1.0, 3.0])
  with pytest.raises(ValueError, match='level'):
    S.aso([1.0, 2.0], [1.0, 3.0], level=1.5)
  assert S.aso_or_none([1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 4.0, 5.0], 0.05) is None  # 4 < MIN_SEEDS
  assert S.aso_or_none([1.0] * 5, [2.0] * 5, 0.05)['eps'] == 1.0


def test_the_pair_table_shows_aso_at_the_contrasts_level():
  rng = np.random.default_rng(1)
  observed = [list(20 + rng.normal(0, 0.5, 6)), list(18 + rng.normal(0, 0.5, 6)), list(20 + rng.normal(0, 0.5, 3))]
  out = verdicts.compare_scores(['a', 'b', 'c'], observed, seeds=[list(range(6))] * 2 + [list(range(3))])
  by = {(p['a'], p['b']): p for p in out['pairs']}
  ab = by[('a', 'b')]
  assert ab['aso'] == S.aso(observed[0], observed[1], ab['level'])  # level alpha / 3, the higher mean first
  assert all(p['aso'] is None for p in out['pairs'] if 'c' in (p['a'], p['b']))  # c has 3 seeds
  cells = pair_table.contrast_cells(ab)
  assert pair_table.PAIR_HEADERS[-1] == 'ASO ε_min' and cells[-1] == f"{ab['aso']['eps_min']:.2f}"
  assert pair_table.contrast_cells(by[('a', 'c')] if ('a', 'c') in by else by[('c', 'a')])[-1] == '–'
  quiet = verdicts.compare_scores(['a', 'b'], observed[:2], seeds=[list(range(6))] * 2, plan=False)
  assert quiet['pairs'][0]['aso'] is None  # simulations leave it out


def test_aso_errors_counts_rankings_against_the_truth():
  apart = seed_design.Scenario(means=(5.0, 0.0), seed_sds=(0.3, 0.3))
  got = seed_design.aso_errors(apart, 5, 20, seed=1)
  assert got['aso']['wrong'] == got['t']['wrong'] == 0  # far apart: every ranking is right
  assert got['aso']['ranked_share'] == got['t']['ranked_share'] == 1.0
  same = seed_design.aso_errors(seed_design.Scenario(), 5, 60, seed=2)  # two identical variants
  for test in ('aso', 't'):  # one contrast: every experiment with a ranking is wrong
    assert same[test]['wrong'] == round(same[test]['ranked_share'] * 60)
