"""Measures of translations and their attention: monotonicity, entropy, repetition, paired bootstrap.

Pure functions on NumPy arrays and strings. Attention matrices are output tokens x source positions,
one row per output token (a distribution over the source), as `evaluation.Translation.attention` holds
them; each function says which rows and columns it expects.
"""

from __future__ import annotations

import collections
import contextlib
import os
from typing import Optional, Sequence

import numpy as np
import sacrebleu
from sacrebleu.significance import PairedTest


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
    a = np.asarray(a)
    rows = np.flatnonzero(a.sum(axis=1) > 0) if a.ndim == 2 else []
    if len(rows) < min_tokens or a.shape[1] < 1:
      skipped += 1
      continue
    rho = spearman(rows, np.argmax(a[rows], axis=1))
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


def attention_entropy(attentions: Sequence[np.ndarray], source_lengths: Optional[Sequence[int]] = None) -> dict:
  """Mean over output tokens of the entropy -sum_i a_i log a_i (nats) of their attention.

  Each matrix is output tokens (EOS row removed) x source positions including the source EOS; columns
  from source_lengths[k] on are padding and ignored. Rows are renormalised over the valid positions
  (local-p's Gaussian leaves them below 1); rows with no weight are skipped; zero weights add 0.
  'normalized' is the mean of H / log(S), S the valid positions (1 = uniform), over rows with S > 1.
  """
  entropies, normalized = [], []
  for k, a in enumerate(attentions):
    a = np.asarray(a, np.float64)
    valid = a.shape[1] if source_lengths is None else int(source_lengths[k])
    a = a[:, :valid]
    mass = a.sum(axis=1)
    p = a[mass > 0] / mass[mass > 0, None]
    h = -np.sum(p * np.log(np.where(p > 0, p, 1.0)), axis=1)
    entropies.extend(h.tolist())
    if valid > 1:
      normalized.extend((h / np.log(valid)).tolist())
  return {
    'entropy': float(np.mean(entropies)) if entropies else None,
    'normalized': float(np.mean(normalized)) if normalized else None,
    'tokens': len(entropies),
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


@contextlib.contextmanager
def _environment(name: str, value: str):
  old = os.environ.get(name)
  os.environ[name] = value
  try:
    yield
  finally:
    if old is None:
      del os.environ[name]
    else:
      os.environ[name] = old


def paired_bootstrap(
  systems: dict[str, Sequence[str]],
  references: Sequence[str],
  baseline: Optional[str] = None,
  n_samples: int = 1000,
  seed: int = 12345,
) -> dict:
  """sacrebleu's paired bootstrap resampling (Koehn 2004) of corpus BLEU for every system.

  Returns {'systems': {name: {'bleu', 'mean', 'ci', 'p_value'}}, 'signature': str}: each system's
  BLEU, the mean of its resampled BLEUs and the half-width of their 95% interval, and the p-value of its
  difference from `baseline` (None for the baseline itself, and for every system when baseline is None).
  All systems are resampled with the same sentence indices. The seed reaches sacrebleu through SACREBLEU_SEED (set
  while it runs); it must be positive, sacrebleu treats 0 as no seed. sacrebleu's p-value is
  1 / (n + 1) when the two BLEUs are exactly equal (every resampled difference 0, none above 0),
  so an observed difference of 0 gets p = 1.
  """
  if seed <= 0:
    raise ValueError(f'paired_bootstrap needs a positive seed, got {seed}')
  names = list(systems)
  if baseline is not None:
    if baseline not in systems:
      raise ValueError(f'baseline {baseline!r} is not among the systems {names}')
    names = [baseline] + [n for n in names if n != baseline]
  if not references:
    raise ValueError('paired_bootstrap needs at least one sentence')
  for name in names:
    if len(systems[name]) != len(references):
      raise ValueError(f'{name} has {len(systems[name])} hypotheses for {len(references)} references')
  with _environment('SACREBLEU_SEED', str(seed)):
    test = PairedTest(
      [(n, list(systems[n])) for n in names],
      {'BLEU': sacrebleu.BLEU()},
      [list(references)],
      test_type='bs',
      n_samples=n_samples,
    )
    signatures, scores = test()
  ((metric, signature),) = signatures.items()
  out = {'systems': {}, 'signature': str(signature)}
  pivot = scores[metric][0].score
  for name, r in zip(scores['System'], scores[metric]):
    p = r.p_value if baseline is not None and name != baseline else None
    if p is not None and r.score == pivot:
      p = 1.0
    out['systems'][name] = {
      'bleu': float(r.score),
      'mean': float(r.mean),
      'ci': float(r.ci),
      'p_value': None if p is None else float(p),
    }
  return out
