"""Corpus statistics for reports: pair counts, length distributions, padding."""

import dataclasses

import numpy as np

from attnmt.data import batching


def length_summary(lengths) -> dict:
  """Mean, median, max and percentiles of a list of lengths."""
  x = np.asarray(lengths, float)
  if not len(x):
    return {'count': 0}
  p = np.percentile(x, [5, 25, 75, 95, 99])
  return {
    'count': int(len(x)),
    'mean': round(float(x.mean()), 2),
    'median': float(np.median(x)),
    'max': int(x.max()),
    'min': int(x.min()),
    'p5': float(p[0]),
    'p25': float(p[1]),
    'p75': float(p[2]),
    'p95': float(p[3]),
    'p99': float(p[4]),
  }


def corpus_stats(corpus, tokenized: dict, src_tokenizer, tgt_tokenizer) -> dict:
  """Counts and length distributions (words and tokens, tokens without EOS) per split."""
  out = {
    'dataset_id': corpus.dataset_id,
    'source_lang': corpus.source_lang,
    'target_lang': corpus.target_lang,
    'build_report': corpus.build_report,
    'vocab_size': {'source': src_tokenizer.vocab_size, 'target': tgt_tokenizer.vocab_size},
    'splits': {},
  }
  for split, raw in corpus.splits.items():
    data = tokenized[split]
    out['splits'][split] = {
      'pairs': len(raw.source),
      'source_words': length_summary([len(s.split()) for s in raw.source]),
      'target_words': length_summary([len(t.split()) for t in raw.target]),
      'source_tokens': length_summary(data.src_len - 1),
      'target_tokens': length_summary(data.tgt_len - 1),
    }
  return out


def padding_report(src_len: np.ndarray, tgt_len: np.ndarray, options: batching.BatchOptions, seed: int) -> dict:
  """Padding fraction of the first training epoch with and without bucketing."""
  out = {}
  for bucket in (False, True):
    opts = dataclasses.replace(options, bucket=bucket)
    plan = batching.plan_epoch(src_len, tgt_len, opts, seed, 0, shuffle=True)
    out['bucketed' if bucket else 'unbucketed'] = round(batching.padding_fraction(plan, src_len, tgt_len, opts), 4)
  return out
