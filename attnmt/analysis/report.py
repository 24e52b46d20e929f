"""analyze_runs: the analysis of a set of run directories, and what it writes. Each run's own part
(run_analysis.analyze_run: translations, BLEU/chrF, BLEU by length, heatmaps, AER, attention monotonicity,
entropy, maximum weight and coverage deviation, repetition), the declared family's verdicts on their differences
(run_verdicts, attnmt.compare.verdicts), runs trained a seed each pooled into their variants (pool_runs), and the
files: analysis.json, the figures, translations.json.gz and the sentences report.html embeds."""

from __future__ import annotations

import json
import os
from typing import Callable, Collection, Optional

from attnmt import data, plots
from attnmt.analysis import files, gold, inspection, run_analysis, run_verdicts, scoring, sentences, stored
from attnmt.compare import family, verdicts
from attnmt.errors import InputError
from attnmt.training import checkpoints
from attnmt.training import results as run_results

# What a pooled variant gathers from its runs, seed by seed, beside what its translations give
PER_SEED = ('beam_bleu', 'beam_chrf', 'beam_chrfpp', 'beam_repetition', 'aer', 'attention_by_seed')


def analyze_runs(
  workdirs: list[str],
  out_dir: Optional[str],
  which: str = 'best',
  report_sentences: int = 200,
  baseline: Optional[str] = None,
  contrasts: str = 'all',
  delta: float = verdicts.DELTA,
  seeds_as_runs: bool = False,
  corpora: Optional[dict] = None,
  ahead: Optional[dict] = None,
  **options,
) -> list[dict]:
  """run_analysis.analyze_run for every directory, the significance of their differences
  (run_verdicts.add_significance), the figure comparing them (BLEU by source length), and sentences.json: the
  sentences the HTML report embeds (sentences.select_sentences, at most `report_sentences` plus the heatmap
  sentences; sentences.embedded_sentences). With `out_dir` None the results are only returned (attnmt.compare):
  nothing is written. `seeds_as_runs`: the runs are seeds of variants trained a seed each: what is returned, and
  written as analysis.json, is the analysis of the variants they pool into (pool_runs), each run's own part is
  written to <out_dir>/<run>/analysis.json, and heatmaps are drawn for the first run of each pooled variant only,
  as a run of several seeds draws them for its first seed. `corpora` (data.prepare_once): corpora the caller
  prepared already (a sweep's); each data config's corpus is prepared once in any case. `ahead`: runs analysed
  earlier by analyze_ahead with the same arguments, reused (and taken out of it)."""
  results, texts, views = [], [], []
  corpora = {} if corpora is None else corpora
  split = options.get('split', 'test')
  configs = [checkpoints.load_config(w) for w in workdirs]
  named = [inspection.pool_name(c) if seeds_as_runs else run_results.variant_name(c) for c in configs]
  family.contrast_pairs(list(dict.fromkeys(named)), contrasts)  # the declared family, before anything is decoded
  if options.get('heatmap_sentences'):  # every run's split size, before anything is decoded
    for workdir, config in zip(workdirs, configs):
      sources, _ = data.raw_texts(data.prepare_once(config.data, corpora), split)
      sentences.check_sentences(options['heatmap_sentences'], len(sources), split, workdir)
  if options.get('pharaoh'):
    options['pharaoh'] = gold.read_pharaoh(options['pharaoh'])  # once for every run
  with plots.Drawing(background=None if out_dir else False) as drawing:  # heatmaps drawn as the next run decodes
    drawing_runs = _drawing_runs(workdirs, seeds_as_runs)
    key = _ahead_key(out_dir, which, seeds_as_runs, options)
    for workdir in workdirs:
      done = (ahead or {}).pop(workdir, None)
      if done is not None and done[0] == key:
        result, run_texts, run_views = done[1]
      else:
        result, run_texts, run_views = _analyze_workdir(
          workdir, out_dir, which, corpora, drawing, workdir in drawing_runs, options
        )
      results.append(result)
      texts.append(run_texts)
      views.append(run_views)
    # The one analysis every surface shows: of the runs, or of the variants their seeds pool into
    analysis = pool_runs(results, texts, baseline, contrasts, delta) if seeds_as_runs else results
    if not seeds_as_runs:
      run_verdicts.add_significance(results, texts, baseline, contrasts, delta)
    if out_dir is None:
      return analysis
    # runs trained a seed each are shown as the variants they pool into, by each one's first run (as its heatmaps)
    shown = [k for k, w in enumerate(workdirs) if not seeds_as_runs or w in drawing_runs]
    names = [stored.pooled_name(results[k]) if seeds_as_runs else results[k]['variant'] for k in shown]
    _write_analysis(out_dir, analysis, results, texts, names, [views[k] for k in shown], report_sentences, split)
    return analysis


