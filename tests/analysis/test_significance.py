"""attnmt.analysis.significance: seed statistics by hand, the two-stage bootstrap against a reference
written from strings with sacrebleu's corpus BLEU, and sacrebleu's own paired test for one seed."""

import numpy as np
import pytest
import sacrebleu

from attnmt.analysis import significance as S
from attnmt.training import measures

WORDS = 'the a cat dog sat on mat in house big small red'.split()


def _corpus(n=40, seed=0):
  rng = np.random.default_rng(seed)
  refs = [' '.join(rng.choice(WORDS, 7)) for _ in range(n)]

  def noisy(p, s):
    r = np.random.default_rng(s)
    return [' '.join(w if r.random() > p else str(r.choice(WORDS)) for w in x.split()) for x in refs]

  return refs, noisy


def test_seed_summary_by_hand():
  out = S.seed_summary([20.0, 22.0, 24.0])
  assert out['mean'] == 22.0 and out['sd'] == pytest.approx(2.0) and out['per_seed'] == [20.0, 22.0, 24.0]
  half = 4.302652729911275 * 2.0 / np.sqrt(3)  # t(0.975, 2 d.o.f.) from tables
  assert out['ci'] == pytest.approx([22.0 - half, 22.0 + half])


def test_one_seed_has_no_spread():
  out = S.seed_summary([21.81])
  assert out['sd'] is None and out['ci'] is None and out['seeds'] == 1


def test_p_value_by_hand():
  # |d| = 1, 2, 3, 2 -> mean 2 -> centred -1, 0, 1, 0; observed 0.5: one centred value above it
  assert S.p_value(0.5, np.array([1.0, -2.0, 3.0, 2.0])) == pytest.approx((1 + 1) / (4 + 1))
  assert S.p_value(-0.5, np.array([1.0, -2.0, 3.0, 2.0])) == pytest.approx(2 / 5)  # two-sided
  assert S.p_value(10.0, np.array([1.0, -2.0, 3.0, 2.0])) == pytest.approx(1 / 5)
  assert S.p_value(0.0, np.zeros(4)) == 1.0  # equal scores: sacrebleu's count would give 1/5


def test_verdicts():
  assert S.verdict('a', 'b', 2.0, 0.01, 3, 3) == 'a > b'
  assert S.verdict('a', 'b', -2.0, 0.01, 3, 3) == 'b > a'
  assert S.verdict('a', 'b', 2.0, 0.2, 3, 3) == 'a ≈ b: not distinguishable with 3 seeds'
  assert S.verdict('a', 'b', 2.0, 0.2, 3, 2) == 'a ≈ b: not distinguishable with 3 and 2 seeds'
  # p under 0.05 but an interval that holds 0 (the two rules disagree near the threshold): not ranked
  assert S.verdict('a', 'b', -0.95, 0.049, 3, 3, interval=[-2.10, 0.15]) == 'a ≈ b: not distinguishable with 3 seeds'
  assert S.verdict('a', 'b', -0.95, 0.049, 3, 3, interval=[-2.10, -0.05]) == 'b > a'
  assert 'not ranked with 1 seed' in S.verdict('a', 'b', 15.0, 0.001, 1, 1)
  assert 'not ranked with 1 seed' in S.verdict('a', 'b', 15.0, 0.001, 3, 1)


def test_one_seed_each_is_sacrebleus_paired_bootstrap():
  refs, noisy = _corpus(60)
  a, b = noisy(0.3, 1), noisy(0.45, 2)
  out = S.compare(['a', 'b'], [[a], [b]], refs, baseline='b', n_samples=200, seed=7)
  ref = measures.paired_bootstrap({'b': b, 'a': a}, refs, 'b', 200, 7)['systems']
  (pair,) = out['pairs']
  assert pair['p_value'] == ref['a']['p_value']
  assert pair['difference'] == pytest.approx(ref['a']['bleu'] - ref['b']['bleu'])
  assert not out['ranked'] and 'not ranked' in pair['verdict']


def _reference_replicates(per_seed, refs, n_samples, seed):
  """The two-stage bootstrap from strings: resample sentences as lists, corpus BLEU by sacrebleu."""
  rng = np.random.default_rng(seed)
  n = len(refs)
  idx = rng.choice(n, size=(n_samples, n), replace=True)
  out = np.zeros((n_samples, len(per_seed)))
  for v, seeds in enumerate(per_seed):
    bleu = np.array(
      [[sacrebleu.corpus_bleu([h[i] for i in row], [[refs[i] for i in row]]).score for h in seeds] for row in idx]
    )
    drawn = rng.integers(0, len(seeds), size=(n_samples, len(seeds)))
    for r in range(n_samples):
      out[r, v] = np.mean([bleu[r, j] for j in drawn[r]])
  return out


