"""Analyse trained runs from their directories alone: translations, BLEU/chrF (greedy and beam), BLEU by
source length with a plot comparing the runs, attention heatmaps, alignment error rate, and report.html (one
self-contained page: the table, the length chart, every variant's attention on the sentences it embeds).

    python -m experiments.analyze --runs=runs/main/none,runs/main/additive --out=runs/main/analysis \
        --beam_size=5 --num_heatmaps=3 [--sentences=4,17] [--pharaoh=gold.test.align] [--export=pharaoh,npz,json,softalign]

Every analysis decides a family of contrasts declared before the results (docs/design.md, "Seeds and
significance"): --contrasts=all (every pair, the default), variant names (each against every other variant)
or pairs written A~B; --delta=0.5 is the margin in BLEU within which two variants are called equivalent.

The statistics of an analysis (per-seed BLEU and chrF, intervals, the contrasts, BLEU by length) again from the
per-seed translations it stored, without the runs (attnmt/analysis/stored.py):

    python -m experiments.analyze --from_translations=docs/results/luong/translations.json.gz [--out=DIR]

Only the contrasts, from per-seed scores alone (a sweep's results.csv, or any CSV with the columns variant and
test_bleu_per_seed, space-separated): the test set is then held fixed.

    python -m experiments.analyze --from_scores=runs/luong/results.csv [--baseline=VARIANT]

Is attention an explanation? The four papers' tests (Moradi et al., Serrano & Smith, Jain & Wallace, Wiegreffe
& Pinter; attnmt/faithfulness/) per seed, written to explanations.md, .json and .png:

    python -m experiments.analyze --runs=runs/main/none,runs/main/additive --explanations=all --out=DIR \
        [--explanation_sentences=100] [--adversarial_sentences=32] [--adversarial_steps=500] [--baseline=additive]

The explanations' tables and verdicts again from one or more stored explanations.json (runs analysed in parts,
e.g. one process per core, merged; no runs read):

    python -m experiments.analyze --from_explanations=DIR1/explanations.json,DIR2/explanations.json \
        --baseline=additive --out=DIR

The faithfulness tables and verdicts (every cell against --baseline on the declared measures, one family) again
from a stored faithfulness.json, without the runs:

    python -m experiments.analyze --from_faithfulness=docs/results/faithfulness/faithfulness.json \
        --baseline=additive [--out=DIR]
"""

import csv
import json
import os
import time

from absl import app, flags

from attnmt.analysis import (
  exports,
  html_report,
  inspection,
  report,
  stored,
  tables,
)
from attnmt.compare import family, verdicts
from attnmt.faithfulness import contrasts, counterfactual, figures, page, runner
from attnmt.model import interventions
from experiments import common

