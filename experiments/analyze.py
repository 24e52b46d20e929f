"""Analyse trained runs from their directories alone: translations, BLEU/chrF (greedy and beam), BLEU by
source length with a plot comparing the runs, attention heatmaps, alignment error rate, and report.html (one
self-contained page: the table, the length chart, every variant's attention on the sentences it embeds).

    python -m experiments.analyze --runs=runs/main/none,runs/main/additive --out=runs/main/analysis \
        --beam_size=5 --num_heatmaps=3 [--sentences=4,17] [--pharaoh=gold.test.align] [--export=pharaoh,npz,json,softalign]

Every analysis decides a family of contrasts declared before the results (docs/design.md, "Seeds and
significance"): --contrasts=all (every pair, the default), variant names (each against every other variant)
or pairs written A~B; --delta=0.5 is the margin in BLEU within which two variants are called equivalent.
--which, --beam_size, --num_heatmaps, --heatmap_min_words, --heatmap_seed, --report_sentences, --contrasts and
--delta are declared settings (attnmt/analysis/settings.py, attnmt/compare/family.py): a sweep's section holds the
same rows (sweep.beam_size, sweep.delta ...), one default and one check for both.

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

import os

from absl import app, flags

from attnmt.analysis import exports, files, html_report, inspection, report, tables
from attnmt.analysis import settings as analysis_settings
from attnmt.compare import family
from attnmt.faithfulness import runner
from experiments import analyze_faithfulness, analyze_inputs, analyze_stored, common

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
DECLARED = (*analysis_settings.RUNS, family.DEFAULTS['contrasts'], family.DEFAULTS['delta'])  # the sweep's sweep.* too
common.define_flags(DECLARED)
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
flags.DEFINE_list('sentences', [], 'Test-split indices to draw heatmaps for (default: random ones).')
flags.DEFINE_string('pharaoh', None, 'Gold alignments for the test split, one Pharaoh line per sentence.')
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
  declared = common.flag_values(DECLARED)  # each against its row: --delta a finite number > 0, as sweep.delta
  sources = (FLAGS.runs, FLAGS.from_translations, FLAGS.from_scores, FLAGS.from_faithfulness, FLAGS.from_explanations)
  if sum(map(bool, sources)) != 1:
    raise ValueError(
      'give one of --runs (run directories), --from_translations (a translations.json.gz), --from_scores (a CSV), '
      '--from_faithfulness (a faithfulness.json) or --from_explanations (explanations.json files)'
    )
  if FLAGS.runs:
    analyze_inputs.check_runs_once(FLAGS.runs)
  if FLAGS['explanations'].present and not FLAGS.explanations:
    raise ValueError(f"--explanations names no test: give some of {', '.join(runner.TESTS)}, or all")
  empty = {  # a list given empty is a mistake, never the flag's default
    'interventions': 'no intervention: give some of them (e.g. uniform,permute,zero_max) or leave the flag out',
    'sentences': 'no sentence index: give test-split indices (e.g. 0,5,9), or leave it out for random ones',
  }
  for name, why in empty.items():
    if FLAGS[name].present and not FLAGS[name].value:
      raise ValueError(f'--{name}= names {why}')
  if FLAGS.explanations and (FLAGS.interventions or FLAGS.pool_seeds or not FLAGS.runs):
    raise ValueError(
      '--explanations takes --runs (run directories), without --interventions or --pool_seeds: give one analysis'
    )
  if FLAGS.from_explanations:
    return analyze_faithfulness.from_explanations(FLAGS.from_explanations, FLAGS.out, FLAGS.baseline)
  if FLAGS.from_faithfulness:
    return analyze_faithfulness.from_faithfulness(FLAGS.from_faithfulness, FLAGS.out, FLAGS.baseline)
  if FLAGS.from_scores:
    return analyze_stored.from_scores(FLAGS.from_scores, FLAGS.baseline, declared['contrasts'], declared['delta'])
  if FLAGS.from_translations:
    return analyze_stored.from_translations(
      FLAGS.from_translations, FLAGS.out, FLAGS.baseline, FLAGS.pool_seeds, declared['contrasts'], declared['delta']
    )
  if FLAGS.explanations:
    return analyze_faithfulness.explanations(
      FLAGS.runs,
      FLAGS.explanations,
      FLAGS.out,
      declared['which'],
      FLAGS.baseline,
      FLAGS.frozen_attention,
      max_sentences=FLAGS.explanation_sentences,
      adversarial_sentences=FLAGS.adversarial_sentences,
      adversarial_steps=FLAGS.adversarial_steps,
      trained_steps=FLAGS.trained_steps,
      train_sentences=FLAGS.train_sentences,
    )
  if FLAGS.interventions:
    return analyze_faithfulness.faithfulness(
      FLAGS.runs,
      FLAGS.interventions,
      FLAGS.out,
      FLAGS.faithfulness_sentences,
      declared['which'],
      FLAGS.pool_seeds,
      FLAGS.baseline,
    )
  _analyze_runs(FLAGS.runs, declared)


def _analyze_runs(runs: list[str], declared: dict) -> None:
  """The usual analysis of --runs: report.analyze_runs, analysis.md, report.html and the --export files."""
  try:
    sentences = [int(s) for s in FLAGS.sentences]
  except ValueError:
    raise ValueError(f'--sentences takes integer indices, got {FLAGS.sentences}') from None
  if any(i < 0 for i in sentences):
    negative = ','.join(str(i) for i in sentences if i < 0)
    raise ValueError(f'--sentences {negative}: test-split indices start at 0; pass indices >= 0')
  formats = exports.parse_formats(FLAGS.export)
  out = analyze_inputs.output_dir(FLAGS.out, runs)
  analyze_inputs.check_out_holds_these_runs(runs, out)
  if FLAGS.pool_seeds:
    inspection.check_pooled_runs(runs)
  results = report.analyze_runs(
    runs,
    out,
    heatmap_sentences=sentences,
    pharaoh=FLAGS.pharaoh,
    baseline=FLAGS.baseline,
    seeds_as_runs=FLAGS.pool_seeds,
    **declared,
  )
  table = tables.analysis_table(results)  # --pool_seeds: one row per variant the runs pool into
  files.write_text(os.path.join(out, 'analysis.md'), table + '\n')
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
    for workdir in runs:  # every run, pooled or not
      run = inspection.load_run(workdir, declared['which'], corpora)
      attention = inspection.split_word_attention(run, 0, 'test', eos=True)
      paths = exports.write(attention, os.path.join(out, files.slug(run.name)), formats)
      print(f'Exported {run.name}: ' + ', '.join(paths))


if __name__ == '__main__':
  app.run(main, flags_parser=common.parse_flags)
