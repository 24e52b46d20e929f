"""Is the comparison of variants calibrated at K seeds? Simulated experiments with known truth, and A/A splits of
real runs.

`simulate` draws sentence-level BLEU statistics (sacrebleu's layout: hypothesis and reference length, 1- to
4-gram matches and totals) for V variants of K seeds each, from a generator with shared sentence difficulty,
a per-seed quality offset, per-seed sentence noise and, with `interaction_sd`, each variant's own effect on
each sentence (variants equal on average over sentences but not sentence by sentence: a large test-set
variance). `family_errors` runs `verdicts.compare_scores` on such experiments and counts the experiments
with any wrong claim over the whole family: a ranking of two identical variants, a ranking in the wrong
direction, or an equivalence claimed where the true difference is at least delta. `sequential_errors` does the
same for a design of rounds (attnmt.compare.sequential, through `rounds_errors`), `decision_rate` gives power
curves.

The seed design itself (paired seeds, unequal variances, families of 1 to 10 contrasts) is checked by
attnmt/compare/seed_design.py.

`splits` does the A/A check on real runs: the seeds of one variant split every way into groups, each split
compared as if the groups were variants, the whole family at once.
"""

from __future__ import annotations

import functools
import itertools
from typing import Sequence

import numpy as np

from attnmt.compare import verdicts, family, sequential, pair_tests

# The generator's defaults: BLEU near 20.7 with a seed sd near 0.8 on 400 sentences (measured over 32 seeds),
# about the main job's: most of the seed spread is the seed's overall quality, some its sentence noise.
BASE_LOGIT = -0.2  # unigram precision logit of an average sentence
SEED_LOGIT_SD = 0.04  # a seed's quality offset (all its sentences)
SENTENCE_LOGIT_SD = 0.5  # a seed's own noise on each sentence
DIFFICULTY_SD = 1.0  # sentence difficulty, shared by every system


def simulate(
  rng: np.random.Generator, seeds: int, sentences: int, offsets=(0.0, 0.0), interaction_sd: float = 0.0
) -> list[np.ndarray]:
  """One experiment: per variant a `seeds` x `sentences` x 10 array of sentence statistics. The variants share
  the sentences (reference lengths, difficulty); variant v's seeds get quality offsets N(offsets[v],
  SEED_LOGIT_SD) in logit space, the variant an effect N(0, interaction_sd) on each sentence (shared by its
  seeds: a new test set draws new effects), each seed and sentence its own noise."""
  ref_len = 4 + rng.poisson(20, sentences)
  difficulty = rng.normal(0, DIFFICULTY_SD, sentences)
  out = []
  for offset in offsets:
    quality = rng.normal(offset, SEED_LOGIT_SD, (seeds, 1))
    own = rng.normal(0, interaction_sd, sentences) if interaction_sd else 0.0
    noise = rng.normal(0, SENTENCE_LOGIT_SD, (seeds, sentences))
    p1 = 1 / (1 + np.exp(-(BASE_LOGIT + quality - difficulty + own + noise)))
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
  return np.array([pair_tests.corpus_bleu(s.sum(0)) for s in stats])


def true_differences(offsets: Sequence[float], sentences: int = 400, seeds: int = 64, draws: int = 8) -> np.ndarray:
  """The generator's expected corpus BLEU of each variant less the first's, by common random numbers over
  `draws` test sets of `seeds` seeds (the truth the simulated verdicts are judged against)."""
  rng = np.random.default_rng(987654)
  total = np.zeros(len(offsets))
  for _ in range(draws):
    state = rng.bit_generator.state
    means = []
    for offset in offsets:
      rng.bit_generator.state = state
      (stats,) = simulate(rng, seeds, sentences, (offset,))
      means.append(seed_bleu(stats).mean())
    total += np.array(means) - means[0]
  return total / draws


@functools.lru_cache(maxsize=None)
def bleu_per_logit(sentences: int = 400, step: float = 0.2) -> float:
  """BLEU gained per unit of quality offset near 0 (the generator's slope, from true_differences)."""
  return float(true_differences((0.0, step), sentences)[1] / step)


def wrong_claims(result: dict, truth: dict, delta: float) -> int:
  """Contrasts of a comparison whose claim is wrong, given the true difference a - b of each ('truth'
  keyed by (a, b) names): a ranking against the truth's sign (or of a true 0), or an equivalence where the
  true difference is at least delta."""
  wrong = 0
  for p in result['pairs']:
    d = truth[(p['a'], p['b'])] if (p['a'], p['b']) in truth else -truth[(p['b'], p['a'])]
    if p['decision'] == family.GREATER:
      wrong += d == 0 or np.sign(d) != np.sign(p['difference'])
    elif p['decision'] == family.EQUIVALENT:
      wrong += abs(d) >= delta
  return wrong