flags.DEFINE_list('runs', None, 'Run directories (comma-separated).')
flags.DEFINE_string(
  'from_translations', None, 'Instead of --runs: the translations.json.gz of an analysis; its statistics again.'
)
flags.DEFINE_string('from_scores', None, "Instead of --runs: a CSV of per-seed scores (a sweep's results.csv).")
flags.DEFINE_string(
  'from_faithfulness', None, 'Instead of --runs: a faithfulness.json; its tables and verdicts (faithfulness.md) again.'
)
flags.DEFINE_string(
  'baseline', None, 'The variant the others are tested against (default: the first whose score does not attend, none).'
)
flags.DEFINE_string('contrasts', family.DEFAULTS['contrasts'].default, family.DEFAULTS['contrasts'].doc + '.')
flags.DEFINE_float('delta', family.DELTA, family.DEFAULTS['delta'].doc + ' (the sweep\'s sweep.delta).')
flags.DEFINE_list(
  'interventions',
  [],
  'Instead of the usual analysis: does the output follow the attention? Counterfactual attention '
  '(uniform, permute, zero_max, zero_top_k, shift, first, last, random), erasure and attention-gradient '
  'agreement per seed, written to faithfulness.md, faithfulness.json and faithfulness.png; with --baseline '
  '(a cell, or the score that names one cell) the verdicts of every cell against it on the declared measures.',
)
flags.DEFINE_integer(
  'faithfulness_sentences', 400, 'With --interventions: the first this many test sentences (0: all).'
)
flags.DEFINE_list(
  'explanations',
  [],
  'Instead of the usual analysis: is attention an explanation? The papers\' tests of attnmt/faithfulness/ '
  f"({', '.join(runner.TESTS)}, or all) per seed along each seed's own greedy output, written to "
  'explanations.md, explanations.json and explanations.png; with two runs of one vocabulary, wiegreffe_pinter also '
  'freezes each attending run\'s attention into the others\' decoders; with --baseline (a cell, or the score that '
  'names one cell) the verdicts of every attending cell against it on the declared measures.',
)
flags.DEFINE_bool(
  'frozen_attention',
  True,
  "With --explanations and wiegreffe_pinter: Wiegreffe & Pinter's frozen-attention diagnostic for every ordered pair "
  "of runs of one vocabulary (n (n - 1) pairs, each decoding the second run's seeds again); --nofrozen_attention "
  'skips it (the other tests are per run).',
)
flags.DEFINE_list(
  'from_explanations',
  [],
  'Instead of --runs: one or more explanations.json (comma-separated; parts of one analysis are merged, a variant '
  'in two of them is refused); their tables, plot and, with --baseline, verdicts again.',
)
flags.DEFINE_integer(
  'explanation_sentences',
  runner.MAX_SENTENCES,
  'With --explanations: the first this many test sentences (0: all).',
)
flags.DEFINE_integer(
  'adversarial_sentences',
  runner.ADVERSARIAL_SENTENCES,
  "With --explanations: Jain & Wallace's adversarial attention search runs on the first this many sentences.",
)
flags.DEFINE_integer(
  'adversarial_steps',
  runner.ADVERSARIAL_STEPS,
  "With --explanations: the adversarial search's optimisation steps (theirs: 500).",
)
flags.DEFINE_integer(
  'trained_steps',
  runner.TRAINED_STEPS,
  "With --explanations: Wiegreffe & Pinter's trained tests (the non-contextual diagnostic and the adversary) train "
  "this many steps each from the first seed (default: the run's own train.num_steps; 0: left out).",
)
flags.DEFINE_integer(
  'train_sentences',
  runner.TRAIN_SENTENCES,
  "With --explanations: Wiegreffe & Pinter's trained tests train on the first this many training sentences.",
)
flags.DEFINE_bool(
  'pool_seeds',
  False,
  'With --runs, --from_translations or --interventions: runs that trained one seed each (train.seeds as a sweep '
  'axis, as the main job on a CPU) pooled into one variant with their seeds (the pool each run stores): the '
  'statistics and verdicts of analysis.md are the pooled ones (with --runs, translations.json.gz keeps every run '
  'apart, as a sweep writes it; with --from_translations the pooled translations are written to --out as '
  'translations.json.gz; with --interventions the per-run faithfulness measures as faithfulness_runs.json).',
)
flags.DEFINE_string('out', None, 'Output directory (default: <first run>/../analysis).')
flags.DEFINE_enum('which', 'best', ['best', 'latest'], 'Which checkpoint of each run.')
flags.DEFINE_integer('beam_size', 5, 'Beam size for the beam-search scores (0: greedy only).')
flags.DEFINE_list('sentences', [], 'Test-split indices to draw heatmaps for (default: random ones).')
flags.DEFINE_integer('num_heatmaps', 3, 'How many random sentences get heatmaps when --sentences is empty.')
flags.DEFINE_integer('heatmap_seed', 0, 'Seed choosing the random sentences.')
flags.DEFINE_integer('heatmap_min_words', 0, 'Random heatmap sentences have sources of at least this many words.')
flags.DEFINE_string('pharaoh', None, 'Gold alignments for the test split, one Pharaoh line per sentence.')
flags.DEFINE_integer('report_sentences', 200, 'report.html embeds this many test sentences (plus the heatmap ones).')
flags.DEFINE_string(
  'export',
  '',
  "Also write each run's test attention (forced decoding of the reference, word level, first seed) as: "
  'pharaoh (hard alignments), npz, json (soft matrices; json with the tokens), softalign (Nematus/SoftAlignments).',
)
FLAGS = flags.FLAGS


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f'unexpected arguments {argv[1:]}')
  common.run_guarded(_analyze, 'the analysis is incomplete (the runs are untouched): run the same command again')