def test_two_stage_bootstrap_matches_a_reference_from_strings():
  refs, noisy = _corpus(25)
  per_seed = [[noisy(0.3, s) for s in (1, 2, 3)], [noisy(0.4, s) for s in (4, 5)]]
  stats = [np.stack([S.sentence_statistics(h, refs) for h in seeds]) for seeds in per_seed]
  got = S.bootstrap_replicates(stats, n_samples=30, seed=3)
  np.testing.assert_allclose(got, _reference_replicates(per_seed, refs, 30, 3), rtol=0, atol=1e-9)


def test_seed_variance_widens_the_test():
  """Seeds that disagree make a difference that the sentences alone call significant indistinguishable."""
  refs, noisy = _corpus(80)
  a = [noisy(0.15, 1), noisy(0.5, 2), noisy(0.2, 3)]  # one bad seed
  b = [noisy(0.3, 4), noisy(0.32, 5), noisy(0.28, 6)]
  sentence_only = measures.paired_bootstrap({'b': b[0], 'a': a[0]}, refs, 'b', 500, 11)['systems']['a']
  both = S.compare(['a', 'b'], [a, b], refs, baseline='b', n_samples=500, seed=11)['pairs'][0]
  assert sentence_only['p_value'] < 0.05
  assert both['p_value'] > 0.05 and both['verdict'] == 'a ≈ b: not distinguishable with 3 seeds'
  assert both['interval'][0] < 0 < both['interval'][1]


def test_clear_difference_is_ranked():
  refs, noisy = _corpus(80)
  a = [noisy(0.1, s) for s in (1, 2, 3)]
  b = [noisy(0.6, s) for s in (4, 5, 6)]
  out = S.compare(['b', 'a'], [b, a], refs, baseline='b', n_samples=300)
  assert out['ranked'] and out['best'] == 'a'
  (pair,) = out['pairs']  # a against b is both the baseline and the best pair: listed once
  assert (pair['a'], pair['b'], pair['verdict']) == ('a', 'b', 'a > b') and pair['difference'] > 0
  for v in out['variants']:
    assert v['interval'][0] <= v['mean'] <= v['interval'][1]
    assert v['ci'][0] < v['mean'] < v['ci'][1]


def test_pairs_against_baseline_and_best():
  refs, noisy = _corpus(30)
  hyps = {
    'none': [noisy(0.7, 1), noisy(0.7, 2)],
    'x': [noisy(0.3, 3), noisy(0.3, 4)],
    'y': [noisy(0.1, 5), noisy(0.1, 6)],
  }
  out = S.compare(list(hyps), list(hyps.values()), refs, baseline='none', n_samples=50)
  got = [(p['a'], p['b'], p['against']) for p in out['pairs']]
  # none against the best (y) is y against none, listed once as the baseline pair
  assert got == [('x', 'none', 'baseline'), ('y', 'none', 'baseline'), ('x', 'y', 'best')]  # every pair once
  assert out['best'] == 'y'


def test_bad_input():
  with pytest.raises(ValueError, match='hypotheses for'):
    S.sentence_statistics(['a'], ['a', 'b'])
  with pytest.raises(ValueError, match='no seeds'):
    S.seed_summary([])
  with pytest.raises(ValueError, match='same, non-empty'):
    S.bootstrap_replicates([np.zeros((1, 3, 10)), np.zeros((1, 4, 10))])


def test_mean_sd_never_hides_a_spread():
  from attnmt.analysis import tables

  assert tables.mean_sd([21.81]) == '21.81'
  assert tables.mean_sd([20.0, 22.0, 24.0]) == '22.00 ± 2.00'
  assert tables.mean_sd([0.811, 0.813]) == '0.81 ± 0.001'
  assert tables.mean_sd([5.0, 5.0]) == '5.00 ± 0.00'  # seeds that agree exactly


def test_every_pair_is_compared_once():
  refs, noisy = _corpus(30)
  names = ['none', 'w', 'x', 'y']
  hyps = [[noisy(p, s), noisy(p, s + 10)] for s, p in enumerate((0.7, 0.5, 0.3, 0.1))]
  out = S.compare(names, hyps, refs, baseline='none', n_samples=50)
  pairs = [frozenset((p['a'], p['b'])) for p in out['pairs']]
  assert len(pairs) == len(set(pairs)) == 6
  assert [p['against'] for p in out['pairs']] == ['baseline'] * 3 + ['best'] * 2 + ['other']
  assert (out['pairs'][-1]['a'], out['pairs'][-1]['b']) == ('x', 'w')  # the higher mean first
