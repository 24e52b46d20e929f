"""Comparing variants over seeds and test sentences: per-seed scores, mean, spread, t intervals, a test of
every pair that is right at the 2-10 seeds researchers run, a family-wise correction, and the seeds a
difference would need.

The unit of replication is the training run: two variants share the test sentences but not their seeds, and
a verdict "A > B" claims that other seeds (and another test set of this kind) would rank them the same way.
Two sources of noise enter a difference of mean BLEU:

  * the seed (initialisation, data order, dropout: Clark et al. 2011's optimizer instability), measured by
    the sample variance of each variant's per-seed corpus BLEU, s_A^2 / K_A + s_B^2 / K_B;
  * the test sentences, measured by a paired bootstrap over sentences with every seed kept
    (`sentence_replicates`). Part of that bootstrap variance is each seed's own sentence-level noise, which
    the seed variance above already holds; only the rest, a difference between the variants that varies
    from sentence to sentence, is added (`test_set_variance`). In an A/A comparison it is about 0.

The pair is tested with Welch's t (Welch 1947) on that standard error, its degrees of freedom by
Welch-Satterthwaite from the seed terms alone (the test-set term counts as known): exact for normal seed
scores with equal spreads at any K, close to it otherwise, and never a percentile of three values. The
p-value is two-sided; the interval is the same t interval, so the interval excludes 0 exactly when p < alpha.
A variant's own interval is the t interval of its mean over seeds with its test-set term added the same way.

A table tests several pairs: they are a family, and `holm` (Holm 1979) keeps the chance of any false verdict
in the family at alpha; `seeds_needed` says how many seeds per variant would detect a difference with 80 %
power at the family's level, from the measured seed spread. attnmt.analysis.comparison turns these into the
verdicts of a table.

docs/design.md, "Seeds and significance", gives the calibration (an A/A simulation and real runs) and why
this test rather than the two-stage bootstrap it replaces (its seed level resampled K values: with K = 3 its
intervals were 2.7 times too narrow, and it ranked identical variants in 12 % of experiments).

References: J. Clark, C. Dyer, A. Lavie, N. Smith, Better hypothesis testing for statistical machine
translation: controlling for optimizer instability, ACL 2011. R. Dror, G. Baumer, S. Shlomov, R. Reichart,
The hitchhiker's guide to testing statistical significance in natural language processing, ACL 2018.
N. Reimers, I. Gurevych, Reporting score distributions makes a difference, EMNLP 2017. X. Bouthillier et al.,
Accounting for variance in machine learning benchmarks, MLSys 2021. B. L. Welch, The generalization of
Student's problem when several different population variances are involved, Biometrika 1947. S. Holm, A
simple sequentially rejective multiple test procedure, Scandinavian Journal of Statistics 1979. P. Koehn,
Statistical significance tests for machine translation evaluation, EMNLP 2004 (the paired bootstrap).
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
import sacrebleu


def _stats():
  """scipy.stats, imported when a test is first computed: importing it takes over a second, and every
  training and translation process loads this module (for its tables) without testing anything."""
  import scipy.stats

  return scipy.stats


ALPHA = 0.05
POWER = 0.8  # the power seeds_needed plans for
PLAN_DIFFERENCES = (0.5, 1.0)  # BLEU differences every seed plan covers, beside the observed one
MAX_SEEDS = 1000  # seeds_needed gives up beyond this


def sentence_statistics(hypotheses: Sequence[str], references: Sequence[str]) -> np.ndarray:
  """sacrebleu's BLEU sufficient statistics of every sentence (N x D integers: n-gram matches and totals,
  hypothesis and reference lengths); summed over sentences they give the corpus BLEU."""
  if len(hypotheses) != len(references):
    raise ValueError(f'{len(hypotheses)} hypotheses for {len(references)} references')
  if not references:
    raise ValueError('no sentences to score')
  return np.asarray(sacrebleu.BLEU()._extract_corpus_statistics(list(hypotheses), [list(references)]), np.int64)


_BLEU = sacrebleu.BLEU()  # one instance: its settings are read, never changed, by each score from statistics


def corpus_bleu(summed: np.ndarray) -> float:
  """sacrebleu's corpus BLEU from summed sentence statistics (one row of `sentence_statistics`' sum)."""
  return float(_BLEU._compute_score_from_stats(np.rint(summed).astype(np.int64).tolist()).score)


def sentence_replicates(
  stats: Sequence[np.ndarray], n_samples: int = 1000, seed: int = 12345, sentences: Optional[np.ndarray] = None
) -> list[np.ndarray]:
  """Per variant, R x K: the corpus BLEU of each of its K seeds in R bootstrap replicates of the test
  sentences, one draw of sentences shared by every variant and seed (the comparison stays paired). `stats[v]`
  is K_v x N x D (sentence_statistics of each seed); `sentences` restricts the draw to those positions."""
  if n_samples < 2:
    raise ValueError(f'n_samples must be at least 2, got {n_samples}')
  stats = [np.asarray(s, np.int64) for s in stats]
  if sentences is not None:
    stats = [s[:, sentences] for s in stats]
  n = stats[0].shape[1]
  if n == 0 or any(s.shape[1] != n for s in stats):
    raise ValueError(f'every variant needs the same, non-empty set of sentences; got {[s.shape[1] for s in stats]}')
  drawn_RxN = np.random.default_rng(seed).choice(n, size=(n_samples, n), replace=True)
  counts_RxN = np.zeros((n_samples, n), np.int64)  # how often each sentence is drawn
  np.add.at(counts_RxN, (np.arange(n_samples)[:, None], drawn_RxN), 1)
  out = []
  for s_KxNxD in stats:
    summed_RxKxD = np.einsum('rn,knd->rkd', counts_RxN, s_KxNxD)
    out.append(np.array([[corpus_bleu(x) for x in row] for row in summed_RxKxD]))
  return out


def own_noise(reps_RxK: np.ndarray) -> float:
  """The variance that each seed's own sentence-level noise adds to the mean of K seeds, sigma_e^2 / K, from
  the bootstrap: a seed's deviation from the seeds' mean has variance sigma_e^2 (K - 1) / K in the sentence
  draw (what all seeds share cancels). 0 for one seed, where it cannot be separated."""
  k = reps_RxK.shape[1]
  if k < 2:
    return 0.0
  deviation = reps_RxK - reps_RxK.mean(1, keepdims=True)
  return float(deviation.var(0, ddof=1).mean() * k / (k - 1)) / k


def test_set_variance(reps_a_RxK: np.ndarray, reps_b_RxK: Optional[np.ndarray] = None) -> float:
  """The test sentences' share of the variance of a mean over seeds (of a difference of two means, given
  both), beyond what the seed variance already holds: the paired bootstrap's variance less each side's
  own_noise, at least 0."""
  total = reps_a_RxK.mean(1) if reps_b_RxK is None else reps_a_RxK.mean(1) - reps_b_RxK.mean(1)
  shared = float(np.var(total, ddof=1)) - own_noise(reps_a_RxK)
  if reps_b_RxK is not None:
    shared -= own_noise(reps_b_RxK)
  return max(shared, 0.0)


def seed_summary(values: Sequence[float], alpha: float = ALPHA, test_variance: float = 0.0) -> dict:
  """Per-seed values, their mean, sample standard deviation and Student's t interval of the mean over seeds
  (with `test_variance` added to the squared standard error, the degrees of freedom staying K - 1); `sd` and
  `ci` are None for a single seed (no spread can be measured from one)."""
  v = np.asarray(values, float)
  if v.size == 0:
    raise ValueError('no seeds to summarise')
  out = {'per_seed': v.tolist(), 'seeds': int(v.size), 'mean': float(v.mean()), 'sd': None, 'ci': None}
  if v.size > 1:
    sd = float(v.std(ddof=1))
    half = float(_stats().t.ppf(1 - alpha / 2, v.size - 1)) * np.sqrt(sd**2 / v.size + test_variance)
    out.update(sd=sd, ci=[float(out['mean'] - half), float(out['mean'] + half)])
  return out


def welch_test(a: Sequence[float], b: Sequence[float], test_variance: float = 0.0, alpha: float = ALPHA) -> dict:
  """Welch's t test of mean(a) - mean(b) over seeds, `test_variance` added to the squared standard error:
  the difference, standard error, degrees of freedom (Welch-Satterthwaite over the seed terms), two-sided p
  and the (1 - alpha) t interval, which excludes 0 exactly when p < alpha. Needs 2 seeds on each side."""
  a, b = np.asarray(a, float), np.asarray(b, float)
  if min(a.size, b.size) < 2:
    raise ValueError(f'a t test over seeds needs at least 2 seeds per variant, got {a.size} and {b.size}')
  diff = float(a.mean() - b.mean())
  va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
  se2 = va + vb + test_variance
  seed_part = va**2 / (a.size - 1) + vb**2 / (b.size - 1)
  df = float(se2**2 / seed_part) if seed_part > 0 else float('inf')
  se = float(np.sqrt(se2))
  if se == 0:  # every seed of both variants scored the same
    p = 1.0 if diff == 0 else 0.0
    return {'difference': diff, 'se': 0.0, 'df': df, 'p_value': p, 'interval': [diff, diff]}
  p = float(2 * _stats().t.sf(abs(diff) / se, df))
  half = float(_stats().t.ppf(1 - alpha / 2, df)) * se
  return {'difference': diff, 'se': se, 'df': df, 'p_value': p, 'interval': [diff - half, diff + half]}


def sentence_test(a_R: np.ndarray, b_R: np.ndarray, difference: float, alpha: float = ALPHA) -> dict:
  """With one seed on a side the seeds cannot be tested: the difference judged against the test sentences
  alone (normal approximation to the paired bootstrap's replicates, two-sided). It ranks nothing."""
  se = float(np.std(a_R - b_R, ddof=1))
  p = (1.0 if difference == 0 else 0.0) if se == 0 else float(2 * _stats().norm.sf(abs(difference) / se))
  half = float(_stats().norm.ppf(1 - alpha / 2)) * se
  return {
    'difference': difference,
    'se': se,
    'df': float('inf'),
    'p_value': p,
    'interval': [difference - half, difference + half],
  }


def pair_test(a, b, reps_a_RxK: np.ndarray, reps_b_RxK: np.ndarray, alpha: float = ALPHA) -> dict:
  """The test a comparison ranks by, of mean(a) - mean(b) over per-seed scores: Welch's t with the test set's
  variance (2 or more seeds on each side), else the sentences alone (sentence_test); with 'test_variance'
  (None when the seeds cannot be tested)."""
  if min(len(a), len(b)) >= 2:
    tv = test_set_variance(reps_a_RxK, reps_b_RxK)
    return welch_test(a, b, tv, alpha) | {'test_variance': tv}
  diff = float(np.mean(a) - np.mean(b))
  return sentence_test(reps_a_RxK.mean(1), reps_b_RxK.mean(1), diff, alpha) | {'test_variance': None}


def variant_summary(values, reps_RxK: np.ndarray, alpha: float = ALPHA) -> dict:
  """seed_summary with the test set's variance (test_set_variance) in its t interval, and 'interval': that
  interval, or with one seed the test sentences' alone."""
  shared = test_set_variance(reps_RxK)
  out = {**seed_summary(values, alpha, shared), 'test_variance': shared}
  out['interval'] = out['ci']
  if out['seeds'] == 1:
    out['interval'] = sentence_test(reps_RxK[:, 0], np.zeros(len(reps_RxK)), out['mean'], alpha)['interval']
  return out


def holm(p_values: Sequence[float]) -> list[float]:
  """Holm's step-down adjusted p-values (Holm 1979): the i-th smallest p times (m - i + 1), made monotone,
  capped at 1. A pair whose adjusted p is below alpha is rejected with the family-wise error held at alpha."""
  p = np.asarray(p_values, float)
  m = p.size
  order = np.argsort(p, kind='stable')
  adjusted = np.empty(m)
  running = 0.0
  for i, j in enumerate(order):
    running = max(running, min(1.0, (m - i) * p[j]))
    adjusted[j] = running
  return adjusted.tolist()


def seeds_needed(
  difference: float, sd: float, test_variance: float = 0.0, alpha: float = ALPHA, power: float = POWER
) -> Optional[int]:
  """Seeds per variant (equal on both sides) at which Welch's t test at level `alpha` (two-sided) detects a
  true `difference` with probability `power`, for seeds whose BLEU has standard deviation `sd`, by the
  noncentral t distribution. None when no number up to MAX_SEEDS does (the test set's own variance can
  put a small difference out of reach of any number of seeds)."""
  delta = abs(difference)
  if delta == 0:
    return None

  def power_at(k):
    se = np.sqrt(2 * sd**2 / k + test_variance)
    if se == 0:
      return 1.0
    df = 2 * (k - 1) if sd > 0 else 1e6
    crit = _stats().t.ppf(1 - alpha / 2, df)
    nc = delta / se
    tails = np.array([_stats().nct.sf(crit, df, nc), _stats().nct.cdf(-crit, df, nc)])
    return float(np.nan_to_num(tails, nan=0.0).sum())  # scipy's far tail can come back nan where it is ~0

  if power_at(MAX_SEEDS) < power:
    return None
  lo, hi = 2, MAX_SEEDS  # power grows with k: the smallest k in [lo, hi] that reaches it
  while lo < hi:
    mid = (lo + hi) // 2
    lo, hi = (lo, mid) if power_at(mid) >= power else (mid + 1, hi)
  return lo