def _analyze():
  family.checked('delta', FLAGS.delta, '--delta')  # a finite number > 0, as sweep.delta
  sources = (FLAGS.runs, FLAGS.from_translations, FLAGS.from_scores, FLAGS.from_faithfulness, FLAGS.from_explanations)
  if sum(map(bool, sources)) != 1:
    raise ValueError(
      'give one of --runs (run directories), --from_translations (a translations.json.gz), --from_scores (a CSV), '
      '--from_faithfulness (a faithfulness.json) or --from_explanations (explanations.json files)'
    )
  if FLAGS.runs:
    _check_runs_once(FLAGS.runs)
  if FLAGS['explanations'].present and not FLAGS.explanations:
    raise ValueError(f"--explanations names no test: give some of {', '.join(runner.TESTS)}, or all")
  if FLAGS.explanations and (FLAGS.interventions or FLAGS.pool_seeds or not FLAGS.runs):
    raise ValueError(
      '--explanations takes --runs (run directories), without --interventions or --pool_seeds: give one analysis'
    )
  if FLAGS.from_explanations:
    return _from_explanations(FLAGS.from_explanations, FLAGS.out, FLAGS.baseline)
  if FLAGS.from_faithfulness:
    return _from_faithfulness(FLAGS.from_faithfulness, FLAGS.out, FLAGS.baseline)
  if FLAGS.from_scores:
    return _from_scores(FLAGS.from_scores, FLAGS.baseline)
  if FLAGS.from_translations:
    return _from_translations(FLAGS.from_translations, FLAGS.out)
  if FLAGS.explanations:
    return _explanations(FLAGS.runs, FLAGS.explanations, FLAGS.out, FLAGS.explanation_sentences)
  if FLAGS.interventions:
    return _faithfulness(FLAGS.runs, FLAGS.interventions, FLAGS.out, FLAGS.faithfulness_sentences)
  try:
    sentences = [int(s) for s in FLAGS.sentences]
  except ValueError:
    raise ValueError(f'--sentences takes integer indices, got {FLAGS.sentences}') from None
  if any(i < 0 for i in sentences):
    negative = ','.join(str(i) for i in sentences if i < 0)
    raise ValueError(f'--sentences {negative}: test-split indices start at 0; pass indices >= 0')
  if FLAGS.beam_size < 0 or FLAGS.num_heatmaps < 0 or FLAGS.heatmap_min_words < 0:
    raise ValueError('--beam_size, --num_heatmaps and --heatmap_min_words must be >= 0')

  formats = exports.parse_formats(FLAGS.export)
  if FLAGS.report_sentences < 0:
    raise ValueError(f'--report_sentences ({FLAGS.report_sentences}) must be >= 0')
  out = FLAGS.out or os.path.join(os.path.dirname(os.path.abspath(FLAGS.runs[0])), 'analysis')
  if os.path.exists(out) and not os.path.isdir(out):
    raise ValueError(f'--out {out} is a file; pass a directory for the analysis (created if missing)')
  _check_out_holds_these_runs(FLAGS.runs, out)
  if FLAGS.pool_seeds:
    inspection.check_pooled_runs(FLAGS.runs)
  results = report.analyze_runs(
    FLAGS.runs,
    out,
    FLAGS.which,
    beam_size=FLAGS.beam_size,
    heatmap_sentences=sentences,
    num_heatmaps=FLAGS.num_heatmaps,
    heatmap_seed=FLAGS.heatmap_seed,
    pharaoh=FLAGS.pharaoh,
    heatmap_min_words=FLAGS.heatmap_min_words,
    report_sentences=FLAGS.report_sentences,
    baseline=FLAGS.baseline,
    contrasts=FLAGS.contrasts,
    delta=FLAGS.delta,
    seeds_as_runs=FLAGS.pool_seeds,
  )
  table = tables.analysis_table(results)  # --pool_seeds: one row per variant the runs pool into
  report.write_text(os.path.join(out, 'analysis.md'), table + '\n')
  print(table)
  print(tables.attention_verdict(results))
  page = html_report.write_report(results, out)
  print(
    f'\nWrote translations (every seed), heatmaps and analysis.json per run, analysis.md, bleu_by_seed.png '
    f'and bleu_by_length.png under {out}'
  )
  print(f'Wrote {page}: the interactive report (open it in a browser)')
  if formats:
    corpora = {}
    for workdir in FLAGS.runs:  # every run, pooled or not
      run = inspection.load_run(workdir, FLAGS.which, corpora)
      paths = exports.write(
        inspection.split_word_attention(run, 0, 'test', eos=True), os.path.join(out, report._slug(run.name)), formats
      )
      print(f'Exported {run.name}: ' + ', '.join(paths))


