"""One pair of variants over seeds and test sentences: per-seed corpus BLEU (sacrebleu), the test set's variance
by the jackknife over sentences, and the t test of the difference of the means over seeds with that variance
added. attnmt.compare.family turns pairs into a family's verdicts.

The unit of replication is the training run. Seed k of every variant starts from the same data order
(`data.shuffle_seed + k`) and the same root key, so the design is a randomized complete block with the seed as
block: same-numbered seeds of two variants are correlated (docs/design.md measures how much), and a verdict
"A > B" claims that other seeds (and another test set of this kind) would rank them the same way. Two sources
of noise enter a difference of mean BLEU:

  * the seed (initialisation, data order, dropout: Clark et al. 2011's optimizer instability). Where the two
    variants have the same seed numbers, the contrast is the mean of the per-seed differences d_k = a_k - b_k,
    its seed term var(d) / K with K - 1 degrees of freedom (the paired t; what the block shares cancels, and
    no assumption on the two variants' variances is made). Where the seed sets differ, the unpaired term
    s_A^2 / K_A + s_B^2 / K_B with min(K_A, K_B) - 1 degrees of freedom: the lower bound of Welch's
    Satterthwaite df, valid at any ratio of the seed variances (Welch's own df is anti-conservative at 2-5
    seeds when they differ 16-64 times; calibration.py simulates both).
  * the test sentences: how the difference would move on another test set drawn like this one. It is
    measured by the delete-one jackknife over sentences (Efron & Stein 1981; Efron 1982, ch. 2): sacrebleu's
    BLEU of every seed with each sentence left out in turn (`jackknife`). Part of that variance is each seed's
    own sentence-level noise, which the seed term already holds; only the rest is added
    (`test_set_variance`): for a paired contrast, of the per-seed differences' jackknife rows (a seed's noise
    that both variants share cancels there too), for an unpaired one of each side's. In an A/A comparison it
    is about 0. The jackknife has no random seed: the same translations give the same p.

With the test-set term, the degrees of freedom are at most N - 1 for N sentences (the jackknife's own;
Satterthwaite's df of a sum is never below the smallest of its parts'), so adding the test set only widens
the interval. Two-sided p, a t interval at any level, and the two one-sided tests of equivalence within a
margin (Schuirmann 1987: each at the level, so the 1 - 2 level interval inside the margin) come from the same t.

References: J. Clark, C. Dyer, A. Lavie, N. Smith, Better hypothesis testing for statistical machine
translation: controlling for optimizer instability, ACL 2011. R. Dror, G. Baumer, S. Shlomov, R. Reichart,
The hitchhiker's guide to testing statistical significance in natural language processing, ACL 2018.
N. Reimers, I. Gurevych, Reporting score distributions makes a difference, EMNLP 2017. B. Efron, C. Stein,
The jackknife estimate of variance, Annals of Statistics 1981. B. L. Welch, The generalization of Student's
problem when several different population variances are involved, Biometrika 1947. P. L. Hsu, Contribution
to the theory of Student's t-test as applied to the problem of two samples, Stat. Res. Memoirs 1938 (the
min(K_A, K_B) - 1 df). D. J. Schuirmann, A comparison of the two one-sided tests procedure and the power
approach for assessing the equivalence of average bioavailability, J. Pharmacokinetics and Biopharmaceutics 1987.
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
import sacrebleu

from attnmt.training import translation_scores

ALPHA = 0.05


def _special():
  """scipy.special, imported when a test is first computed (training and translation load this module without
  testing anything). Its stdtr, stdtrit, ndtr and ndtri are the numbers scipy.stats.t and .norm compute, without
  their argument handling per call, where the simulated A/A checks spent most of their time."""
  import scipy.special

  return scipy.special


def t_quantile(q, df):
  """Student's t quantile (scipy.stats.t.ppf)."""
  return _special().stdtrit(df, q)


def t_cdf(x, df):
  """Student's t distribution function (scipy.stats.t.cdf; its survival function is t_cdf(-x, df))."""
  return _special().stdtr(df, x)


def sentence_statistics(hypotheses: Sequence[str], references: Sequence[str]) -> np.ndarray:
  """sacrebleu's BLEU sufficient statistics of every sentence (N x D integers: n-gram matches and totals,
  hypothesis and reference lengths); summed over sentences they give the corpus BLEU. Extracted once per list
  of outputs (attnmt.training.translation_scores), which the scores of the same outputs share."""
  return translation_scores.sentence_statistics(hypotheses, references, 'bleu')


