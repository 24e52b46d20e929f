"""The faithfulness pages' verdicts (attnmt/faithfulness/contrasts.py) with the test sentences' variance in: the
delete-one jackknife of a per-sentence ratio by hand, and a contrast's p and interval recomputed with NumPy and
SciPy from the paired t over seeds plus the jackknife's test-set term (attnmt.compare's rule for BLEU)."""

import numpy as np
import pytest
import scipy.stats

from attnmt.errors import InputError
from attnmt.faithfulness import contrasts

PATH = 'tests/moradi/shares/uniform/tokens'


def _result(variant, sums, counts):
  sums, counts = np.asarray(sums, float), np.asarray(counts, float)
  shares = (sums.sum(1) / counts.sum(1)).tolist()
  per = {'shares/uniform/tokens': {'sum': sums.tolist(), 'count': counts.astype(int).tolist()}}
  return {
    'variant': variant,
    'seeds': [0, 1, 2],
    'sentences': sums.shape[1],
    'attends': True,
    'tests': {'moradi': {'shares': {'uniform': {'tokens': shares}}, 'per_sentence': per}},
  }


COUNTS = [[10, 10, 10, 10, 10], [10, 10, 10, 10, 9], [10, 10, 10, 10, 10]]
# A keeps more than B on sentences 0 and 2 at every seed: the difference depends on which sentences are tested
A = _result('dot/luong/global', [[9, 5, 8, 5, 5], [9, 6, 8, 5, 4], [10, 5, 8, 5, 5]], COUNTS)
B = _result('additive/bahdanau/global', [[5, 5, 5, 5, 5], [5, 5, 6, 5, 4], [5, 6, 5, 5, 4]], COUNTS)


def test_jackknife_rows_of_a_ratio_by_hand():
  one = _result('x', [[1, 2, 3]] * 3, [[2, 2, 4]] * 3)
  np.testing.assert_allclose(contrasts.jackknife_rows(one, PATH)[0], [5 / 6, 4 / 6, 3 / 4])
  assert contrasts.jackknife_rows(one, 'tests/moradi/shares/zero_max/tokens') is None  # not kept per sentence
  assert contrasts.jackknife_rows(one, 'interventions/uniform/jsd') is None
  alone = _result('x', [[1, 0]] * 3, [[3, 0]] * 3)  # leaving out the one sentence with steps leaves nothing
  assert contrasts.jackknife_rows(alone, PATH) is None
  bad = _result('x', [[1, 2]] * 2, [[2, 2]] * 2)  # two rows for three seeds
  with pytest.raises(InputError, match='not one row of sentences per seed'):
    contrasts.jackknife_rows(bad, PATH)


def _jack(r):
  s, c = (
    np.asarray(r['tests']['moradi']['per_sentence']['shares/uniform/tokens']['sum'], float),
    np.asarray(r['tests']['moradi']['per_sentence']['shares/uniform/tokens']['count'], float),
  )
  return 100 * (s.sum(1, keepdims=True) - s) / (c.sum(1, keepdims=True) - c)  # shares shown in %


def test_a_per_sentence_measure_carries_the_test_sentences_variance_into_the_verdict():
  got = contrasts.contrasts([A, B], (PATH,), 'additive')
  row = got['rows'][0]
  assert row['sentences'] and got['over_sentences'] == [PATH] and 'jackknife' in got['method']
  assert row['label'] == 'Moradi: uniform keeps the token %'
  a = 100 * np.array(A['tests']['moradi']['shares']['uniform']['tokens'])
  b = 100 * np.array(B['tests']['moradi']['shares']['uniform']['tokens'])
  d_k = a - b
  jd = _jack(A) - _jack(B)  # K x N leave-one-out differences
  n, k = jd.shape[1], jd.shape[0]

  def jv(x):  # the jackknife variance, averaged over rows
    x = np.atleast_2d(x)
    return float(((n - 1) / n * np.square(x - x.mean(1, keepdims=True)).sum(1)).mean())

  test_set = max(0.0, jv(jd.mean(0)) - jv(jd - jd.mean(0)) / (k - 1))
  assert test_set > 0
  se, df = np.sqrt(d_k.var(ddof=1) / k + test_set), min(k - 1, n - 1)
  assert row['difference'] == pytest.approx(d_k.mean())
  assert row['p_value'] == pytest.approx(2 * scipy.stats.t.sf(abs(d_k.mean()) / se, df), rel=1e-9)
  half = scipy.stats.t.ppf(1 - 0.05 / 2, df) * se
  np.testing.assert_allclose(row['interval'], [d_k.mean() - half, d_k.mean() + half], rtol=1e-9)
  fixed = scipy.stats.ttest_rel(a, b).pvalue  # the seeds alone: the sentences add variance, never remove it
  assert row['p_value'] > fixed


def test_without_per_sentence_sums_the_test_set_is_held_fixed_and_said():
  plain = [{**r, 'tests': {'moradi': {'shares': r['tests']['moradi']['shares']}}} for r in (A, B)]
  got = contrasts.contrasts(plain, (PATH,), 'additive')
  a = np.array(A['tests']['moradi']['shares']['uniform']['tokens'])
  b = np.array(B['tests']['moradi']['shares']['uniform']['tokens'])
  assert not got['rows'][0]['sentences'] and got['over_sentences'] == [] and 'held fixed' in got['method']
  assert got['rows'][0]['p_value'] == pytest.approx(scipy.stats.ttest_rel(a, b).pvalue, rel=1e-9)
  assert 'held fixed' in contrasts.verdicts_markdown(got)
  assert 'jackknife' in contrasts.verdicts_markdown(contrasts.contrasts([A, B], (PATH,), 'additive'))