def _check_out_holds_these_runs(runs: list[str], out: str) -> None:
  """An --out that holds the analysis of other runs (or a recomputation, or an analysis.json that cannot be
  read) is refused before anything is decoded: analysing the same runs again replaces their analysis, another
  set of runs must not."""
  existing = os.path.join(out, 'analysis.json')
  if not os.path.exists(existing):
    return
  try:
    with open(existing, encoding='utf-8') as f:
      held = {os.path.realpath(w) for r in json.load(f) for w in r.get('workdirs', [r['workdir']])}
  except (OSError, ValueError, TypeError, KeyError):
    held = None
  if held != {os.path.realpath(r) for r in runs}:
    raise ValueError(
      f'--out {out} holds the analysis of other runs (its analysis.json), which this one would replace; give '
      'another --out (a new folder), or the same --runs to analyse those runs again'
    )


def _check_runs_once(runs: list[str]) -> None:
  """Refuses a run directory given twice in --runs (the same directory after normalising the paths): it would
  be compared with itself and its files written twice."""
  seen = {}
  for run in runs:
    key = os.path.realpath(run)
    if key in seen:
      raise ValueError(f'--runs names the run directory {key} twice (as {seen[key]} and {run}); give each run once')
    seen[key] = run


def _faithfulness(runs: list[str], names: list[str], out, max_sentences: int):
  chosen = interventions.parse(','.join(names))  # a bad name fails before any run is loaded
  if max_sentences < 0:
    raise ValueError(f'--faithfulness_sentences ({max_sentences}) must be >= 0')
  out = out or os.path.join(os.path.dirname(os.path.abspath(runs[0])), 'analysis')
  if os.path.exists(out) and not os.path.isdir(out):
    raise ValueError(f'--out {out} is a file; pass a directory for the analysis (created if missing)')
  if FLAGS.pool_seeds:
    inspection.check_pooled_runs(runs)
  os.makedirs(out, exist_ok=True)
  start, results, corpora = time.time(), [], {}
  for workdir in runs:
    run = inspection.load_run(workdir, FLAGS.which, corpora)
    results.append(counterfactual.analyze_run(run, chosen, max_sentences=max_sentences))
  if FLAGS.pool_seeds:
    report.write_text(os.path.join(out, 'faithfulness_runs.json'), json.dumps(results, indent=1) + '\n')
    results = counterfactual.pool_seeds(results)
  report.write_text(os.path.join(out, 'faithfulness.json'), json.dumps(results, indent=1) + '\n')  # kept first
  table = _faithfulness_page(results, FLAGS.baseline)
  report.write_text(os.path.join(out, 'faithfulness.md'), table)
  figures.counterfactual_plot(results, os.path.join(out, 'faithfulness.png'))
  print(table)
  print(f'Wrote faithfulness.md, faithfulness.json and faithfulness.png under {out} in {time.time() - start:.0f} s')