def sentence_bleus(hypotheses: Sequence[str], references: Sequence[str]) -> list[float]:
  """sacrebleu.sentence_bleu of every sentence (its defaults: exponential smoothing, the effective n-gram order),
  from the outputs' sentence statistics (`sentence_statistics`), where sentence_bleu would build a metric and
  tokenise afresh for every sentence."""
  if not references:
    return []
  metric = sacrebleu.BLEU(effective_order=True)
  return [
    float(metric._compute_score_from_stats(row.tolist()).score) for row in sentence_statistics(hypotheses, references)
  ]


_BLEU = sacrebleu.BLEU()  # one instance: its settings are read, never changed, by each score from statistics


def corpus_bleu(summed: np.ndarray) -> float:
  """sacrebleu's corpus BLEU from summed sentence statistics (one row of `sentence_statistics`' sum)."""
  return translation_scores.score('bleu', summed)


def jackknife(stats_KxNxD: np.ndarray, sentences: Optional[np.ndarray] = None) -> np.ndarray:
  """K x N: sacrebleu's corpus BLEU of each seed with each sentence left out in turn (the delete-one
  jackknife); `sentences` restricts the test set to those positions first. Needs 2 sentences or more."""
  s = np.asarray(stats_KxNxD, np.int64)
  if sentences is not None:
    s = s[:, sentences]
  if s.shape[1] < 2:
    raise ValueError(f'the jackknife over sentences needs at least 2 sentences, got {s.shape[1]}')
  out = np.empty(s.shape[:2])
  for k, per_seed in enumerate(s):
    left_out = (per_seed.sum(0) - per_seed).tolist()  # N rows of summed statistics, one sentence removed
    out[k] = [_BLEU._compute_score_from_stats(row).score for row in left_out]
  return out


def jackknife_variance(values_N: np.ndarray) -> float:
  """The jackknife's variance of a statistic from its N leave-one-out values: (N - 1) / N * sum of squares."""
  n = values_N.shape[-1]
  return float((n - 1) / n * np.square(values_N - values_N.mean(-1, keepdims=True)).sum(-1).mean())


def own_noise(jack_KxN: np.ndarray) -> float:
  """The variance that each seed's own sentence-level noise adds to the mean of K seeds, sigma_e^2 / K: a
  seed's deviation from the seeds' mean has variance sigma_e^2 (K - 1) / K over test sets (what all seeds
  share cancels). 0 for one seed, where it cannot be separated."""
  k = jack_KxN.shape[0]
  if k < 2:
    return 0.0
  return jackknife_variance(jack_KxN - jack_KxN.mean(0, keepdims=True)) / (k - 1)


def test_set_variance(jack_a_KxN: np.ndarray, jack_b_KxN: Optional[np.ndarray] = None) -> float:
  """The test sentences' share of the variance of a mean over seeds (of a difference of two means, given
  both), beyond what the seed variance already holds: the jackknife variance less each side's own_noise,
  at least 0."""
  total = jack_a_KxN.mean(0) if jack_b_KxN is None else jack_a_KxN.mean(0) - jack_b_KxN.mean(0)
  shared = jackknife_variance(total) - own_noise(jack_a_KxN)
  if jack_b_KxN is not None:
    shared -= own_noise(jack_b_KxN)
  return max(shared, 0.0)


def _degrees(seed_df: float, test_variance: float, sentences: Optional[int]) -> float:
  """The t test's degrees of freedom: the seeds', capped at sentences - 1 when the test set's variance is in."""
  if test_variance > 0 and sentences is not None:
    return min(seed_df, float(sentences - 1))
  return seed_df


def t_interval(estimate: float, se: float, df: float, level: float) -> list[float]:
  """The two-sided t interval of coverage 1 - `level`."""
  half = float(t_quantile(1 - level / 2, df)) * se if se > 0 else 0.0
  return [estimate - half, estimate + half]


