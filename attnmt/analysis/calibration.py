"""Is the comparison of variants calibrated at K seeds? An A/A check, simulated and on real runs.

`simulate` draws sentence-level BLEU statistics (sacrebleu's layout: hypothesis and reference length, 1- to
4-gram matches and totals) for two variants of K seeds each from a generator with shared sentence
difficulty, a per-seed quality offset and per-seed sentence noise. With `gap` 0 both variants come from one
distribution, so every ranking is a false positive: a test at level alpha should rank at most alpha of the
experiments. With `gap` > 0 the share ranked is the test's power against a true difference of `gap` seed
standard deviations.

`splits` does the same on real runs: the seeds of one variant, split every way into two halves, each
split compared as if the halves were two variants.

Both test a pair exactly as `comparison.compare_statistics` does (one pair is a family of one).
"""

from __future__ import annotations

import itertools
from typing import Sequence

import numpy as np

from attnmt.analysis import significance

# The generator's defaults: BLEU near 20.7 with a seed sd near 0.8 on 400 sentences (measured over 32 seeds),
# about the main job's: most of the seed spread is the seed's overall quality, some its sentence noise.
BASE_LOGIT = -0.2  # unigram precision logit of an average sentence
SEED_LOGIT_SD = 0.04  # a seed's quality offset (all its sentences)
SENTENCE_LOGIT_SD = 0.5  # a seed's own noise on each sentence
DIFFICULTY_SD = 1.0  # sentence difficulty, shared by every system


def simulate(rng: np.random.Generator, seeds: int, sentences: int, offsets=(0.0, 0.0)) -> list[np.ndarray]:
  """One experiment: per variant a `seeds` x `sentences` x 10 array of sentence statistics. The variants share
  the sentences (reference lengths, difficulty); variant v's seeds get quality offsets N(offsets[v],
  SEED_LOGIT_SD) in logit space, each sentence its own noise."""
  ref_len = 4 + rng.poisson(20, sentences)
  difficulty = rng.normal(0, DIFFICULTY_SD, sentences)
  out = []
  for offset in offsets:
    quality = rng.normal(offset, SEED_LOGIT_SD, (seeds, 1))
    noise = rng.normal(0, SENTENCE_LOGIT_SD, (seeds, sentences))
    p1 = 1 / (1 + np.exp(-(BASE_LOGIT + quality - difficulty + noise)))
    hyp_len = np.broadcast_to(ref_len, (seeds, sentences))
    stats = np.zeros((seeds, sentences, 10), np.int64)
    stats[..., 0], stats[..., 1] = hyp_len, ref_len
    for n in range(1, 5):
      total = np.maximum(hyp_len - n + 1, 0)
      stats[..., 1 + n] = rng.binomial(total, p1**n)
      stats[..., 5 + n] = total
    out.append(stats)
  return out


def seed_bleu(stats: np.ndarray) -> np.ndarray:
  """The corpus BLEU of each seed (K x N x D statistics), by sacrebleu."""
  return np.array([significance.corpus_bleu(s.sum(0)) for s in stats])


def pair_ranked(bleu_a, bleu_b, reps_a_RxK, reps_b_RxK, alpha: float = significance.ALPHA) -> bool:
  """Whether compare_statistics ranks a single pair: Welch's t with the test set's variance, p < alpha."""
  return significance.pair_test(bleu_a, bleu_b, reps_a_RxK, reps_b_RxK, alpha)['p_value'] < alpha


def share_ranked(
  seeds: int,
  experiments: int,
  seed: int = 0,
  gap_sd: float = 0.0,
  sentences: int = 400,
  n_samples: int = 200,
  alpha: float = significance.ALPHA,
) -> dict:
  """The share of `experiments` simulated A/B experiments (K = `seeds` per variant) that the test ranks, with
  the second variant better by `gap_sd` seed standard deviations (0: an A/A check), its Monte Carlo standard
  error, and the seed sd of BLEU that the generator gave."""
  rng = np.random.default_rng(seed)
  sd = _seed_sd_bleu(np.random.default_rng(seed + 1), sentences)
  offset = gap_sd * sd / _bleu_per_logit(np.random.default_rng(seed + 2), sentences)
  ranked, sds = 0, []
  for e in range(experiments):
    a, b = simulate(rng, seeds, sentences, (0.0, offset))
    bleu_a, bleu_b = seed_bleu(a), seed_bleu(b)
    sds += [bleu_a.std(ddof=1), bleu_b.std(ddof=1)]
    reps_a, reps_b = significance.sentence_replicates([a, b], n_samples, seed=1000 + e)
    ranked += pair_ranked(bleu_a, bleu_b, reps_a, reps_b, alpha)
  share = ranked / experiments
  return {
    'seeds': seeds,
    'experiments': experiments,
    'ranked': ranked,
    'share': share,
    'mc_se': float(np.sqrt(max(share, alpha) * (1 - max(share, alpha)) / experiments)),
    'gap_sd': gap_sd,
    'seed_sd_bleu': float(np.sqrt(np.mean(np.square(sds)))),
  }


def _seed_sd_bleu(rng, sentences: int, seeds: int = 64) -> float:
  """The generator's seed sd of corpus BLEU, from one large draw."""
  (stats,) = simulate(rng, seeds, sentences, (0.0,))
  return float(seed_bleu(stats).std(ddof=1))


def _bleu_per_logit(rng, sentences: int, step: float = 0.2, seeds: int = 16) -> float:
  """BLEU gained per unit of quality offset (finite difference on one shared draw of sentences)."""
  state = rng.bit_generator.state
  (low,) = simulate(rng, seeds, sentences, (0.0,))
  rng.bit_generator.state = state
  (high,) = simulate(rng, seeds, sentences, (step,))
  return float((seed_bleu(high).mean() - seed_bleu(low).mean()) / step)


def splits(
  stats: np.ndarray, half: int, n_samples: int = 1000, seed: int = 12345, alpha: float = significance.ALPHA
) -> dict:
  """Real runs of one variant (K x N x D sentence statistics of its K seeds): every split into two disjoint
  groups of `half` seeds each (unordered), compared by the pair test; the share ranked and each split."""
  k = stats.shape[0]
  if 2 * half > k or half < 2:
    raise ValueError(f'{k} seeds cannot be split into two groups of {half} (each group needs at least 2)')
  bleu = seed_bleu(stats)
  (reps,) = significance.sentence_replicates([stats], n_samples, seed)  # R x K, one draw for every split
  seen, rows = set(), []
  for a in itertools.combinations(range(k), half):
    for b in itertools.combinations([i for i in range(k) if i not in a], half):
      key = frozenset((a, b))
      if key in seen:
        continue
      seen.add(key)
      a_i, b_i = list(a), list(b)
      test = significance.pair_test(bleu[a_i], bleu[b_i], reps[:, a_i], reps[:, b_i], alpha)
      rows.append({'a': a, 'b': b, 'difference': test['difference'], 'p_value': test['p_value']})
  ranked = sum(r['p_value'] < alpha for r in rows)
  return {'half': half, 'splits': len(rows), 'ranked': ranked, 'share': ranked / len(rows), 'rows': rows}


def seed_plan(sd: float, differences: Sequence[float] = (0.5, 1.0), family: Sequence[int] = (1, 3, 10)) -> dict:
  """Seeds per variant for 80 % power against each difference, for a family of 1, 3 or 10 pairs (Bonferroni
  level alpha / m), at seed sd `sd` (the test set's own variance left out: it is small beside the seeds')."""
  return {m: {d: significance.seeds_needed(d, sd, 0.0, significance.ALPHA / m) for d in differences} for m in family}
