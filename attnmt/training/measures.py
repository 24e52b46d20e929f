"""Measures of translations and their attention: monotonicity, entropy, maximum weight, coverage
deviation, repetition, paired bootstrap.

Pure functions on NumPy arrays and strings. Attention matrices are output tokens x source positions,
one row per output token (a distribution over the source), as `evaluation.SplitTranslation.attention` holds
them; each function says which rows and columns it expects. `AttentionStatistics` pools the four
attention measures over sentences added one at a time, so that a corpus is measured batch by batch.
"""

from __future__ import annotations

import collections
from typing import Optional, Sequence

import numpy as np


def average_ranks(x) -> np.ndarray:
  """Ranks 1..n of the values of x, tied values sharing the mean of their ranks."""
  x = np.asarray(x)
  order = np.argsort(x, kind='stable')
  sorted_x = x[order]
  starts_group = np.r_[True, sorted_x[1:] != sorted_x[:-1]]
  group = np.cumsum(starts_group) - 1
  first = np.flatnonzero(starts_group)
  past_last = np.r_[first[1:], len(x)]
  ranks = np.empty(len(x), float)
  ranks[order] = ((first + 1 + past_last) / 2.0)[group]  # mean of the 1-based ranks first+1..past_last
  return ranks


def spearman(x, y) -> float:
  """Spearman's rank correlation: the Pearson correlation of the average ranks of x and y.

  NaN where it is undefined: fewer than 2 values, or either ranking constant."""
  rx, ry = average_ranks(x), average_ranks(y)
  if len(rx) != len(ry):
    raise ValueError(f'spearman of {len(rx)} against {len(ry)} values')
  dx, dy = rx - rx.mean(), ry - ry.mean()
  norm = np.sqrt(np.dot(dx, dx) * np.dot(dy, dy))
  if len(rx) < 2 or norm == 0.0:
    return float('nan')
  return float(np.clip(np.dot(dx, dy) / norm, -1.0, 1.0))


def sentence_monotonicity(a_TxS: np.ndarray, min_tokens: int = 3) -> Optional[float]:
  """spearman(t, argmax_i a[t, i]) over the rows with any weight of one matrix (EOS row and source EOS
  column removed): None when the sentence is skipped (fewer than `min_tokens` such rows, or no column), NaN when the Spearman is undefined
  (every peak at one position, as under uniform attention, or a single source token)."""
  a = np.asarray(a_TxS)
  if a.ndim != 2 or a.shape[1] < 1:
    return None
  rows = np.flatnonzero(a.sum(axis=1) > 0)  # rows with no weight (hard attention to nothing) have no peak
  if len(rows) < min_tokens:
    return None
  return spearman(rows, np.argmax(a[rows], axis=1))


def attention_monotonicity(attentions: Sequence[np.ndarray], min_tokens: int = 3) -> dict:
  """Mean over sentences of spearman(t, argmax_i a[t, i]): 1 when attention moves forward through the
  source with every output token, -1 backwards, near 0 when its peak does not follow the output.

  Each matrix is output tokens x source tokens with the EOS row and the source EOS column removed.
  Rows with no weight (hard monotonic attention that attends nothing, or attends the removed EOS) have
  no peak and are left out. Sentences with fewer than `min_tokens` rows left (or no source token) are
  skipped; a sentence whose Spearman is undefined (every peak at one position, or a single source
  token) counts as 0.
  Returns {'monotonicity': mean or None, 'sentences': measured, 'undefined': of those, 'skipped': n}.
  """
  values, undefined, skipped = [], 0, 0
  for a in attentions:
    rho = sentence_monotonicity(a, min_tokens)
    if rho is None:
      skipped += 1
      continue
    if np.isnan(rho):
      undefined += 1
      rho = 0.0
    values.append(rho)
  return {
    'monotonicity': float(np.mean(values)) if values else None,
    'sentences': len(values),
    'undefined': undefined,
    'skipped': skipped,
  }