def _write_analysis(out_dir, analysis, results, texts, names, views, report_sentences, split) -> None:
  """What analyze_runs writes under `out_dir`: each run's own part (<run>/analysis.json: its seeds, attention,
  heatmaps), the figures, `analysis` (analysis.json), the translations (stored.FILE) and sentences.json, the
  sentences the HTML report embeds of the variants `names` (their sentence `views`)."""
  for result in results:
    path = os.path.join(out_dir, files.slug(result['variant']), 'analysis.json')
    files.write_text(path, json.dumps(result, indent=1))
  write_figures(analysis, out_dir, split)
  files.write_text(os.path.join(out_dir, 'analysis.json'), json.dumps(analysis, indent=1))
  stored.save(os.path.join(out_dir, stored.FILE), results, texts)  # recomputes the statistics without the runs
  heatmap_sentences = sorted({i for r in results for i in r.get('heatmap_sentences', [])})
  embedded = sentences.embedded_sentences(names, views, heatmap_sentences, report_sentences)
  files.write_text(os.path.join(out_dir, sentences.SENTENCES_FILE), json.dumps(embedded, separators=(',', ':')))


def pool_runs(
  results: list[dict], texts: list[dict], baseline=None, contrasts='all', delta=verdicts.DELTA
) -> list[dict]:
  """The analysis of runs trained a seed each (train.seeds as a sweep axis), one result per variant their seeds
  pool into (stored.pool_seeds): the statistics from their translations (scoring.analyze_document, so the same as
  --from_translations --pool_seeds gives), each seed's beam scores, AER and attention statistics gathered from
  its run (pooled as a run of several seeds pools them), the first run's heatmaps, and 'workdirs', the runs.
  Refused when the runs translated different sentences."""
  doc, left_out = stored.document(results, texts)
  if left_out:
    raise InputError(
      f"pooling seeds: {', '.join(left_out)} translated other sentences than {results[0]['variant']}: runs pooled into variants "
      'must share one test set; analyse runs of one test set together (or without pooling)'
    )
  pooled = scoring.analyze_document(doc, 'the runs', baseline, True, contrasts, delta)
  for variant in pooled:
    runs = [r for r in results if stored.pooled_name(r) == variant['variant']]
    variant['workdirs'] = [r['workdir'] for r in runs]
    variant['workdir'] = ', '.join(variant['workdirs'])
    for key in PER_SEED:
      if all(key in r for r in runs):
        variant[key] = [x for r in runs for x in r[key]]
    if 'attention_by_seed' in variant:
      variant['attention'] = run_analysis.pool_over_seeds(variant['attention_by_seed'])
    for key in ('heatmaps', 'heatmap_sentences', 'step'):
      if key in runs[0]:
        variant[key] = runs[0][key]
  return pooled


def _analyze_workdir(workdir, out_dir, which, corpora, drawing, draws_heatmaps, options) -> tuple:
  run = inspection.load_run(workdir, which, corpora)
  if not draws_heatmaps:
    options = {**options, 'num_heatmaps': 0, 'heatmap_sentences': ()}
  return run_analysis.analyze_run(run, out_dir, drawing=drawing, **options)


