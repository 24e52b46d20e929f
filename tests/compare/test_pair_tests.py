"""attnmt.compare.pair_tests, family, planning and verdicts: seed statistics by hand, the paired t against
scipy's ttest_rel, the unpaired t with min(K) - 1 df by hand and never easier than scipy's Welch, pairing by
seed number, the jackknife against a reference written from strings with sacrebleu's
corpus BLEU, the degrees-of-freedom rule that keeps the test set's term from making a test easier, TOST by
hand, the family's contrasts and simultaneous intervals, alpha spending against published values, the seed
plan against the textbook sample size, and the verdicts of compare."""

import numpy as np
import pytest
import sacrebleu
import scipy.stats

from attnmt.compare import verdicts as C
from attnmt.compare import family as F
from attnmt.compare import planning as P
from attnmt.compare import pair_tests as S
from attnmt.errors import ConfigError

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
  assert S.seed_summary([21.81])['ci'] is None and S.seed_summary([21.81])['sd'] is None


def test_paired_matches_scipy_without_a_test_set_term():
  a, b = [22.06, 21.48, 21.01, 21.7], [21.91, 21.14, 20.53, 21.67]
  got = S.paired_test(a, b)
  ref = scipy.stats.ttest_rel(a, b)
  assert got['p_value'] == pytest.approx(ref.pvalue, rel=1e-12) and got['df'] == 3 and got['design'] == 'paired'
  assert got['difference'] == pytest.approx(np.mean(a) - np.mean(b))
  # the interval and the test are one rule: at the p-value's own level the interval touches 0
  edge = S.paired_test(a, b, level=got['p_value'])['interval']
  assert min(abs(edge[0]), abs(edge[1])) == pytest.approx(0, abs=1e-9)


def test_unpaired_takes_the_smaller_sides_degrees_of_freedom_by_hand():
  a, b = [20.0, 22.0], [18.0, 19.0, 20.0]  # var/K: 2/2 = 1 and 1/3; min(K) - 1 = 1 df (Welch's would be 1.6)
  got = S.unpaired_test(a, b, test_variance=0.5, sentences=400)
  se2 = 1 + 1 / 3 + 0.5
  assert got['se'] == pytest.approx(np.sqrt(se2)) and got['df'] == 1 and got['design'] == 'unpaired'
  assert got['p_value'] == pytest.approx(2 * scipy.stats.t.sf(2.0 / np.sqrt(se2), 1))
  # never more degrees of freedom, so never a smaller p, than Welch's (scipy) without the test-set term
  rng = np.random.default_rng(2)
  for _ in range(100):
    x, y = rng.normal(0, 1, rng.integers(2, 7)), rng.normal(0.5, rng.uniform(0.1, 4), rng.integers(2, 7))
    assert S.unpaired_test(x, y)['p_value'] >= scipy.stats.ttest_ind(x, y, equal_var=False).pvalue - 1e-12
  # a small test set caps the degrees of freedom at its sentences - 1
  assert S.unpaired_test([20.0, 22.0, 21.0] * 4, [18.0, 19.0, 20.0] * 4, 0.5, sentences=6)['df'] == 5
  with pytest.raises(ValueError, match='at least 2 seeds'):
    S.unpaired_test([20.0], [18.0, 19.0])


def test_pair_test_pairs_by_seed_number_and_only_then():
  a, b = [20.0, 21.0, 23.0], [19.0, 20.5, 22.0]
  # b listed in another seed order: the pairs follow the numbers, not the positions
  got = S.pair_test(a, b[::-1], level=0.05, seeds_a=[0, 1, 2], seeds_b=[2, 1, 0])
  assert got['design'] == 'paired' and got['p_value'] == pytest.approx(scipy.stats.ttest_rel(a, b).pvalue)
  for seeds_b in ([3, 4, 5], [0, 1, 5], None):  # other seeds, some other, unknown: unpaired
    got = S.pair_test(a, b, level=0.05, seeds_a=[0, 1, 2], seeds_b=seeds_b)
    assert got['design'] == 'unpaired' and got['df'] == 2
  assert not S.same_seeds([0, 0], [0, 0]) and not S.same_seeds([0], [0]) and S.same_seeds([1, 0], [0, 1])