def seed_summary(
  values: Sequence[float], level: float = ALPHA, test_variance: float = 0.0, sentences: Optional[int] = None
) -> dict:
  """Per-seed values, their mean, sample standard deviation and Student's t interval of the mean over seeds
  (with `test_variance` added to the squared standard error; K - 1 degrees of freedom, at most sentences - 1);
  `sd` and `ci` are None for a single seed (no spread can be measured from one)."""
  v = np.asarray(values, float)
  if v.size == 0:
    raise ValueError('no seeds to summarise')
  out = {'per_seed': v.tolist(), 'seeds': int(v.size), 'mean': float(v.mean()), 'sd': None, 'ci': None}
  if v.size > 1:
    sd = float(v.std(ddof=1))
    se = float(np.sqrt(sd**2 / v.size + test_variance))
    out.update(sd=sd, ci=t_interval(out['mean'], se, _degrees(v.size - 1, test_variance, sentences), level))
  return out


PAIRED, UNPAIRED, SENTENCES = 'paired', 'unpaired', 'sentences'  # the design a contrast was tested by


def t_test(difference, se, df, level=ALPHA, margin: Optional[float] = None, tost: Optional[float] = None) -> dict:
  """The t test of a difference with standard error `se` and `df` degrees of freedom: two-sided p and the
  interval of coverage 1 - `level`, which excludes 0 exactly when p < level; with a `margin` d > 0,
  'p_equivalent' (Schuirmann's TOST: the larger p of the one-sided tests of difference <= -d and >= d) and
  'equivalence_interval', the 1 - 2 tost interval (`tost`: each one-sided test's level, `level` if not
  given), which lies inside (-d, d) exactly when p_equivalent < tost."""
  out = {'difference': difference, 'se': se, 'df': df}
  out |= {'p_value': two_sided_p(difference, se, df), 'interval': t_interval(difference, se, df, level)}
  if margin is not None:
    out['p_equivalent'] = equivalence_p(difference, se, df, margin)
    out['equivalence_interval'] = t_interval(difference, se, df, 2 * (level if tost is None else tost))
  return out


def paired_test(
  a: Sequence[float],
  b: Sequence[float],
  test_variance: float = 0.0,
  sentences: Optional[int] = None,
  level: float = ALPHA,
  margin: Optional[float] = None,
  tost: Optional[float] = None,
) -> dict:
  """The paired t test of mean(a - b) over seeds, a[k] and b[k] the same seed of the two variants:
  standard error sqrt(var(a - b) / K + `test_variance`), K - 1 degrees of freedom (at most `sentences` - 1
  with a test-set term); t_test's p, interval and TOST. Needs 2 seeds."""
  a, b = np.asarray(a, float), np.asarray(b, float)
  if a.size != b.size or a.size < 2:
    raise ValueError(f'a paired test needs the same seeds on both sides, at least 2, got {a.size} and {b.size}')
  d = a - b
  se = float(np.sqrt(d.var(ddof=1) / d.size + test_variance))
  df = _degrees(float(d.size - 1), test_variance, sentences)
  return t_test(float(d.mean()), se, df, level, margin, tost) | {'test_variance': test_variance, 'design': PAIRED}


def unpaired_test(
  a: Sequence[float],
  b: Sequence[float],
  test_variance: float = 0.0,
  sentences: Optional[int] = None,
  level: float = ALPHA,
  margin: Optional[float] = None,
  tost: Optional[float] = None,
) -> dict:
  """The t test of mean(a) - mean(b) over two sets of seeds: standard error sqrt(s_a^2/K_a + s_b^2/K_b +
  `test_variance`) as Welch's, min(K_a, K_b) - 1 degrees of freedom (Hsu 1938: valid whatever the ratio of
  the variances; at most `sentences` - 1 with a test-set term); t_test's p, interval and TOST. Needs 2 seeds
  on each side."""
  a, b = np.asarray(a, float), np.asarray(b, float)
  if min(a.size, b.size) < 2:
    raise ValueError(f'a t test over seeds needs at least 2 seeds per variant, got {a.size} and {b.size}')
  se = float(np.sqrt(a.var(ddof=1) / a.size + b.var(ddof=1) / b.size + test_variance))
  df = _degrees(float(min(a.size, b.size) - 1), test_variance, sentences)
  diff = float(a.mean() - b.mean())
  return t_test(diff, se, df, level, margin, tost) | {'test_variance': test_variance, 'design': UNPAIRED}


