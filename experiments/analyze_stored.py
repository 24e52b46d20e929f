"""`analyze` from stored files, no run read: --from_translations (an analysis's statistics again from its per-seed
translations) and --from_scores (only the contrasts, from per-seed scores such as a sweep's results.csv)."""

import csv
import json
import os

from attnmt.analysis import files, pair_table, report, scoring, stored, tables
from attnmt.compare import verdicts
from experiments import analyze_inputs


def from_scores(path: str, baseline, contrasts: str, delta: float) -> None:
  with open(path, newline='', encoding='utf-8') as f:
    rows = list(csv.DictReader(f))
  if not rows or not {'variant', 'test_bleu_per_seed'} <= set(rows[0]):
    raise ValueError(f'{path} has no rows with the columns variant and test_bleu_per_seed; give a sweep\'s results.csv')
  names = [r['variant'] for r in rows]
  try:
    scores = [[float(x) for x in r['test_bleu_per_seed'].split()] for r in rows]
  except ValueError:
    raise ValueError(f'{path}: test_bleu_per_seed must hold numbers separated by spaces') from None
  if baseline is not None and baseline not in names:
    raise ValueError(f'--baseline {baseline} is not a variant of {path}; variants: {", ".join(names)}')
  baseline = baseline or next((r['variant'] for r in rows if not _attends(path, r)), None)
  seeds = _seed_numbers(path, rows, scores)
  compared = verdicts.compare_scores(names, scores, baseline, contrasts=contrasts, delta=delta, seeds=seeds)
  results = pair_table.scores_results(compared)
  print(f'From {path} ({len(names)} variant(s), per-seed scores only):\n' + pair_table.pairwise_text(results))


def _seed_numbers(path: str, rows: list[dict], scores: list[list[float]]):
  """Each row's seed numbers (results.csv's seeds column), which pair the contrasts of variants with the same
  seeds; None (every contrast unpaired) for a file without the column."""
  if 'seeds' not in rows[0]:
    return None
  try:
    seeds = [[int(x) for x in r['seeds'].split()] for r in rows]
  except ValueError:
    raise ValueError(f'{path}: the seeds column must hold integers separated by spaces') from None
  bad = [r['variant'] for r, s, v in zip(rows, seeds, scores) if len(s) != len(v)]
  if bad:
    raise ValueError(f'{path}: {", ".join(bad)} has another number of seeds than of test_bleu_per_seed; fix the row')
  return seeds


def _attends(path: str, row: dict) -> bool:
  """Whether the variant of a results.csv row attends: its attends column (sweep_tables.results_csv). A file written
  before the column existed reads as every variant attending (stored.attends), so only --baseline names one."""
  value = row.get('attends') or 'true'
  if value not in ('true', 'false'):
    raise ValueError(f"{path}: attends must be true or false, got {value!r} for {row['variant']}")
  return value == 'true'


def from_translations(path: str, out, baseline, pool_seeds: bool, contrasts: str, delta: float) -> None:
  out = analyze_inputs.output_dir(out)
  if out:
    analyze_inputs.check_recomputation(path, out, pool_seeds)
  results = scoring.analyze_translations(
    path, baseline=baseline, pool_seeds=pool_seeds, contrasts=contrasts, delta=delta
  )
  table = tables.analysis_table(results)
  print(f'From {path} ({len(results)} variant(s); no runs read):\n' + table)
  print(tables.attention_verdict(results))
  if out:
    files.write_text(os.path.join(out, 'analysis.json'), json.dumps(results, indent=1))  # what marks it ours
    files.write_text(os.path.join(out, 'analysis.md'), table + '\n')
    report.write_figures(results, out)
    written = 'analysis.md, analysis.json, bleu_by_length.png and bleu_by_seed.png'
    if pool_seeds:
      stored.save_doc(os.path.join(out, stored.FILE), stored.pool_seeds(stored.load(path)))
      written += f' and the pooled {stored.FILE}'
    print(f'\nWrote {written} under {out}')
