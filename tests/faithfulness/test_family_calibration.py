"""The faithfulness pages' family is calibrated (attnmt/faithfulness/calibration.py): nine identical cells whose
seed sds are 1 to 15 apart, same-numbered seeds correlated, four ratio measures kept per sentence, analysed by
the pages' own `contrasts.contrasts` (paired t over seeds plus the jackknife over sentences, Bonferroni over the
32 contrasts), rank some pair in at most 5 % of experiments (within Monte Carlo error); and a true difference
on one cell is found there and nowhere else. docs/results/calibration.md holds the same check at more
experiments (experiments/calibrate.py --parts=faithfulness)."""

import numpy as np

from attnmt.compare import family
from attnmt.faithfulness import calibration, contrasts

EXPERIMENTS = 300
BOUND = family.ALPHA + 2 * np.sqrt(family.ALPHA * (1 - family.ALPHA) / EXPERIMENTS)  # 5 % plus two MC errors


def test_a_simulated_cell_is_kept_as_the_runner_keeps_a_ratio_measure():
  null = calibration.Null(seed_sds=(0.1, 1.5), measures=2, sentences=6)
  cells = null.results(np.random.default_rng(0), seeds=3)
  assert [c['variant'] for c in cells] == ['c0', 'c1'] and null.paths() == ['tests/m0/value', 'tests/m1/value']
  kept = cells[1]['tests']['m1']
  s, c = (np.asarray(kept['per_sentence']['value'][k], float) for k in ('sum', 'count'))
  assert s.shape == c.shape == (3, 6) and (c >= 1).all()
  np.testing.assert_allclose(kept['value'], s.sum(1) / c.sum(1))  # the seed's value: sum_i s_i / sum_i c_i
  np.testing.assert_allclose(
    contrasts.jackknife_rows(cells[1], 'tests/m1/value')[0][0], (s[0].sum() - s[0][0]) / (c[0].sum() - c[0][0])
  )


def test_identical_cells_are_ranked_in_at_most_five_percent_of_experiments():
  got = calibration.family_errors(calibration.Null(), seeds=3, experiments=EXPERIMENTS, seed=3)
  assert got['family_size'] == 32 and got['experiments'] == EXPERIMENTS
  assert got['share'] <= BOUND, got


def test_a_true_difference_is_ranked_on_its_cell_alone():
  null = calibration.Null()
  got = calibration.family_errors(null, seeds=3, experiments=60, shift=1.5, seed=4)
  assert got['power'] > 0.8, got  # the shifted cell's 4 contrasts ranked upwards
  assert got['ranked_share'] <= 4 / 32 + 0.01, got  # 4 of the 32 contrasts, barely any other
  assert got['share'] <= BOUND, got  # wrong: a ranking of another cell, or of the shifted one downwards
  rows = contrasts.contrasts(null.results(np.random.default_rng(1), 3), null.paths(), reference='c0', plan=False)
  assert all(r['sentences'] for r in rows['rows'])  # the test sentences' variance is in every contrast
