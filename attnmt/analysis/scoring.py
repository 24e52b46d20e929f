"""What translations alone answer, without the model: each seed's BLEU, chrF, chrF++, repetition and BLEU by
source length (add_scores), pooled over seeds, and the whole analysis recomputed from a stored translations file
(analyze_translations: `analyze --from_translations`)."""

from __future__ import annotations

from typing import Optional

import numpy as np

from attnmt.analysis import run_verdicts, stored
from attnmt.compare import verdicts
from attnmt.training import evaluation, measures


def add_scores(result: dict, mode: str, hyps: list[str], refs: list[str], srcs: list[str]) -> None:
  """Appends one seed's scores of `hyps` (decoded in `mode`: greedy or beam) to result's per-seed lists:
  '<mode>_bleu', '_chrf', '_chrfpp', '_repetition' and '_bleu_by_length_by_seed'; sets 'bleu_signature'."""
  scores = evaluation.bleu_chrf(hyps, refs)
  for key in ('bleu', 'chrf', 'chrfpp'):
    result.setdefault(f'{mode}_{key}', []).append(scores[key])
  result.setdefault(f'{mode}_repetition', []).append(measures.repetition_rate(hyps))
  result.setdefault(f'{mode}_bleu_by_length_by_seed', []).append(evaluation.bleu_by_length(hyps, refs, srcs))
  result['bleu_signature'] = scores['bleu_signature']


def pool_by_length(per_seed: list[list[dict]]) -> list[dict]:
  """Each length bucket's BLEU pooled over seeds: 'bleu' is the mean, 'per_seed' the seeds' values (every
  seed translates the same sentences, so the buckets agree)."""
  pooled = []
  for rows in zip(*per_seed):
    values = [r['bleu'] for r in rows]
    pooled.append({**rows[0], 'bleu': float(np.mean(values)), 'per_seed': values})
  return pooled


def analyze_translations(
  path: str,
  baseline: Optional[str] = None,
  pool_seeds: bool = False,
  contrasts: str = 'all',
  delta: float = verdicts.DELTA,
) -> list[dict]:
  """The analysis results (as analyze_runs returns them, less what needs the model: attention, beam, AER)
  recomputed from a stored translations file (attnmt.analysis.stored); `pool_seeds`: single-seed runs of one
  variant pooled first (stored.pool_seeds)."""
  return analyze_document(stored.load(path), path, baseline, pool_seeds, contrasts, delta)


def analyze_document(
  doc: dict,
  source: str,
  baseline: Optional[str] = None,
  pool_seeds: bool = False,
  contrasts: str = 'all',
  delta: float = verdicts.DELTA,
) -> list[dict]:
  """analyze_translations of a translations document already in memory (stored.load's or stored.document's);
  `source` names where it came from."""
  if pool_seeds:
    doc = stored.pool_seeds(doc)
  refs, srcs = doc['references'], doc['sources']
  results, texts = [], []
  for v in doc['variants']:
    result = {'variant': v['variant'], 'seeds': v['seeds'], 'source': source, 'attends': stored.attends(v)}
    if pool_seeds:
      result['seeds_as_runs'] = True  # each seed trained as its own run (train.seeds as a sweep axis)
    for hyps in v['greedy']:
      add_scores(result, 'greedy', hyps, refs, srcs)
    result['greedy_bleu_by_length'] = pool_by_length(result['greedy_bleu_by_length_by_seed'])
    results.append(result)
    texts.append({'hypotheses': {'greedy': v['greedy']}, 'references': refs, 'sources': srcs})
  run_verdicts.add_significance(results, texts, baseline, contrasts, delta)
  return results
