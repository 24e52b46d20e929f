"""BLEU, chrF and chrF++ of a list of outputs from sacrebleu's sentence statistics, extracted once per list.

sacrebleu scores a corpus by extracting every sentence's sufficient statistics (n-gram matches and totals,
lengths) and summing them (`corpus_score` = `_aggregate_and_compute` of `_extract_corpus_statistics`). An
analysis asks many questions of the same outputs: the corpus scores, BLEU of each source-length bucket, each
sentence's BLEU for the report, the jackknife of the significance tests, and the same again when the seeds'
runs are pooled. Each of them, asked of sacrebleu directly, tokenises and counts the outputs again. Here
each metric's statistics of a (hypotheses, references) pair are extracted once, kept for the last lists
scored (`_KEPT_BYTES`), and every score is sacrebleu's own `_compute_score_from_stats` of a sum of them:
the same number sacrebleu's `corpus_score` gives (tests/training/test_translation_scores.py).

The metrics: sacrebleu's BLEU() and CHRF() with their defaults, and chrF++ (Popović 2017), CHRF(word_order=2).
"""

from __future__ import annotations

import collections
import hashlib
from typing import Optional, Sequence

import numpy as np
import sacrebleu

# Each metric from the references it holds (None: none, for scores from statistics alone).
_METRICS = {
  'bleu': lambda references: sacrebleu.BLEU(references=references),
  'chrf': lambda references: sacrebleu.CHRF(references=references),
  'chrfpp': lambda references: sacrebleu.CHRF(word_order=2, references=references),
}
METRICS = tuple(_METRICS)


def _build(metric: str, references: Optional[list] = None):
  if metric not in _METRICS:
    raise ValueError(f'unknown metric {metric!r}; use one of {", ".join(METRICS)}')
  return _METRICS[metric](references)


_SCORERS: dict = {}  # references (a tuple) -> {metric: the sacrebleu metric holding them}, most recently used last
_SCORERS_KEPT = 4


def scorer(metric: str, references: Sequence[str]):
  """sacrebleu's `metric` built with `references` (sacrebleu then tokenises and counts the references once,
  not at every list scored against them), kept for the last few reference lists."""
  key = tuple(references)
  metrics = _SCORERS.pop(key, {})
  if metric not in metrics:
    metrics[metric] = _build(metric, [list(references)])
  _SCORERS[key] = metrics
  while len(_SCORERS) > _SCORERS_KEPT:
    del _SCORERS[next(iter(_SCORERS))]
  return metrics[metric]


_BARE = {m: _build(m) for m in METRICS}  # their settings are read, never changed, by scores from statistics

_STATISTICS: collections.OrderedDict = collections.OrderedDict()  # digest -> {metric: N x D array}
_KEPT_BYTES = 256 << 20  # ~300 KB per 1,600 sentences and metric: hundreds of seeds' outputs


def _digest(hypotheses: Sequence[str], references: Sequence[str]) -> bytes:
  h = hashlib.blake2b(digest_size=20)
  for texts in (hypotheses, references):
    h.update(len(texts).to_bytes(8, 'little'))
    for text in texts:
      b = text.encode('utf-8', 'surrogatepass')
      h.update(len(b).to_bytes(8, 'little'))
      h.update(b)
  return h.digest()


def sentence_statistics(hypotheses: Sequence[str], references: Sequence[str], metric: str = 'bleu') -> np.ndarray:
  """N x D integers, read-only: sacrebleu's `metric` statistics of every sentence (for BLEU the n-gram matches
  and totals, hypothesis and reference lengths); summed over sentences they give the corpus score
  (`score`). Extracted once per (hypotheses, references, metric), then kept."""
  if len(hypotheses) != len(references):
    raise ValueError(f'{len(hypotheses)} hypotheses for {len(references)} references')
  if not references:
    raise ValueError('no sentences to score')
  key = _digest(hypotheses, references)
  entry = _STATISTICS.pop(key, {})
  if metric not in entry:
    rows = scorer(metric, references)._extract_corpus_statistics(list(hypotheses), None)
    stats = np.asarray(rows, np.int64).reshape(len(hypotheses), -1)
    stats.flags.writeable = False
    entry[metric] = stats
  _STATISTICS[key] = entry
  total = sum(a.nbytes for e in _STATISTICS.values() for a in e.values())
  while total > _KEPT_BYTES and len(_STATISTICS) > 1:
    total -= sum(a.nbytes for a in _STATISTICS.popitem(last=False)[1].values())
  return entry[metric]


def score(metric: str, summed) -> float:
  """sacrebleu's corpus `metric` from statistics summed over sentences (a row of `sentence_statistics`' sum)."""
  bare = _BARE[metric] if metric in _BARE else _build(metric)  # _build names an unknown metric
  return float(bare._compute_score_from_stats(np.rint(summed).astype(np.int64).tolist()).score)


def corpus_score(
  hypotheses: Sequence[str], references: Sequence[str], metric: str = 'bleu', rows: Optional[np.ndarray] = None
) -> float:
  """sacrebleu's corpus `metric` of the outputs, or of the sentences at positions `rows` only."""
  stats = sentence_statistics(hypotheses, references, metric)
  return score(metric, (stats if rows is None else stats[rows]).sum(0))


def bleu_signature(references: Sequence[str]) -> str:
  """The signature of the BLEU these scores are (it names the sacrebleu version and the settings)."""
  return str(scorer('bleu', references).get_signature())