def test_a_paired_test_set_term_is_that_of_the_differences():
  """Seeds that share their sentence noise: the paired term is the jackknife of the per-seed differences less
  their own noise (what the two sides of a seed share cancels), not the two sides' terms."""
  rng = np.random.default_rng(4)
  n = 3000
  shared = rng.normal(0, 1, (4, n))  # seed k's noise, the same for both variants
  a, b = shared + rng.normal(0, 0.2, (4, n)), shared + rng.normal(0, 0.2, (4, n)) + rng.normal(0, 0.3, n)
  got = S.pair_test(a.mean(1), b.mean(1), a, b, 0.05, None, [0, 1, 2, 3], [0, 1, 2, 3])
  assert got['test_variance'] == pytest.approx(S.test_set_variance(a - b))
  assert got['test_variance'] != pytest.approx(S.test_set_variance(a, b))


def test_the_test_set_term_never_makes_a_test_easier():
  """p with the test set's term is never below the seeds' alone, whatever the term and the sentences."""
  rng = np.random.default_rng(5)
  for _ in range(200):
    k = rng.integers(2, 6)
    a, b = rng.normal(0, 1, k), rng.normal(rng.normal(0, 2), rng.uniform(0.1, 3), k)
    for test in (S.paired_test, S.unpaired_test):
      seed_only = test(a, b)
      for tv, n in ((0.01, 47), (1.0, 47), (5.0, 1000), (0.3, 5)):
        with_term = test(a, b, tv, n)
        assert with_term['p_value'] >= seed_only['p_value'] - 1e-12
        assert with_term['df'] <= seed_only['df'] + 1e-9


def test_equivalence_p_by_hand():
  # difference 0.1, se 0.2, df 10, margin 0.5: TOST p = max(P(T > 3), P(T < -2)) = P(T < -2)
  got = S.equivalence_p(0.1, 0.2, 10, 0.5)
  assert got == pytest.approx(scipy.stats.t.cdf(-2.0, 10))
  # the interval of coverage 1 - 2p just touches the margin
  hi = S.t_interval(0.1, 0.2, 10, 2 * got)[1]
  assert hi == pytest.approx(0.5)
  assert S.equivalence_p(0.0, 0.0, 10, 0.5) == 0.0 and S.equivalence_p(0.7, 0.0, 10, 0.5) == 1.0


def test_jackknife_matches_a_reference_from_strings():
  refs, noisy = _corpus(12)
  hyps = [noisy(0.3, 1), noisy(0.45, 2)]
  stats = np.stack([S.sentence_statistics(h, refs) for h in hyps])
  got = S.jackknife(stats)
  for k, h in enumerate(hyps):
    want = [
      sacrebleu.corpus_bleu([x for j, x in enumerate(h) if j != i], [[r for j, r in enumerate(refs) if j != i]]).score
      for i in range(len(refs))
    ]
    np.testing.assert_allclose(got[k], want, rtol=0, atol=1e-9)
  # a subset of sentences: the jackknife of those alone
  np.testing.assert_allclose(S.jackknife(stats, np.arange(5)), S.jackknife(stats[:, :5]))
  # the jackknife variance by its formula: deviations -4/3, -1/3, 5/3; (n - 1) / n * 42 / 9 = 28 / 9
  assert S.jackknife_variance(np.array([1.0, 2.0, 4.0])) == pytest.approx(28 / 9)
  with pytest.raises(ValueError, match='at least 2 sentences'):
    S.jackknife(stats[:, :1])


