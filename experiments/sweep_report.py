"""A sweep's finished variants: which runs have finished with this exact config (`finished`, their results.json),
and the tables, plots and analysis written from them (`write`)."""

import json
import math
import os

from attnmt import plots
from attnmt.analysis import curves as curves_lib, files, html_report, report, stored, sweep_tables, tables
from attnmt.errors import ConfigError
from attnmt.training import checkpoints, lock, parallel


def finished(workdir, run_config):
  """The results of a finished run of exactly this config, or None (train_and_evaluate then resumes a run
  whose config differs only in resumable settings, such as more steps, and refuses any other)."""
  path = os.path.join(workdir, 'results.json')
  if not os.path.exists(path) or not os.path.exists(os.path.join(workdir, checkpoints.CONFIG_FILE)):
    return None
  if checkpoints.run_differences(workdir, run_config) != ([], []):  # any difference, resumable ones too
    return None
  fix = 'delete it and run the sweep again: the variant resumes from its checkpoint'
  try:
    with open(path) as f:
      row = json.load(f)
  except ValueError as e:
    raise ConfigError(f'{path} is damaged ({e}); {fix}') from None
  problem = _results_shape(row)
  if problem:
    raise ConfigError(f'{path} is not the results a training run writes ({problem}); {fix}')
  return row


# What the sweep's tables read from a results.json: per-seed lists as long as its seeds, and numbers.
RESULT_LISTS = ('test_bleu',) + tuple(k for _, k in sweep_tables.RESULT_COLUMNS)
RESULT_NUMBERS = ('parameters', 'tokens_per_s_per_seed', 'train_seconds')


def _results_shape(row) -> str:
  """'' for a results.json the tables can read, else what is wrong with it."""
  if not isinstance(row, dict):
    return f'a JSON {type(row).__name__}, not an object'
  if not isinstance(row.get('variant'), str):
    return "no 'variant' name"
  seeds = row.get('seeds')
  if not isinstance(seeds, list) or not seeds:
    return "no list of 'seeds'"
  for key in RESULT_LISTS:
    values = row.get(key, [0.0] * len(seeds)) if key != 'test_bleu' else row.get(key)
    if not isinstance(values, list) or len(values) != len(seeds):
      return f"'{key}' is not a list of one value per seed"
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in values):
      return f"'{key}' holds a value that is not a finite number"
  for key in RESULT_NUMBERS:
    if not isinstance(row.get(key), (int, float)) or isinstance(row.get(key), bool):
      return f"'{key}' is not a number"
  return ''


def write(config, root, rows, dirs, corpora=None, ahead=None):
  """The sweep's tables, plots and (with sweep.analyze) analysis from the results of its finished runs `rows` in
  `dirs`. Every file is written whole or not at all (files.write_text): shards and readers may look at any time.
  Seeds trained as separate runs (train.seeds as a sweep axis) are one variant in the tables."""
  pooled = sweep_tables.pool_seed_rows(rows)
  table = sweep_tables.results_table(pooled)
  if len(pooled) < len(rows):
    table += (
      f'\n\nThe {len(rows)} runs are {len(pooled)} variants: a run per seed (train.seeds as a sweep axis), pooled '
      "here; train min sums a variant's runs."
    )
  files.write_text(os.path.join(root, 'results.md'), table + '\n')
  files.write_text(os.path.join(root, 'results.csv'), sweep_tables.results_csv(pooled))
  strip = plots.seed_strip(
    sweep_tables.results_strip(pooled), os.path.join(root, 'results_seeds.png'), 'Test BLEU by seed'
  )
  print('\n' + table)
  outputs = [os.path.join(root, 'results.md'), os.path.join(root, 'results.csv'), strip]
  curves = {r['variant']: curves_lib.validation_records(d) for r, d in zip(rows, dirs)}
  if all(curves.values()):
    outputs.append(
      plots.learning_curves(
        curves,
        os.path.join(root, 'results_curves.png'),
        'Validation during training (mean over seeds)',
        dashed={r['variant'] for r in rows if not stored.attends(r)},
      )
    )
  if config.sweep.analyze:
    out, which, seeds_as_runs, options = analysis_arguments(config, root, len(pooled) < len(rows))
    results = report.analyze_runs(
      dirs,
      out,
      which,
      contrasts=config.sweep.contrasts,
      delta=config.sweep.delta,
      seeds_as_runs=seeds_as_runs,
      corpora=corpora,
      ahead=ahead,
      **options,
    )
    analysis_md = tables.analysis_table(results)  # seeds trained as runs: one row per variant they pool into
    files.write_text(os.path.join(out, 'analysis.md'), analysis_md + '\n')
    outputs.append(html_report.write_report(results, out))
    print('\nAnalysis of the test split (every seed decoded):\n' + analysis_md)
    print(tables.attention_verdict(results))
    written = ('analysis.md', 'bleu_by_seed.png', 'bleu_by_length.png', '<variant>/heatmap_<i>.png')
    outputs += [os.path.join(out, name) for name in written]
  print('\nWrote:\n  ' + '\n  '.join(outputs))


def write_finished(config, root, runs, shard):
  """sweep.report_only: the tables and analysis of the variants that have finished (results.json of this
  exact config), training nothing; the others are listed."""
  if shard is not None:
    raise ConfigError('sweep.report_only merges every shard: leave sweep.shard empty with it')
  rows = [(name, workdir, finished(workdir, run)) for name, workdir, run in runs]
  missing = [name for name, _, row in rows if row is None]
  done = [(workdir, row) for _, workdir, row in rows if row is not None]
  if missing:
    print(f'not finished (left out): {", ".join(missing)}')
  if not done:
    raise ConfigError(f'no variant of this sweep has finished under {root}; train first (without sweep.report_only)')
  print(f'reporting {len(done)} finished variant(s) of {len(runs)}')
  with lock.hold(root, 'sweep', enabled=parallel.is_main_process()):
    if parallel.is_main_process():
      write(config, root, [row for _, row in done], [workdir for workdir, _ in done])


def analysis_arguments(config, root: str, seeds_as_runs: bool) -> tuple[str, str, bool, dict]:
  """(out_dir, which, seeds_as_runs, options) of the sweep's analyze_runs, which analyze_ahead takes alike."""
  s = config.sweep
  options = dict(beam_size=s.beam_size, num_heatmaps=s.num_heatmaps, heatmap_min_words=s.heatmap_min_words)
  return os.path.join(root, 'analysis'), 'best', seeds_as_runs, options
