"""The verdicts on a set of analysed runs (add_significance): which run is better than which, over seeds and test
sentences, on the whole test set and on its longest sentences against the baseline, under one error budget."""

from __future__ import annotations

from typing import Optional

import numpy as np

from attnmt.analysis import stored, tables
from attnmt.compare import family, pair_tests, verdicts
from attnmt.training import evaluation


def default_baseline(results: list[dict], name: Optional[str] = None) -> Optional[str]:
  """The variant others are tested against: `name` when given (it must be one of `results`), else the first
  variant whose score does not attend (result['attends'] False), else None."""
  names = [r['variant'] for r in results]
  if name is not None:
    if name not in names:
      raise ValueError(f'--baseline {name} is not one of the variants compared: {", ".join(names)}')
    return name
  return next((r['variant'] for r in results if not stored.attends(r)), None)


LENGTH_SHARE = 0.2  # of alpha, for the longest-sentence verdicts against the baseline; the rest for the corpus


def add_significance(
  results: list[dict],
  texts: list[dict],
  baseline: Optional[str] = None,
  contrasts: str = 'all',
  delta: float = verdicts.DELTA,
) -> None:
  """Sets result['significance'] of every run from verdicts.compare_statistics, over seeds and test
  sentences: 'corpus' holds the per-seed greedy BLEU, mean, sd and t interval over seeds with the test set's
  variance; 'pairs' the contrasts of the declared family `contrasts` this run leads (difference, simultaneous
  interval, p, adjusted p, verdict, seeds to decide); 'by_length' the same per source-length bucket of
  result['greedy_bleu_by_length'] (mean over seeds, 95 % interval), and on the two longest buckets every run
  shares the contrast against the baseline.

  One page, one error budget: with a baseline and length buckets, LENGTH_SHARE of alpha goes to the length
  contrasts (Bonferroni over every bucket and variant tested) and the rest to the corpus family; otherwise
  the corpus family has all of it. `texts[k]` holds run k's 'hypotheses' ({'greedy': one list per seed}),
  'references' and 'sources'. Runs are compared only with runs that translated the same sentences; the
  baseline is the variant named `baseline`, else the first whose score does not attend (result['attends']
  False: `none`, or a user's score that declares so)."""
  groups = {}
  for k, g in enumerate(texts):
    groups.setdefault((tuple(g['references']), tuple(g['sources'])), []).append(k)
  for group, members in enumerate(groups.values()):
    names = [results[k]['variant'] for k in members]
    base = default_baseline([results[k] for k in members], baseline)
    refs, sources = texts[members[0]]['references'], texts[members[0]]['sources']
    stats = [
      np.stack([pair_tests.sentence_statistics(h, refs) for h in texts[k]['hypotheses']['greedy']]) for k in members
    ]
    rows = results[members[0]]['greedy_bleu_by_length']
    tested = tables.longest_shared_buckets([results[k] for k in members]) if base is not None and len(names) > 1 else []
    length_level = verdicts.ALPHA * LENGTH_SHARE if tested else 0.0
    seeds = [results[k]['seeds'] for k in members]  # same-numbered seeds pair (pair_tests.pair_test)
    whole = verdicts.compare_statistics(
      names, stats, base, contrasts=contrasts, delta=delta, level=verdicts.ALPHA - length_level, seeds=seeds
    )
    buckets = _buckets_against_baseline(rows, sources, stats, names, seeds, base, tested, length_level, delta)
    for m, k in enumerate(members):
      results[k]['significance'] = {
        key: whole[key]
        for key in ('method', 'designs', 'baseline', 'alpha', 'level', 'delta', 'contrasts', 'family_size', 'ranked')
      } | {
        'group': group,  # runs on other sentences are another group, never contrasted with this one
        'length_level': length_level,
        'corpus': {'sentences': len(refs), **whole['variants'][m]},
        'pairs': [p for p in whole['pairs'] if p['a'] == names[m]],
        'by_length': [b[m] for b in buckets],
      }


def _buckets_against_baseline(rows, sources, stats, names, seeds, baseline, tested, level, delta) -> list[list[dict]]:
  """Per source-length bucket (rows of greedy_bleu_by_length), per variant: mean BLEU over seeds on the
  bucket's sentences and its 95 % interval; on the `tested` buckets, each variant's contrast against
  `baseline` (verdicts.compare_scores, the buckets sharing `level`: Bonferroni over every bucket and variant
  tested): p, adjusted p, simultaneous interval and decision."""
  words = evaluation.source_words(sources)
  selections = [evaluation.in_bucket(words, row['lo'] - 1, row['hi']) for row in rows]  # rows hold lo + 1
  n_tested = sum(row['bucket'] in tested and len(s) > 1 for row, s in zip(rows, selections))
  out = []
  for row, selection in zip(rows, selections):
    per_seed = [[pair_tests.corpus_bleu(s[k, selection].sum(0)) for k in range(len(s))] for s in stats]
    jack = [pair_tests.jackknife(s, selection) for s in stats] if len(selection) > 1 else None
    contrasts = {}
    if jack is None:
      summaries = [s | {'interval': s['ci']} for s in map(pair_tests.seed_summary, per_seed)]
    elif row['bucket'] in tested:
      kw = dict(contrasts=baseline, delta=delta, level=level / n_tested, plan=False, seeds=seeds)
      result = verdicts.compare_scores(names, per_seed, baseline, jack, **kw)
      summaries, contrasts = result['variants'], {p['a']: p for p in result['pairs']}
    else:
      summaries = [pair_tests.variant_summary(x, j) for x, j in zip(per_seed, jack)]
    bucket = []
    for m, summary in enumerate(summaries):
      entry = {'bucket': row['bucket'], 'lo': row['lo'], 'hi': row['hi'], 'sentences': int(len(selection))}
      entry |= {'bleu': summary['mean'], 'per_seed': per_seed[m], 'interval': summary['interval']}
      entry |= {'p_value': None, 'p_adjusted': None, 'decision': None}
      p = contrasts.get(names[m])
      if p is not None:
        entry |= {'p_value': p['p_value'], 'p_adjusted': p['p_adjusted'], 'decision': p['decision']}
        entry['contrast_interval'] = None if p['decision'] == family.UNRANKED else p['interval']
        entry['equivalence_interval'] = None if p['decision'] == family.UNRANKED else p['equivalence_interval']
      bucket.append(entry)
    out.append(bucket)
  return out
