"""attnmt.analysis.significance: seed statistics by hand, Welch's t against scipy and a hand-worked
example, Holm and the seed plan against textbook values, the sentence bootstrap against a reference written
from strings with sacrebleu's corpus BLEU, and the verdicts of compare."""

import numpy as np
import pytest
import sacrebleu
import scipy.stats

from attnmt.analysis import comparison as C
from attnmt.analysis import significance as S
import references

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


def test_welch_matches_scipy_without_a_test_set_term():
  a, b = [22.06, 21.48, 21.01], [21.91, 21.14, 22.53, 21.67]
  got = S.welch_test(a, b)
  ref = scipy.stats.ttest_ind(a, b, equal_var=False)
  assert got['p_value'] == pytest.approx(ref.pvalue, rel=1e-12)
  assert got['difference'] == pytest.approx(np.mean(a) - np.mean(b))
  lo, hi = got['interval']
  assert lo < got['difference'] < hi
  # the interval and the test are one rule: at the p-value's own level the interval touches 0
  edge = S.welch_test(a, b, alpha=got['p_value'])['interval']
  assert min(abs(edge[0]), abs(edge[1])) == pytest.approx(0, abs=1e-9)


def test_welch_with_a_test_set_term_by_hand():
  a, b = [20.0, 22.0], [18.0, 19.0, 20.0]  # var/K: 2/2 = 1 and 1/3
  got = S.welch_test(a, b, test_variance=0.5)
  se2 = 1 + 1 / 3 + 0.5
  df = se2**2 / (1**2 / 1 + (1 / 3) ** 2 / 2)  # Welch-Satterthwaite over the seed terms
  assert got['se'] == pytest.approx(np.sqrt(se2)) and got['df'] == pytest.approx(df)
  assert got['p_value'] == pytest.approx(2 * scipy.stats.t.sf(2.0 / np.sqrt(se2), df))
  with pytest.raises(ValueError, match='at least 2 seeds'):
    S.welch_test([20.0], [18.0, 19.0])


def test_holm_by_hand():
  # sorted 0.01, 0.02, 0.03, 0.04 times 4, 3, 2, 1 -> 0.04, 0.06, 0.06 (monotone), 0.06 (monotone)
  assert S.holm([0.03, 0.01, 0.04, 0.02]) == pytest.approx([0.06, 0.04, 0.06, 0.06])
  assert S.holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])  # capped at 1
  assert S.holm([0.2]) == [0.2] and S.holm([]) == []


def test_seeds_needed_matches_the_textbook_sample_size():
  # two-sample t, d = 1, two-sided alpha 0.05, power 0.8: 17 per group (Cohen 1988, Table 2.4.1)
  assert S.seeds_needed(1.0, 1.0) == 17
  assert S.seeds_needed(0.5, 0.5) == 17  # only the ratio matters
  assert S.seeds_needed(2.0, 1.0) == 6  # d = 2
  assert S.seeds_needed(1.0, 1.0, alpha=0.05 / 3) > 17  # a family's level needs more
  assert S.seeds_needed(0.1, 1.0, test_variance=0.04) is None  # the test set alone hides 0.1 BLEU
  assert S.seeds_needed(0.0, 1.0) is None


def test_test_set_variance_removes_each_seeds_own_noise():
  rng = np.random.default_rng(0)
  shared_R = rng.normal(0, 0.3, (20000, 1))  # what every seed of both variants sees in a sentence draw
  systematic_R = rng.normal(0, 0.2, (20000, 1))  # a difference between the variants, by sentence draw
  a = shared_R + systematic_R + rng.normal(0, 0.5, (20000, 3))  # each seed's own noise, sd 0.5
  b = shared_R + rng.normal(0, 0.5, (20000, 4))
  assert S.own_noise(a) == pytest.approx(0.25 / 3, rel=0.05)
  assert S.test_set_variance(a, b) == pytest.approx(0.04, abs=0.006)
  assert S.test_set_variance(a) == pytest.approx(0.3**2 + 0.2**2, rel=0.05)
  assert S.test_set_variance(b[:, :2], b[:, 2:]) == pytest.approx(0, abs=0.004)  # A/A: nothing to add
  assert S.own_noise(a[:, :1]) == 0.0


def test_verdicts():
  assert C.verdict('a', 'b', 2.0, 0.01, 3, 3) == 'a > b'
  assert C.verdict('a', 'b', -2.0, 0.01, 3, 3) == 'b > a'
  assert C.verdict('a', 'b', 2.0, 0.2, 3, 3) == 'a ≈ b: not distinguishable with 3 seeds'
  assert C.verdict('a', 'b', 2.0, 0.2, 3, 2) == 'a ≈ b: not distinguishable with 3 and 2 seeds'
  assert 'not ranked with 1 seed' in C.verdict('a', 'b', 15.0, 0.001, 1, 1)
  assert 'not ranked with 1 seed' in C.verdict('a', 'b', 15.0, 0.001, 3, 1)