def same_seeds(seeds_a: Optional[Sequence[int]], seeds_b: Optional[Sequence[int]]) -> bool:
  """Whether two variants' seeds can be paired: both known, the same set of numbers, each once, at least 2."""
  if seeds_a is None or seeds_b is None:
    return False
  a, b = list(seeds_a), list(seeds_b)
  return len(a) >= 2 and len(set(a)) == len(a) and sorted(a) == sorted(b)


def two_sided_p(diff: float, se: float, df: float) -> float:
  if se == 0:  # every seed of both variants scored the same
    return 1.0 if diff == 0 else 0.0
  return float(2 * t_cdf(-abs(diff) / se, df))


def equivalence_p(diff: float, se: float, df: float, margin: float) -> float:
  """The p-value of Schuirmann's two one-sided tests that -margin < true difference < margin: the larger of
  the tests against difference <= -margin and difference >= margin."""
  if se == 0:
    return 0.0 if abs(diff) < margin else 1.0
  return float(max(t_cdf(-(diff + margin) / se, df), t_cdf((diff - margin) / se, df)))


def sentence_test(jack_a_N: np.ndarray, jack_b_N: np.ndarray, difference: float, level: float = ALPHA) -> dict:
  """With one seed on a side the seeds cannot be tested: the difference judged against the test sentences
  alone (normal approximation, the jackknife's standard error of the difference, two-sided). It ranks
  nothing."""
  se = float(np.sqrt(jackknife_variance(np.asarray(jack_a_N) - np.asarray(jack_b_N))))
  p = (1.0 if difference == 0 else 0.0) if se == 0 else float(2 * _special().ndtr(-abs(difference) / se))
  half = float(_special().ndtri(1 - level / 2)) * se
  return {'difference': difference, 'se': se, 'df': float('inf'), 'p_value': p} | {
    'interval': [difference - half, difference + half],
    'test_variance': None,
  }


def pair_test(
  a,
  b,
  jack_a_KxN=None,
  jack_b_KxN=None,
  level: float = ALPHA,
  margin: Optional[float] = None,
  seeds_a=None,
  seeds_b=None,
  tost: Optional[float] = None,
) -> dict:
  """The test a comparison decides by, of mean(a) - mean(b) over per-seed scores, with its 'design': paired by
  seed number when both variants have the same seeds (`seeds_a`, `seeds_b`: the seed of each score), the
  test-set term from the per-seed differences' jackknife; unpaired when the seeds differ or are not given;
  with one seed on a side the sentences alone (sentence_test, no decision). Without jackknife rows the test
  set is held fixed (no test-set term). `tost`: the level of each one-sided test of equivalence (`level`)."""
  jack = jack_a_KxN is not None and jack_b_KxN is not None
  if same_seeds(seeds_a, seeds_b):
    where_in_b = {seed: i for i, seed in enumerate(seeds_b)}
    order = [where_in_b[seed] for seed in seeds_a]  # b's score of a's k-th seed
    b = np.asarray(b, float)[order]
    test, tv = paired_test, test_set_variance(np.asarray(jack_a_KxN) - np.asarray(jack_b_KxN)[order]) if jack else 0.0
  elif min(len(a), len(b)) >= 2:
    test, tv = unpaired_test, test_set_variance(jack_a_KxN, jack_b_KxN) if jack else 0.0
  else:
    diff = float(np.mean(a) - np.mean(b))
    if not jack:
      return {'difference': diff, 'interval': None, 'p_value': None, 'df': None, 'se': None, 'test_variance': None}
    return sentence_test(jack_a_KxN.mean(0), jack_b_KxN.mean(0), diff, level) | {'design': SENTENCES}
  return test(a, b, tv, jack_a_KxN.shape[1] if jack else None, level, margin, tost)


def variant_summary(values, jack_KxN: np.ndarray, level: float = ALPHA) -> dict:
  """seed_summary with the test set's variance (test_set_variance) in its t interval, and 'interval': that
  interval, or with one seed the test sentences' alone."""
  shared = test_set_variance(jack_KxN)
  out = {**seed_summary(values, level, shared, jack_KxN.shape[1]), 'test_variance': shared}
  out['interval'] = out['ci']
  if out['seeds'] == 1:
    zeros = np.zeros(jack_KxN.shape[1])
    out['interval'] = sentence_test(jack_KxN[0], zeros, out['mean'], level)['interval']
  return out
