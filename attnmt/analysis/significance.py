"""Comparing variants over seeds and test sentences: per-seed scores, mean, spread, intervals, paired tests
and a verdict in words.

Two sources of noise separate two variants' BLEU: the test sentences (another test set of the same kind
would score differently) and the training seed (another initialisation and data order would train a
different model; Clark et al. 2011 call it optimizer instability). sacrebleu's paired bootstrap
(Koehn 2004) resamples sentences only, so it judges one trained model against another, not one variant
against another. Here every bootstrap replicate resamples both levels (the two-stage bootstrap of
hierarchical data, Davison & Hinkley 1997, Sec. 3.8):

  1. the test sentences, with replacement, shared by every variant (the comparison stays paired over
     sentences);
  2. each variant's seeds, with replacement, independently (seed i of one architecture has nothing to
     do with seed i of another);

and a variant's replicate score is the mean over its drawn seeds of the corpus BLEU of the drawn
sentences, computed by sacrebleu from summed sentence statistics. The p-value follows sacrebleu's
paired bootstrap exactly (the centred absolute difference, `sacrebleu.significance._compute_p_value`),
so that with one seed per variant the test is sacrebleu's. Intervals are percentile intervals of the
replicates.

With K seeds the seed level can only be resampled K ways, so with K = 2 or 3 the intervals are narrower
than the truth (the bootstrap's variance factor (K - 1) / K): more seeds tighten them honestly.
`seed_summary` gives the plain per-seed view beside it: mean, standard deviation and Student's t
interval over the seeds (scipy.stats.t), which needs no sentences.

With one seed on either side the seed variance is unmeasured: the verdict then says the variants are not
ranked, whatever the sentence bootstrap finds. With more, a pair is ranked when p < 0.05 and the 95%
interval of its difference excludes 0 (near the threshold the two can disagree: then it is not ranked).

References: P. Koehn, Statistical significance tests for machine translation evaluation, EMNLP 2004.
J. Clark, C. Dyer, A. Lavie, N. Smith, Better hypothesis testing for statistical machine translation:
controlling for optimizer instability, ACL 2011. A. C. Davison, D. V. Hinkley, Bootstrap Methods and their
Application, Cambridge University Press 1997, Sec. 3.8.
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
import scipy.stats
import sacrebleu

ALPHA = 0.05


def sentence_statistics(hypotheses: Sequence[str], references: Sequence[str]) -> np.ndarray:
  """sacrebleu's BLEU sufficient statistics of every sentence (N x D integers: n-gram matches and totals,
  hypothesis and reference lengths); summed over sentences they give the corpus BLEU."""
  if len(hypotheses) != len(references):
    raise ValueError(f'{len(hypotheses)} hypotheses for {len(references)} references')
  if not references:
    raise ValueError('no sentences to score')
  return np.asarray(sacrebleu.BLEU()._extract_corpus_statistics(list(hypotheses), [list(references)]), np.int64)


def corpus_bleu(summed: np.ndarray) -> float:
  """sacrebleu's corpus BLEU from summed sentence statistics (one row of `sentence_statistics`' sum)."""
  return float(sacrebleu.BLEU()._compute_score_from_stats([int(x) for x in np.rint(summed)]).score)


def seed_summary(values: Sequence[float], alpha: float = ALPHA) -> dict:
  """Per-seed values, their mean, sample standard deviation and Student's t interval of the mean over
  seeds; `sd` and `ci` are None for a single seed (no spread can be measured from one)."""
  v = np.asarray(values, float)
  if v.size == 0:
    raise ValueError('no seeds to summarise')
  out = {'per_seed': v.tolist(), 'seeds': int(v.size), 'mean': float(v.mean()), 'sd': None, 'ci': None}
  if v.size > 1:
    sd = float(v.std(ddof=1))
    half = float(scipy.stats.t.ppf(1 - alpha / 2, v.size - 1)) * sd / np.sqrt(v.size)
    out.update(sd=sd, ci=[float(out['mean'] - half), float(out['mean'] + half)])
  return out


def bootstrap_replicates(
  stats: Sequence[np.ndarray], n_samples: int = 1000, seed: int = 12345, sentences: Optional[np.ndarray] = None
) -> np.ndarray:
  """R x V: each variant's mean-over-seeds corpus BLEU in R two-stage replicates (sentences shared by all
  variants, then each variant's seeds drawn independently). `stats[v]` is K_v x N x D (sentence_statistics
  of each seed); `sentences` restricts the resampling to those sentence positions (a length bucket)."""
  if n_samples < 1:
    raise ValueError(f'n_samples must be at least 1, got {n_samples}')
  stats = [np.asarray(s, np.int64) for s in stats]
  if sentences is not None:
    stats = [s[:, sentences] for s in stats]
  n = stats[0].shape[1]
  if n == 0 or any(s.shape[1] != n for s in stats):
    raise ValueError(f'every variant needs the same, non-empty set of sentences; got {[s.shape[1] for s in stats]}')
  rng = np.random.default_rng(seed)
  # The sentence draw is sacrebleu's (_paired_bs_test), so one seed per variant gives its test exactly.
  drawn_RxN = rng.choice(n, size=(n_samples, n), replace=True)
  counts_RxN = np.zeros((n_samples, n), np.int64)  # how often each sentence is drawn
  np.add.at(counts_RxN, (np.arange(n_samples)[:, None], drawn_RxN), 1)
  out = np.empty((n_samples, len(stats)))
  for v, s_KxNxD in enumerate(stats):
    summed_RxKxD = np.einsum('rn,knd->rkd', counts_RxN, s_KxNxD)
    bleu_RxK = np.array([[corpus_bleu(x) for x in row] for row in summed_RxKxD])
    k = s_KxNxD.shape[0]
    drawn_RxK = rng.integers(0, k, size=(n_samples, k))
    out[:, v] = np.take_along_axis(bleu_RxK, drawn_RxK, axis=1).mean(1)
  return out


def percentile_interval(samples: np.ndarray, alpha: float = ALPHA) -> list[float]:
  return [float(np.percentile(samples, 100 * alpha / 2)), float(np.percentile(samples, 100 * (1 - alpha / 2)))]


def p_value(difference: float, replicate_differences: np.ndarray) -> float:
  """sacrebleu's paired-bootstrap p-value: the share of centred absolute replicate differences above the
  observed absolute difference, with the +1 that keeps the test valid (sacrebleu.significance). Two
  equal scores get p = 1: sacrebleu's rule would give 1 / (R + 1) when every replicate difference is 0."""
  if difference == 0:
    return 1.0
  sample = np.abs(replicate_differences)
  centred = sample - sample.mean()
  return float((np.sum(centred > abs(difference)) + 1) / (len(centred) + 1))