def pair_truth(names, true_bleu) -> dict:
  return {(a, b): true_bleu[i] - true_bleu[j] for i, a in enumerate(names) for j, b in enumerate(names) if i != j}


def experiment(rng, seeds, sentences, offsets, interaction_sd=0.0):
  """Per variant the per-seed BLEU (K) and the jackknife over sentences (K x N) of one simulated experiment."""
  stats = simulate(rng, seeds, sentences, offsets, interaction_sd)
  return [seed_bleu(s) for s in stats], [pair_tests.jackknife(s) for s in stats]


def family_errors(
  seeds: int,
  experiments: int,
  offsets: Sequence[float] = (0.0, 0.0, 0.0, 0.0, -1.0),
  true_bleu: Sequence[float] | None = None,
  sentences: int = 400,
  interaction_sd: float = 0.0,
  delta: float = family.DELTA,
  contrasts: str = 'all',
  seed: int = 0,
) -> dict:
  """The share of `experiments` with any wrong claim over the family (and its Monte Carlo standard error), the
  share with any decision at all, at K = `seeds`. `true_bleu` (per variant) defaults to exact equality for
  equal offsets and true_differences otherwise."""
  names = [f'v{i}' for i in range(len(offsets))]
  if true_bleu is None:
    true_bleu = _default_truth(offsets, sentences)
  truth = pair_truth(names, true_bleu)
  rng = np.random.default_rng(seed)
  wrong = decided = 0
  for _ in range(experiments):
    bleu, jack = experiment(rng, seeds, sentences, offsets, interaction_sd)
    result = verdicts.compare_scores(names, bleu, None, jack, contrasts=contrasts, delta=delta, plan=False)
    wrong += wrong_claims(result, truth, delta) > 0
    decided += any(p['decision'] in (family.GREATER, family.EQUIVALENT) for p in result['pairs'])
  return error_share(wrong, experiments) | {'seeds': seeds, 'decided_share': decided / experiments}


def _default_truth(offsets, sentences) -> np.ndarray:
  distinct = sorted(set(offsets))
  if len(distinct) == 1:
    return np.zeros(len(offsets))
  by_offset = dict(zip(distinct, true_differences(distinct, sentences)))
  return np.array([by_offset[o] for o in offsets])


def error_share(count: int, n: int) -> dict:
  share = count / n
  return {
    'experiments': n,
    'wrong': int(count),
    'share': float(share),
    'mc_se': float(np.sqrt(max(share, 0.05) * 0.95 / n)),
  }


def sequential_errors(
  design,
  experiments: int,
  offsets: Sequence[float] = (0.0, 0.0, 0.0, 0.0, -1.0),
  true_bleu: Sequence[float] | None = None,
  sentences: int = 400,
  interaction_sd: float = 0.0,
  seed: int = 0,
) -> dict:
  """`family_errors` for a design of rounds (sequential.Design): every look as `sequential.replay` makes it,
  from seeds drawn all at once (a seed's BLEU and jackknife do not depend on the others), paired by seed as a
  design's looks are (valid, if no more powerful, for the generator's independent seeds); `rounds_errors`'
  figures."""
  names = [f'v{i}' for i in range(len(offsets))]
  truth = pair_truth(names, _default_truth(offsets, sentences) if true_bleu is None else true_bleu)
  rng = np.random.default_rng(seed)

  def draw():
    return experiment(rng, design.schedule[-1], sentences, offsets, interaction_sd)

  return rounds_errors(design, names, truth, draw, experiments)


def rounds_errors(design, names, truth: dict, draw, experiments: int, paired: bool = True) -> dict:
  """Over `experiments` draws of (per-seed scores, jackknife rows) for every seed of `design`: the share with
  any wrong claim over all its looks, the share in which every contrast was decided by each look, and the
  mean seeds per variant trained until all were decided or the cap."""
  by_look, wrong, trained = np.zeros(design.rounds), 0, 0
  for _ in range(experiments):
    bleu, jack = draw()
    any_wrong = False
    for look in sequential.looks(design, names, bleu, jack, False, paired):
      any_wrong |= wrong_claims(look['comparison'], truth, design.delta) > 0
      if not sequential.open_contrasts(look):
        by_look[look['look'] - 1 :] += 1
        break
    trained += look['seeds']
    wrong += any_wrong
  return error_share(wrong, experiments) | {
    'decided_by_look': (by_look / experiments).tolist(),
    'mean_seeds': trained / experiments,
  }