def row_entropies(a_TxS: np.ndarray) -> np.ndarray:
  """-sum_i p_i log p_i (nats) of every row that has weight, p the row divided by its sum (local-p's
  Gaussian leaves rows below 1); zero weights add 0. Rows without weight are left out."""
  a = np.asarray(a_TxS, np.float64)
  mass = a.sum(axis=1)
  p = a[mass > 0] / mass[mass > 0, None]
  return -np.sum(p * np.log(np.where(p > 0, p, 1.0)), axis=1)


def row_max_weights(a_TxS: np.ndarray) -> np.ndarray:
  """max_i a[t, i] of every row that has weight: 1 when a row puts everything on one position, 1/S when it
  spreads evenly over S. The weights as the model applied them (local-p's Gaussian included, not
  renormalised). Rows without weight are left out, as in row_entropies."""
  a = np.asarray(a_TxS, np.float64)
  if a.shape[1] == 0:
    return np.zeros(0)
  return a.max(axis=1)[a.sum(axis=1) > 0]


def coverage_deviations(a_TxS: np.ndarray) -> np.ndarray:
  """|sum_t a[t, i] - 1| of every column i: how far the total weight source position i received over all
  output steps is from 1 (the coverage vector of Tu et al. 2016 at the end of the sentence, against one
  visit per position). All 0 for a one-to-one alignment of as many output steps as source positions;
  |T/S - 1| everywhere under uniform attention over S positions for T steps."""
  return np.abs(np.asarray(a_TxS, np.float64).sum(axis=0) - 1.0)


def _valid_columns(attentions: Sequence[np.ndarray], source_lengths: Optional[Sequence[int]]):
  """(matrix without its padding columns, valid column count) of every matrix."""
  for k, a in enumerate(attentions):
    a = np.asarray(a, np.float64)
    valid = a.shape[1] if source_lengths is None else int(source_lengths[k])
    yield a[:, :valid], valid


def attention_entropy(attentions: Sequence[np.ndarray], source_lengths: Optional[Sequence[int]] = None) -> dict:
  """Mean over output tokens of the entropy -sum_i a_i log a_i (nats) of their attention.

  Each matrix is output tokens (EOS row removed) x source positions including the source EOS; columns
  from source_lengths[k] on are padding and ignored. Rows are renormalised over the valid positions
  (local-p's Gaussian leaves them below 1); rows with no weight are skipped; zero weights add 0.
  'normalized' is the mean of H / log(S), S the valid positions (1 = uniform), over rows with S > 1.
  """
  entropies, normalized = [], []
  for a, valid in _valid_columns(attentions, source_lengths):
    h = row_entropies(a)
    entropies.extend(h.tolist())
    if valid > 1:
      normalized.extend((h / np.log(valid)).tolist())
  return {
    'entropy': float(np.mean(entropies)) if entropies else None,
    'normalized': float(np.mean(normalized)) if normalized else None,
    'tokens': len(entropies),
  }


def attention_max_weight(attentions: Sequence[np.ndarray], source_lengths: Optional[Sequence[int]] = None) -> dict:
  """Mean over output tokens of their largest attention weight (row_max_weights), pooled over sentences.

  The matrices as attention_entropy takes them (EOS row removed; columns from source_lengths[k] on are
  padding). Returns {'max_weight': mean or None, 'tokens': rows measured}."""
  values = [row_max_weights(a) for a, _ in _valid_columns(attentions, source_lengths)]
  values = np.concatenate(values) if values else np.zeros(0)
  return {'max_weight': float(values.mean()) if len(values) else None, 'tokens': len(values)}


def coverage_deviation(attentions: Sequence[np.ndarray], source_lengths: Optional[Sequence[int]] = None) -> dict:
  """Mean over valid source positions of |total weight received - 1| (coverage_deviations), pooled over
  the source positions of all sentences.

  Each matrix holds every output step, the EOS row included (its attention is part of what the source
  received), x source positions including the source EOS; columns from source_lengths[k] on are padding.
  Returns {'coverage_deviation': mean or None, 'positions': source positions measured}."""
  values = [coverage_deviations(a) for a, _ in _valid_columns(attentions, source_lengths)]
  values = np.concatenate(values) if values else np.zeros(0)
  return {'coverage_deviation': float(values.mean()) if len(values) else None, 'positions': len(values)}