def _drawing_runs(workdirs: list[str], seeds_as_runs: bool) -> set[str]:
  """The runs whose heatmaps are drawn: every run, or with `seeds_as_runs` the first run of each pooled variant
  (in `workdirs`' order), as a run of several seeds draws them for its first seed."""
  if not seeds_as_runs:
    return set(workdirs)
  first = {}
  for workdir in workdirs:
    first.setdefault(inspection.pool_name(checkpoints.load_config(workdir)), workdir)
  return set(first.values())


def _ahead_key(out_dir, which, seeds_as_runs, options) -> str:
  return repr((out_dir, which, seeds_as_runs, sorted(options.items())))


def analyze_ahead(
  ahead: dict,
  workdirs: list[str],
  finished: Collection[str],
  out_dir: str,
  which: str = 'best',
  seeds_as_runs: bool = False,
  corpora: Optional[dict] = None,
  stop: Callable[[], bool] = lambda: False,
  **options,
) -> list[str]:
  """analyze_runs' own part of each run (decoding, scores, heatmaps, the report's sentence views) for the
  `finished` runs of `workdirs` not yet in `ahead`, kept in `ahead` for analyze_runs(workdirs, ..., ahead=ahead)
  with the same arguments to reuse: a sweep runs it on a core that its training has left idle, until `stop()` (checked
  before each run) says the training has ended. Stops at the first run whose directory holds no config yet
  (whether an earlier run of its pool draws the heatmaps is not known before). Returns the runs analysed."""
  readable = []
  for workdir in workdirs:
    if not os.path.exists(os.path.join(workdir, checkpoints.CONFIG_FILE)):
      break
    readable.append(workdir)
  drawing_runs = _drawing_runs(readable, seeds_as_runs)
  key = _ahead_key(out_dir, which, seeds_as_runs, options)
  done = []
  with plots.Drawing() as drawing:
    for workdir in readable:
      if stop():
        break
      if workdir in finished and workdir not in ahead:
        parts = _analyze_workdir(workdir, out_dir, which, corpora, drawing, workdir in drawing_runs, options)
        ahead[workdir] = (key, parts)
        done.append(workdir)
  return done


def write_figures(results: list[dict], out_dir: str, split: str = 'test') -> list[str]:
  """bleu_by_length.png (length_figure) and bleu_by_seed.png (the seed strip) of `results` under `out_dir`: one
  line and one row per result, so results pooled over runs trained a seed each (scoring.analyze_translations
  with pool_seeds) draw one per variant."""
  return [
    plots.save(length_figure(results, split), os.path.join(out_dir, 'bleu_by_length.png')),
    plots.seed_strip(
      [r['significance']['corpus'] | {'variant': r['variant']} for r in results],
      os.path.join(out_dir, 'bleu_by_seed.png'),
      f'{split.capitalize()} BLEU (greedy) by seed',
    ),
  ]


def length_figure(results: list[dict], split: str = 'test'):
  """The figure comparing the runs: greedy BLEU by source length, mean over seeds, with the 95% intervals
  of run_verdicts.add_significance (a matplotlib Figure)."""
  curves = {r['variant']: r['greedy_bleu_by_length'] for r in results}
  intervals = {r['variant']: [b['interval'] for b in r['significance']['by_length']] for r in results}
  seeds = sorted({len(r['seeds']) for r in results})
  return plots.bleu_by_length_figure(
    curves,
    f'BLEU by source length ({split}, greedy, mean over {"/".join(map(str, seeds))} seed(s))\n'
    "95% intervals: Student's t over seeds with the test set's variance\n(one seed: the test sentences alone)",
    intervals,
    dashed={r['variant'] for r in results if not stored.attends(r)},
  )