def verdict(
  a: str, b: str, difference: float, p: float, seeds_a: int, seeds_b: int, alpha: float = ALPHA, interval=None
) -> str:
  """'A > B', 'A ≈ B: not distinguishable with K seeds', or, with one seed on either side, 'not ranked'.
  A ranking needs both p < alpha and, when given, a (1 - alpha) interval of the difference that excludes
  0: the centred p-value and the percentile interval can disagree near the threshold, and then the pair
  is not ranked."""
  if min(seeds_a, seeds_b) < 2:
    return f'{a} vs {b}: not ranked with 1 seed (seed variance unmeasured; train more seeds to rank them)'
  if p < alpha and (interval is None or not interval[0] <= 0 <= interval[1]):
    return f'{a} > {b}' if difference > 0 else f'{b} > {a}'
  k = f'{seeds_a} seeds' if seeds_a == seeds_b else f'{seeds_a} and {seeds_b} seeds'
  return f'{a} ≈ {b}: not distinguishable with {k}'


def compare(
  names: Sequence[str],
  per_seed_hypotheses: Sequence[Sequence[Sequence[str]]],
  references: Sequence[str],
  baseline: Optional[str] = None,
  n_samples: int = 1000,
  seed: int = 12345,
  alpha: float = ALPHA,
) -> dict:
  """Every variant's per-seed corpus BLEU, mean, sd and two-stage bootstrap interval, and every pair: first
  each variant against `baseline` (e.g. `none`), then each against the best by mean BLEU, then the rest
  ('against': 'baseline', 'best', 'other'), each with the difference, its interval, the p-value and the
  verdict. `per_seed_hypotheses[v][k]` holds seed k's
  outputs of variant v for `references`, in order."""
  if len(names) != len(per_seed_hypotheses) or not names:
    raise ValueError('give one list of per-seed hypotheses per variant name')
  stats = [np.stack([sentence_statistics(h, references) for h in hyps]) for hyps in per_seed_hypotheses]
  observed = [[corpus_bleu(s.sum(0)) for s in per_variant] for per_variant in stats]
  reps = bootstrap_replicates(stats, n_samples, seed)
  variants = []
  for v, name in enumerate(names):
    row = {'variant': name, **seed_summary(observed[v], alpha), 'interval': percentile_interval(reps[:, v], alpha)}
    variants.append(row)
  best = max(range(len(names)), key=lambda v: variants[v]['mean'])
  base = names.index(baseline) if baseline in names else None
  # each variant against the baseline, then against the best, then every other pair (higher mean first)
  order = sorted(range(len(names)), key=lambda v: -variants[v]['mean'])
  wanted = []
  for ref in (base, best):
    for v in range(len(names)):
      if ref is not None and ref != v and (v, ref) not in wanted and (ref, v) not in wanted:
        wanted.append((v, ref))
  for i, v in enumerate(order):
    for ref in order[i + 1 :]:
      if (v, ref) not in wanted and (ref, v) not in wanted:
        wanted.append((v, ref))
  pairs = []
  for v, ref in wanted:
    diff = variants[v]['mean'] - variants[ref]['mean']
    p = p_value(diff, reps[:, v] - reps[:, ref])
    between = percentile_interval(reps[:, v] - reps[:, ref], alpha)
    k_a, k_b = variants[v]['seeds'], variants[ref]['seeds']
    pairs.append(
      {
        'a': names[v],
        'b': names[ref],
        'against': 'baseline' if ref == base else 'best' if ref == best else 'other',
        'difference': diff,
        'interval': between,
        'p_value': p,
        'seeds': [k_a, k_b],
        'verdict': verdict(names[v], names[ref], diff, p, k_a, k_b, alpha, between),
      }
    )
  return {
    'method': 'two-stage bootstrap over test sentences (paired) and seeds (per variant), sacrebleu BLEU',
    'n_samples': n_samples,
    'seed': seed,
    'alpha': alpha,
    'ranked': min(r['seeds'] for r in variants) >= 2,
    'best': names[best],
    'variants': variants,
    'pairs': pairs,
  }