def _explanations(runs: list[str], names: list[str], out, max_sentences: int):
  tests = runner.parse_tests(names)  # a bad name fails before any run is loaded
  if (
    min(max_sentences, FLAGS.adversarial_sentences, FLAGS.trained_steps or 0) < 0
    or min(FLAGS.adversarial_steps, FLAGS.train_sentences) < 1
  ):
    raise ValueError(
      f'--explanation_sentences ({max_sentences}), --adversarial_sentences ({FLAGS.adversarial_sentences}) and '
      f'--trained_steps ({FLAGS.trained_steps}) must be >= 0, --adversarial_steps ({FLAGS.adversarial_steps}) and '
      f'--train_sentences ({FLAGS.train_sentences}) >= 1'
    )
  out = out or os.path.join(os.path.dirname(os.path.abspath(runs[0])), 'analysis')
  if os.path.exists(out) and not os.path.isdir(out):
    raise ValueError(f'--out {out} is a file; pass a directory for the analysis (created if missing)')
  start, loaded, results, corpora = time.time(), [], [], {}
  for workdir in runs:
    loaded.append(inspection.load_run(workdir, FLAGS.which, corpora))
    results.append(
      runner.analyze_run(
        loaded[-1],
        tests,
        max_sentences=max_sentences,
        adversarial_sentences=FLAGS.adversarial_sentences,
        adversarial_steps=FLAGS.adversarial_steps,
        trained_steps=FLAGS.trained_steps,
        train_sentences=FLAGS.train_sentences,
      )
    )
  frozen = []
  if 'wiegreffe_pinter' in tests and FLAGS.frozen_attention:
    for a in loaded:
      for b in loaded:
        if a is not b and runner.attends(a) and runner.same_vocabulary(a, b):
          frozen.append(runner.frozen(a, b, max_sentences=max_sentences))
  paths = page.write(results, out, frozen)  # kept before the verdicts, which may refuse the cells
  if FLAGS.baseline:
    paths = page.write(results, out, frozen, page.contrasts(results, FLAGS.baseline, tests))
  with open(paths[1], encoding='utf-8') as f:
    print(f.read())
  print(f'Wrote explanations.md, explanations.json and explanations.png under {out} in {time.time() - start:.0f} s')


def _faithfulness_page(results: list, reference) -> str:
  """faithfulness.md: the tables, and with a reference the verdicts of every cell against it (one family over
  contrasts.MEASURES x cells)."""
  if not reference:
    return page.counterfactual_markdown(results) + '\nNo reference cell (--baseline): no verdicts.\n'
  return page.counterfactual_markdown(results, contrasts.contrasts(results, contrasts.MEASURES, reference))


def _from_explanations(paths: list[str], out, reference):
  results, frozen, seen = [], [], {}
  for path in paths:
    try:
      with open(path, encoding='utf-8') as f:
        doc = json.load(f)
    except (OSError, ValueError) as e:
      raise ValueError(
        f'{path}: not a readable explanations.json ({e}); give one written by analyze --explanations'
      ) from None
    runs = doc.get('runs') if isinstance(doc, dict) else None
    if not isinstance(runs, list) or not all(isinstance(r, dict) and {'variant', 'tests'} <= set(r) for r in runs):
      raise ValueError(f'{path} has no list of runs; give an explanations.json written by analyze --explanations')
    for r in doc['runs']:
      if r['variant'] in seen:
        raise ValueError(f"{r['variant']} is in both {seen[r['variant']]} and {path}; give each variant once")
      seen[r['variant']] = path
    results += doc['runs']
    frozen += doc.get('frozen') or []
  contrasts.same_test_set(results)  # parts of one analysis: the same sentences, or no merge
  tests = [t for t in runner.TESTS if any(t in r['tests'] for r in results)]
  if not out:
    raise ValueError('--from_explanations needs --out (a directory for the merged explanations.json, .md and .png)')
  if os.path.exists(out) and not os.path.isdir(out):
    raise ValueError(f'--out {out} is a file; pass a directory for the analysis (created if missing)')
  verdicts = page.contrasts(results, reference, tests) if reference else None
  written = page.write(results, out, frozen, verdicts)
  with open(written[1], encoding='utf-8') as f:
    print(f'From {", ".join(paths)} ({len(results)} run(s); no runs read):\n' + f.read())
  print(f'Wrote explanations.md, explanations.json and explanations.png under {out}')