def test_test_set_variance_removes_each_seeds_own_noise():
  """Leave-one-out values built from known parts: values of variance v / (n - 1) have a jackknife variance
  of about v, so each part's share is known."""
  rng = np.random.default_rng(0)
  n = 20000
  part = lambda sd, rows: rng.normal(0, sd / np.sqrt(n - 1), (rows, n))  # noqa: E731
  shared, systematic = part(0.3, 1), part(0.2, 1)  # what every seed sees; a difference between the variants
  own = lambda k: part(0.5, k)  # noqa: E731  each seed's own noise, sd 0.5
  a = shared + systematic + own(3)
  b = shared + own(4)
  assert S.own_noise(a) == pytest.approx(0.25 / 3, rel=0.05)
  assert S.test_set_variance(b[:2], b[2:]) == pytest.approx(0, abs=0.004)  # A/A: nothing to add
  assert S.own_noise(a[:1]) == 0.0
  assert S.test_set_variance(a, b) == pytest.approx(0.04, abs=0.006)
  assert S.test_set_variance(a) == pytest.approx(0.3**2 + 0.2**2, rel=0.05)


def test_contrasts_are_declared_not_chosen():
  names = ['none', 'x', 'y', 'z']
  assert F.contrast_pairs(names) == [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
  assert F.contrast_pairs(names, 'none') == [(1, 0), (2, 0), (3, 0)]
  # against none and against x: x - none appears once
  assert F.contrast_pairs(names, 'none,x') == [(1, 0), (2, 0), (3, 0), (2, 1), (3, 1)]
  assert F.contrast_pairs(names, 'y~z, x~y') == [(2, 3), (1, 2)]
  # a name's first parts name the variant when they name one only (the README's --contrasts=none,additive)
  full = ['none/bahdanau/global', 'additive/bahdanau/global', 'additive/luong/global', 'dot/bahdanau/global']
  assert F.contrast_pairs(full, 'none') == [(1, 0), (2, 0), (3, 0)]
  assert F.contrast_pairs(full, 'dot~none') == [(3, 0)]
  with pytest.raises(ConfigError, match="'additive' names 2 variants"):
    F.contrast_pairs(full, 'none,additive')
  with pytest.raises(ConfigError, match="'all' is every pair already"):
    F.contrast_pairs(full, 'all,none')
  assert F.contrast_pairs(names, None) == F.contrast_pairs(names, 'all')  # None: the default family
  empty = ('', "contrasts '' names no contrast"), (' ', "contrasts ' ' names no contrast")  # an error, not 'all'
  for bad, match in (('w', "'w' is not a variant"), ('x~x', 'with itself'), (',', 'name no pair'), *empty):
    with pytest.raises(ConfigError, match=match):
      F.contrast_pairs(names, bad)


def test_alpha_spending_matches_lan_demets():
  # O'Brien-Fleming-type spending at t = 0.5: 2 - 2 Phi(1.96 / sqrt(0.5)) = 0.00557 (Lan & DeMets 1983)
  assert F.spent(0.5) == pytest.approx(2 - 2 * scipy.stats.norm.cdf(scipy.stats.norm.ppf(0.975) / np.sqrt(0.5)))
  assert F.spent(0.5) == pytest.approx(0.00557, abs=1e-5)
  assert F.spent(0.5, 'pocock') == pytest.approx(0.05 * np.log(1 + (np.e - 1) * 0.5))
  levels = F.look_levels([5, 10, 15, 20])
  assert sum(levels) == pytest.approx(0.05) and all(x > 0 for x in levels)
  assert levels == sorted(levels)  # O'Brien-Fleming spends little early
  assert F.look_levels([7]) == [0.05]
  with pytest.raises(ValueError, match='increasing'):
    F.look_levels([5, 5])


def test_decisions_read_off_the_interval():
  assert F.decision([0.1, 2.0], 0.5, [3, 3]) == F.GREATER
  assert F.decision([-2.0, -0.1], 0.5, [3, 3]) == F.GREATER
  assert F.decision([-0.4, 0.3], 0.5, [3, 3]) == F.EQUIVALENT
  assert F.decision([-0.6, 0.3], 0.5, [3, 3]) == F.UNDECIDED
  assert F.decision([-0.6, 0.3], 0.5, [3, 3], within=[-0.45, 0.2]) == F.EQUIVALENT  # TOST's 1 - 2 level interval
  assert F.decision([0.1, 0.6], 0.5, [3, 3], within=[0.2, 0.45]) == F.GREATER
  assert F.decision([0.1, 2.0], 0.5, [3, 1]) == F.UNRANKED
  assert F.verdict('a', 'b', -1.0, [-2.0, -0.1], 0.5, [3, 3]) == 'b > a'
  assert F.verdict('a', 'b', 0.2, [0.1, 0.3], 0.5, [3, 3]) == 'a > b (by less than 0.5)'
  assert F.verdict('a', 'b', 0.3, [0.1, 0.6], 0.5, [3, 3], within=[0.2, 0.45]) == 'a > b (by less than 0.5)'
  assert F.verdict('a', 'b', 0.0, [-0.4, 0.3], 0.5, [3, 3]) == 'a ≈ b (equivalent within ±0.5)'
  assert F.verdict('a', 'b', 0.0, [-0.6, 0.3], 0.5, [3, 2]) == 'a vs b: undecided with 3 and 2 seeds'
  assert 'not ranked with 1 seed' in F.verdict('a', 'b', 15.0, [1, 2], 0.5, [1, 1])


def test_simultaneous_intervals_agree_with_the_verdicts():
  names = ['none', 'x', 'y', 'z']
  observed = [[10.0, 10.4, 9.7], [20.0, 20.6, 19.8, 20.3], [20.4, 20.1, 20.9], [20.2, 20.25, 20.22]]
  seeds = [[0, 1, 2], [0, 1, 2, 3], [0, 1, 2], [0, 1, 2]]  # x has a fourth seed: its contrasts are unpaired
  out = C.compare_scores(names, observed, 'none', delta=1.0, seeds=seeds)
  assert out['family_size'] == 6 and out['level'] == 0.05 and out['designs'] == ['paired', 'unpaired']
  for p in out['pairs']:
    i, j = names.index(p['a']), names.index(p['b'])
    paired = seeds[i] == seeds[j]
    test = S.paired_test if paired else S.unpaired_test
    want = test(observed[i], observed[j], level=0.05 / 6, margin=1.0)
    assert p['design'] == ('paired' if paired else 'unpaired')
    assert p['interval'] == pytest.approx(want['interval']) and p['p_value'] == pytest.approx(want['p_value'])
    assert p['p_adjusted'] == pytest.approx(min(1.0, 6 * want['p_value']))
    excludes_zero = p['interval'][0] > 0 or p['interval'][1] < 0
    assert (p['decision'] == F.GREATER) == excludes_zero == (p['p_adjusted'] < 0.05)
    # equivalence: TOST at 0.05 / 6 per side, read off the 1 - 2 (0.05 / 6) interval
    assert p['equivalence_interval'] == pytest.approx(S.t_interval(p['difference'], p['se'], p['df'], 2 * 0.05 / 6))
    inside = -1.0 < p['equivalence_interval'][0] and p['equivalence_interval'][1] < 1.0
    assert (p['p_equivalent_adjusted'] < 0.05) == inside
    assert p['difference'] >= 0  # every pair: the higher mean first
  verdicts = {(p['a'], p['b']): p['verdict'] for p in out['pairs']}
  assert verdicts[('x', 'none')] == 'x > none'
  with pytest.raises(ValueError, match='one seed number per per-seed score'):
    C.compare_scores(names, observed, seeds=[[0, 1, 2]] * 4)


def test_a_look_spends_its_share_and_keeps_earlier_decisions():
  names = ['a', 'b']
  observed = [[20.0, 20.5, 19.8], [18.0, 18.2, 18.1]]
  out = C.compare_scores(names, observed, level=0.01)
  (p,) = out['pairs']
  assert p['level'] == 0.01 and p['interval'] == pytest.approx(S.unpaired_test(*observed, level=0.01)['interval'])
  assert p['p_adjusted'] == pytest.approx(min(1.0, p['p_value'] * 0.05 / 0.01))
  earlier = {**p, 'look': 1}
  again = C.compare_scores(names, [[1.0, 2.0], [1.5, 2.5]], level=0.04, decided={('a', 'b'): earlier})
  assert again['pairs'] == [earlier]


def test_seed_plan_matches_the_textbook_sample_size():
  # With delta large, deciding is ranking: two-sample t at d = 1, two-sided 0.05, power 0.8 needs 17 per group
  # (Cohen 1988, Table 2.4.1) with 2(K - 1) df; the plan's K - 1 df (Welch's lower bound) asks for 18.
  assert P.seeds_to_decide(1.0, 1.0, 0.0, 0.05, 1e-9) == 18
  assert P.seeds_to_decide(2.0, 1.0, 0.0, 0.05, 1e-9) == 7
  assert P.seeds_to_decide(1.0, 1.0, 0.0, 0.05 / 3, 1e-9) > 18  # a family's level needs more
  assert P.seeds_to_decide(0.1, 1.0, 0.04, 0.05, 1e-9) is None  # the test set alone hides 0.1 BLEU
  # a true difference of 0 is decided by equivalence: half-width below delta
  k = P.seeds_to_decide(0.0, 1.0, 0.0, 0.05, 1.0)
  assert 8 < k < 30 and P.seeds_to_decide(0.0, 1.0, 0.0, 0.05, 2.0) < k
  sd, upper = P.pooled_sd(0.4, 5, 0.6, 5)
  assert sd == pytest.approx(np.sqrt((0.16 + 0.36) / 2))
  assert upper == pytest.approx(sd * np.sqrt(8 / scipy.stats.chi2.ppf(0.05, 8)))


def test_one_seed_each_ranks_nothing_and_tests_the_sentences_two_sided():
  refs, noisy = _corpus(60)
  a, b = noisy(0.3, 1), noisy(0.45, 2)
  out = C.compare(['a', 'b'], [[a], [b]], refs, baseline='b')
  (pair,) = out['pairs']
  bleu_a, bleu_b = (sacrebleu.corpus_bleu(h, [refs]).score for h in (a, b))
  assert pair['difference'] == pytest.approx(bleu_a - bleu_b)
  assert not out['ranked'] and pair['decision'] == F.UNRANKED and 'not ranked' in pair['verdict']
  assert pair['seeds_to_decide'] is None
  jack = [S.jackknife(S.sentence_statistics(h, refs)[None])[0] for h in (a, b)]
  se = np.sqrt(S.jackknife_variance(jack[0] - jack[1]))
  assert pair['p_value'] == pytest.approx(2 * scipy.stats.norm.sf(abs(pair['difference']) / se))
  (va, _) = out['variants']
  assert va['ci'] is None and va['interval'][0] < va['mean'] < va['interval'][1]  # the sentences alone


def test_no_random_seed_in_a_verdict():
  refs, noisy = _corpus(50)
  hyps = [[noisy(0.3, s) for s in (1, 2, 3)], [noisy(0.33, s) for s in (4, 5, 6)]]
  first = C.compare(['a', 'b'], hyps, refs)
  np.random.seed(123)
  again = C.compare(['a', 'b'], hyps, refs)
  assert first == again


def test_seed_variance_widens_the_test():
  """Seeds that disagree leave undecided a difference that one seed each would seem to show."""
  refs, noisy = _corpus(80)
  a = [noisy(0.15, 1), noisy(0.5, 2), noisy(0.2, 3)]  # one bad seed
  b = [noisy(0.3, 4), noisy(0.32, 5), noisy(0.28, 6)]
  both = C.compare(['a', 'b'], [a, b], refs, delta=5.0)['pairs'][0]  # seed sd 17.6 BLEU: a wide margin
  assert both['decision'] == F.UNDECIDED and 'undecided with 3 seeds' in both['verdict']
  assert both['interval'][0] < 0 < both['interval'][1]
  plan = both['seeds_to_decide']
  assert plan['level'] == 0.05 and plan['observed'] > 100 and plan['observed_upper'] is None  # > 1000 at the bound
  sd_a = np.std([sacrebleu.corpus_bleu(h, [refs]).score for h in a], ddof=1)
  sd_b = np.std([sacrebleu.corpus_bleu(h, [refs]).score for h in b], ddof=1)
  assert plan['sd'] == pytest.approx(np.sqrt((sd_a**2 + sd_b**2) / 2))
  want = P.seeds_to_decide(both['difference'], plan['sd'], both['test_variance'], 0.05, 5.0)
  assert plan['observed'] == want


def test_clear_difference_is_ranked():
  refs, noisy = _corpus(80)
  a = [noisy(0.1, s) for s in (1, 2, 3)]
  b = [noisy(0.6, s) for s in (4, 5, 6)]
  out = C.compare(['b', 'a'], [b, a], refs, baseline='b')
  assert out['ranked']
  (pair,) = out['pairs']
  assert (pair['a'], pair['b'], pair['verdict']) == ('a', 'b', 'a > b') and pair['difference'] > 0
  assert pair['p_adjusted'] == pytest.approx(pair['p_value']) and pair['seeds_to_decide'] is None
  for v in out['variants']:
    t_only = S.seed_summary(v['per_seed'])['ci']  # the test set's term only widens it
    assert v['ci'][0] <= t_only[0] and t_only[1] <= v['ci'][1]


def test_bad_input():
  with pytest.raises(ValueError, match='hypotheses for'):
    S.sentence_statistics(['a'], ['a', 'b'])
  with pytest.raises(ValueError, match='no seeds'):
    S.seed_summary([])
  with pytest.raises(ValueError, match='at least one per-seed score'):
    C.compare_scores(['a'], [[]])
  with pytest.raises(ValueError, match='b: a per-seed score is not a finite number'):
    C.compare_scores(['a', 'b'], [[1.0, 2.0], [1.0, float('nan')]])
  # numbers that are not numbers never reach a verdict: one line naming the argument and what it takes
  for bad in (float('inf'), float('nan'), -1.0, '0.5', True):
    with pytest.raises(ConfigError, match=r'^delta must be a '):
      C.compare_scores(['a', 'b'], [[1.0, 2.0], [1.5, 2.5]], delta=bad)
  for bad in (0.0, 1.0, float('nan'), '0.05'):
    with pytest.raises(ConfigError, match=r'^alpha must be a number in \(0, 1\)'):
      C.compare_scores(['a', 'b'], [[1.0, 2.0], [1.5, 2.5]], alpha=bad)
  assert C.compare_scores(['a', 'b'], [[1.0, 2.0], [1.5, 2.5]], delta=0)['delta'] == 0  # no margin declared


def test_mean_sd_never_hides_a_spread():
  from attnmt.analysis import formatting

  assert formatting.mean_sd([21.81]) == '21.81'
  assert formatting.mean_sd([20.0, 22.0, 24.0]) == '22.00 ± 2.00'
  assert formatting.mean_sd([0.811, 0.813]) == '0.81 ± 0.001'
  assert formatting.mean_sd([5.0, 5.0]) == '5.00 ± 0.00'  # seeds that agree exactly


def test_sentence_bleus_are_sacrebleus_sentence_bleu():
  """One pass over the sentences gives sacrebleu.sentence_bleu of each: a perfect match, partial ones, no match,
  an empty output, punctuation split by the 13a tokenizer, a hypothesis longer than its reference."""
  hyps = [
    'the cat sat on the mat',
    'the cat sat',
    'dogs bark loudly',
    '',
    'a cat, on a mat.',
    'the the the the the cat',
  ]
  refs = [
    'the cat sat on the mat',
    'the cat sat on the mat',
    'the cat sat on the mat',
    'a b',
    'a cat on a mat .',
    'cat',
  ]
  expected = [sacrebleu.sentence_bleu(h, [r]).score for h, r in zip(hyps, refs)]
  assert S.sentence_bleus(hyps, refs) == expected
  assert expected[0] == pytest.approx(100.0) and expected[3] == 0.0 and 0 < expected[1] < 100
  assert S.sentence_bleus([], []) == []