def test_one_seed_each_ranks_nothing_and_tests_the_sentences_two_sided():
  refs, noisy = _corpus(60)
  a, b = noisy(0.3, 1), noisy(0.45, 2)
  out = C.compare(['a', 'b'], [[a], [b]], refs, baseline='b', n_samples=400, seed=7)
  (pair,) = out['pairs']
  bleu_a, bleu_b = (sacrebleu.corpus_bleu(h, [refs]).score for h in (a, b))
  assert pair['difference'] == pytest.approx(bleu_a - bleu_b)
  assert not out['ranked'] and not pair['ranked'] and 'not ranked' in pair['verdict']
  assert pair['seeds_needed'] is None
  reps = S.sentence_replicates([S.sentence_statistics(h, refs)[None] for h in (a, b)], 400, 7)
  se = np.std(reps[0][:, 0] - reps[1][:, 0], ddof=1)
  assert pair['p_value'] == pytest.approx(2 * scipy.stats.norm.sf(abs(pair['difference']) / se))
  (va, _) = out['variants']
  assert va['ci'] is None and va['interval'][0] < va['mean'] < va['interval'][1]  # the sentences alone


def test_sentence_replicates_match_a_reference_from_strings():
  refs, noisy = _corpus(25)
  per_seed = [[noisy(0.3, s) for s in (1, 2, 3)], [noisy(0.4, s) for s in (4, 5)]]
  stats = [np.stack([S.sentence_statistics(h, refs) for h in seeds]) for seeds in per_seed]
  got = S.sentence_replicates(stats, n_samples=30, seed=3)
  idx = np.random.default_rng(3).choice(len(refs), size=(30, len(refs)), replace=True)
  for v, seeds in enumerate(per_seed):
    want = [[sacrebleu.corpus_bleu([h[i] for i in row], [[refs[i] for i in row]]).score for h in seeds] for row in idx]
    np.testing.assert_allclose(got[v], want, rtol=0, atol=1e-9)


def test_seed_variance_widens_the_test():
  """Seeds that disagree make a difference that the sentences alone call significant indistinguishable."""
  refs, noisy = _corpus(80)
  a = [noisy(0.15, 1), noisy(0.5, 2), noisy(0.2, 3)]  # one bad seed
  b = [noisy(0.3, 4), noisy(0.32, 5), noisy(0.28, 6)]
  sentence_only = references.paired_bootstrap({'b': b[0], 'a': a[0]}, refs, 'b', 500, 11)['systems']['a']
  both = C.compare(['a', 'b'], [a, b], refs, baseline='b', n_samples=500, seed=11)['pairs'][0]
  assert sentence_only['p_value'] < 0.05
  assert both['p_value'] > 0.05 and both['verdict'] == 'a ≈ b: not distinguishable with 3 seeds'
  assert both['interval'][0] < 0 < both['interval'][1]
  plan = both['seeds_needed']
  assert plan['level'] == 0.05 and set(plan) == {'level', 'sd', 'observed', '0.5', '1'}  # a family of one pair
  assert plan['observed'] == S.seeds_needed(both['difference'], plan['sd'], both['test_variance'], 0.05)


def test_clear_difference_is_ranked():
  refs, noisy = _corpus(80)
  a = [noisy(0.1, s) for s in (1, 2, 3)]
  b = [noisy(0.6, s) for s in (4, 5, 6)]
  out = C.compare(['b', 'a'], [b, a], refs, baseline='b', n_samples=300)
  assert out['ranked'] and out['best'] == 'a'
  (pair,) = out['pairs']  # a against b is both the baseline and the best pair: listed once
  assert (pair['a'], pair['b'], pair['verdict']) == ('a', 'b', 'a > b') and pair['difference'] > 0
  assert pair['p_adjusted'] == pair['p_value'] < 0.05 and pair['seeds_needed'] is None
  for v in out['variants']:
    assert v['ci'][0] < v['mean'] < v['ci'][1]
    t_only = S.seed_summary(v['per_seed'])['ci']  # the test set's term only widens it
    assert v['ci'][0] <= t_only[0] and t_only[1] <= v['ci'][1]


def test_pairs_against_baseline_and_best():
  refs, noisy = _corpus(30)
  hyps = {
    'none': [noisy(0.7, 1), noisy(0.7, 2)],
    'x': [noisy(0.3, 3), noisy(0.3, 4)],
    'y': [noisy(0.1, 5), noisy(0.1, 6)],
  }
  out = C.compare(list(hyps), list(hyps.values()), refs, baseline='none', n_samples=50)
  got = [(p['a'], p['b'], p['against'], p['family']) for p in out['pairs']]
  # none against the best (y) is y against none, listed once as the baseline pair
  assert got == [
    ('x', 'none', 'baseline', 'primary'),
    ('y', 'none', 'baseline', 'primary'),
    ('x', 'y', 'best', 'primary'),
  ]
  assert out['best'] == 'y' and out['families'] == {'primary': 3, 'other': 0}
  adjusted = S.holm([p['p_value'] for p in out['pairs']])
  assert [p['p_adjusted'] for p in out['pairs']] == pytest.approx(adjusted)


def test_bad_input():
  with pytest.raises(ValueError, match='hypotheses for'):
    S.sentence_statistics(['a'], ['a', 'b'])
  with pytest.raises(ValueError, match='no seeds'):
    S.seed_summary([])
  with pytest.raises(ValueError, match='same, non-empty'):
    S.sentence_replicates([np.zeros((1, 3, 10)), np.zeros((1, 4, 10))])


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
  out = C.compare(names, hyps, refs, baseline='none', n_samples=50)
  pairs = [frozenset((p['a'], p['b'])) for p in out['pairs']]
  assert len(pairs) == len(set(pairs)) == 6
  assert [p['against'] for p in out['pairs']] == ['baseline'] * 3 + ['best'] * 2 + ['other']
  assert (out['pairs'][-1]['a'], out['pairs'][-1]['b']) == ('x', 'w')  # the higher mean first