def _from_faithfulness(path: str, out, reference):
  with open(path, encoding='utf-8') as f:
    results = json.load(f)
  table = _faithfulness_page(results, reference)
  print(f'From {path} ({len(results)} cell(s); no runs read):\n' + table)
  if out:
    if os.path.exists(out) and not os.path.isdir(out):
      raise ValueError(f'--out {out} is a file; pass a directory for the analysis (created if missing)')
    report.write_text(os.path.join(out, 'faithfulness.md'), table)
    print(f'Wrote faithfulness.md under {out}')


def _from_scores(path: str, baseline):
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
  compared = verdicts.compare_scores(names, scores, baseline, contrasts=FLAGS.contrasts, delta=FLAGS.delta, seeds=seeds)
  results = tables.scores_results(compared)
  print(f'From {path} ({len(names)} variant(s), per-seed scores only):\n' + tables.pairwise_text(results))


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
  """Whether the variant of a results.csv row attends: its attends column (tables.results_csv). A file written
  before the column existed reads as every variant attending (stored.attends), so only --baseline names one."""
  value = row.get('attends') or 'true'
  if value not in ('true', 'false'):
    raise ValueError(f"{path}: attends must be true or false, got {value!r} for {row['variant']}")
  return value == 'true'


def _from_translations(path: str, out):
  if out:
    if os.path.exists(out) and not os.path.isdir(out):
      raise ValueError(f'--out {out} is a file; pass a directory for the analysis (created if missing)')
    _check_recomputation(path, out)
  results = report.analyze_translations(
    path, baseline=FLAGS.baseline, pool_seeds=FLAGS.pool_seeds, contrasts=FLAGS.contrasts, delta=FLAGS.delta
  )
  table = tables.analysis_table(results)
  print(f'From {path} ({len(results)} variant(s); no runs read):\n' + table)
  print(tables.attention_verdict(results))
  if out:
    report.write_text(os.path.join(out, 'analysis.json'), json.dumps(results, indent=1))  # what marks it ours
    report.write_text(os.path.join(out, 'analysis.md'), table + '\n')
    report.write_figures(results, out)
    written = 'analysis.md, analysis.json, bleu_by_length.png and bleu_by_seed.png'
    if FLAGS.pool_seeds:
      stored.save_doc(os.path.join(out, stored.FILE), stored.pool_seeds(stored.load(path)))
      written += f' and the pooled {stored.FILE}'
    print(f'\nWrote {written} under {out}')


def _check_recomputation(path: str, out: str) -> None:
  """--from_translations writes analysis.md and analysis.json into --out: refused when --out holds an analysis
  that is not a from-translations recomputation of this same file (a --runs analysis has AER, attention
  statistics and beam scores the stored translations cannot give back), and with --pool_seeds when the pooled
  file would replace the input itself. Nothing is written when refused."""
  fix = 'give another --out (a new folder) for the recomputation'
  if FLAGS.pool_seeds and _same_file(path, os.path.join(out, stored.FILE)):
    raise ValueError(f'--out {out} holds {path} itself, which the pooled {stored.FILE} would replace; {fix}')
  existing = os.path.join(out, 'analysis.json')
  if not os.path.exists(existing):
    for name in ('analysis.md',) + ((stored.FILE,) if FLAGS.pool_seeds else ()):
      if os.path.exists(os.path.join(out, name)):
        raise ValueError(f'--out {out} holds {name}, which this recomputation would replace; {fix}')
    return
  try:
    with open(existing, encoding='utf-8') as f:
      rows = json.load(f)
  except (OSError, ValueError):
    rows = None
  ours = (
    isinstance(rows, list)
    and bool(rows)
    and all(isinstance(r, dict) and 'workdir' not in r and _same_file(str(r.get('source')), path) for r in rows)
  )
  if not ours:
    raise ValueError(
      f'--out {out} holds an analysis (analysis.json) that is not a recomputation of {path} and would be replaced, '
      f'losing what it has beyond the stored translations (AER, attention, beam); {fix}'
    )


def _same_file(a: str, b: str) -> bool:
  try:
    return os.path.samefile(a, b)
  except OSError:
    return False


if __name__ == '__main__':
  app.run(main, flags_parser=common.parse_flags)