def decision_rate(seeds: int, gap_sd: float, experiments: int, level: float, delta_sd: float, seed: int = 0) -> dict:
  """Power: the share of two-variant experiments whose contrast is decided (ranked or equivalent) at
  `level`, with a true gap of `gap_sd` seed sds and a margin of `delta_sd` seed sds; also the share ranked."""
  rng = np.random.default_rng(seed)
  sd = _seed_sd(sentences=400)
  offset = gap_sd * sd / bleu_per_logit()
  delta = delta_sd * sd
  decided = ranked = 0
  for _ in range(experiments):
    bleu, jack = experiment(rng, seeds, 400, (offset, 0.0))
    p = verdicts.compare_scores(['a', 'b'], bleu, None, jack, delta=delta, level=level, plan=False)['pairs'][0]
    decided += p['decision'] in (family.GREATER, family.EQUIVALENT)
    ranked += p['decision'] == family.GREATER
  return {'seeds': seeds, 'gap_sd': gap_sd, 'decided': decided / experiments, 'ranked': ranked / experiments}


@functools.lru_cache(maxsize=None)
def _seed_sd(sentences: int, seeds: int = 64) -> float:
  """The generator's seed sd of corpus BLEU, from one large draw."""
  (stats,) = simulate(np.random.default_rng(4242), seeds, sentences, (0.0,))
  return float(seed_bleu(stats).std(ddof=1))


def splits(stats: np.ndarray, groups: int, size: int, delta: float = family.DELTA, limit: int = 0) -> dict:
  """Real runs of one variant (K x N x D sentence statistics of its K seeds): every way to pick `groups`
  disjoint, unordered groups of `size` seeds (up to `limit` of them, 0: all), each compared as `groups`
  variants, every pair a family. The share of splits with any pair ranked (every ranking is wrong: the
  groups are one variant), and each split's smallest adjusted p."""
  k = stats.shape[0]
  if size < 2 or groups < 2 or groups * size > k:
    raise ValueError(f'{k} seeds cannot be split into {groups} groups of {size} (each group needs at least 2)')
  bleu = seed_bleu(stats)
  jack = pair_tests.jackknife(stats)
  names = [f'group {g + 1}' for g in range(groups)]
  rows = []
  for split in _partitions(list(range(k)), groups, size):
    groups = [list(g) for g in split]  # different seeds of one variant: unpaired
    result = verdicts.compare_scores(
      names, [bleu[g] for g in groups], None, [jack[g] for g in groups], delta=delta, plan=False, seeds=groups
    )
    ranked = sum(p['decision'] == family.GREATER for p in result['pairs'])
    rows.append(
      {'groups': [list(g) for g in split], 'ranked': ranked, 'p_min': min(p['p_adjusted'] for p in result['pairs'])}
    )
    if limit and len(rows) >= limit:
      break
  wrong = sum(r['ranked'] > 0 for r in rows)
  return {'groups': groups, 'size': size, 'splits': len(rows), 'wrong': wrong, 'share': wrong / len(rows), 'rows': rows}


def _partitions(items: list, groups: int, size: int):
  """Every set of `groups` disjoint unordered groups of `size` items (the rest left out), each once."""
  if groups == 0:
    yield []
    return
  for first in itertools.combinations(items, size):
    rest = [i for i in items if i not in first and i > first[0]]  # later groups start after this one's first
    for others in _partitions(rest, groups - 1, size):
      yield [first] + others


def seed_pairing(names: Sequence[str], bleu: Sequence[Sequence[float]], seeds: Sequence[Sequence[int]]) -> list[dict]:
  """How much same-numbered seeds of two variants move together, on real runs: per pair of variants with at
  least 3 seeds in common, the correlation of their per-seed BLEU over those seeds and the variance of the
  per-seed difference as a share of the unpaired one (var(a - b) / (var(a) + var(b)): 1 without correlation,
  below 1 where pairing gains)."""
  rows = []
  for i, j in itertools.combinations(range(len(names)), 2):
    common = sorted(set(seeds[i]) & set(seeds[j]))
    if len(common) < 3:
      continue
    a = np.array([bleu[i][list(seeds[i]).index(s)] for s in common])
    b = np.array([bleu[j][list(seeds[j]).index(s)] for s in common])
    spread = a.var(ddof=1) + b.var(ddof=1)
    rows.append(
      {
        'a': names[i],
        'b': names[j],
        'seeds': len(common),
        'correlation': float(np.corrcoef(a, b)[0, 1]) if spread > 0 else None,
        'variance_ratio': float((a - b).var(ddof=1) / spread) if spread > 0 else None,
      }
    )
  return rows