class AttentionStatistics:
  """Entropy, maximum weight, coverage deviation and monotonicity pooled over sentences added one at a
  time, so that a corpus is measured batch by batch without keeping its matrices. The conventions of the
  functions above, each sentence given as one full matrix:

  - entropy and maximum weight: mean over output tokens, the EOS row left out (attention_entropy,
    attention_max_weight);
  - coverage deviation: mean over source positions, every output step included (coverage_deviation);
  - monotonicity: mean over sentences, the EOS row and the source EOS column left out; sentences whose
    Spearman is undefined count 0 and are counted in 'undefined' (attention_monotonicity).

  Under uniform attention over S positions for T steps (score `none`: its decoder reads the mean
  annotation, every valid position weighing 1/S) they are log S, 1/S, |T/S - 1| and 0, every sentence
  undefined.
  """

  def __init__(self, min_tokens: int = 3):
    self.min_tokens = min_tokens
    self.sums = collections.Counter()

  def add(self, weights_TxS: np.ndarray, ends_with_eos: bool = True) -> None:
    """One sentence: every output step x every valid source position (the source EOS last, padding
    columns removed). `ends_with_eos`: the last row is the step that output EOS (always under teacher
    forcing; not for a greedy output the length budget cut off)."""
    a = np.asarray(weights_TxS, np.float64)
    rows = a[:-1] if ends_with_eos and len(a) else a
    s = self.sums
    h = row_entropies(rows)
    s['entropy'] += h.sum()
    s['tokens'] += len(h)
    if a.shape[1] > 1:
      s['normalized'] += (h / np.log(a.shape[1])).sum()
      s['normalized_tokens'] += len(h)
    s['max_weight'] += row_max_weights(rows).sum()
    c = coverage_deviations(a)
    s['coverage_deviation'] += c.sum()
    s['positions'] += len(c)
    rho = sentence_monotonicity(rows[:, :-1], self.min_tokens)
    if rho is None:
      s['skipped'] += 1
    else:
      s['undefined'] += int(np.isnan(rho))
      s['monotonicity'] += 0.0 if np.isnan(rho) else rho
      s['sentences'] += 1

  def result(self) -> dict:
    """The means (None where nothing was measured) and their counts: 'monotonicity' over 'sentences' (of
    them 'undefined'; 'skipped' too short), 'entropy', 'normalized' and 'max_weight' over 'tokens',
    'coverage_deviation' over 'positions'."""
    s = self.sums

    def mean(key, count):
      return float(s[key] / s[count]) if s[count] else None

    return {
      'monotonicity': mean('monotonicity', 'sentences'),
      'sentences': s['sentences'],
      'undefined': s['undefined'],
      'skipped': s['skipped'],
      'entropy': mean('entropy', 'tokens'),
      'normalized': mean('normalized', 'normalized_tokens'),
      'tokens': s['tokens'],
      'max_weight': mean('max_weight', 'tokens'),
      'coverage_deviation': mean('coverage_deviation', 'positions'),
      'positions': s['positions'],
    }


def has_repeated_ngram(tokens: Sequence[str], n: int = 4, min_count: int = 3) -> bool:
  """Whether some n-gram occurs at least min_count times in tokens (occurrences may overlap)."""
  counts = collections.Counter(tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))
  return any(c >= min_count for c in counts.values())


def repetition_rate(texts: Sequence[str], n: int = 4, min_count: int = 3) -> float:
  """Fraction of texts (whitespace tokens) in which some n-gram occurs min_count or more times."""
  if not texts:
    return 0.0
  return sum(has_repeated_ngram(t.split(), n, min_count) for t in texts) / len(texts)
