"""Learning curves of training runs: validation BLEU and perplexity against training minutes (evaluation
time excluded) as one PNG, and a Markdown table of validation BLEU at fixed minutes and test BLEU.

    python -m experiments.curves --runs=runs/curves/base,runs/curves/cos3e-3 --labels=rsqrt,cosine \
        --out=docs/curves/schedule.png

Each run directory needs validation records (train.eval_every > 0) in its metrics.jsonl.
"""

import json
import math
import os

from absl import app, flags

from experiments import common
from attnmt.analysis import curves as curves_lib
from attnmt.analysis import stored
from attnmt import errors, plots

FLAGS = flags.FLAGS
flags.DEFINE_list('runs', [], 'Run directories (each holds metrics.jsonl).')
flags.DEFINE_list('labels', [], 'One label per run (default: the directory names).')
flags.DEFINE_string('out', '', 'PNG to write; the table is printed and written beside it as .md.')
flags.DEFINE_string('title', '', 'Figure title.')
flags.DEFINE_list('minutes', ['1', '2', '3', '4', '5'], 'Training minutes at which the table reads BLEU.')


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f'unexpected arguments {argv[1:]}')
  common.run_guarded(_curves)


def _curves():

  if not FLAGS.runs:
    raise ValueError('no runs given; pass --runs=DIR1,DIR2')
  labels = FLAGS.labels or [os.path.basename(os.path.normpath(r)) for r in FLAGS.runs]
  if len(labels) != len(FLAGS.runs):
    raise ValueError(f'{len(labels)} labels for {len(FLAGS.runs)} runs; give one label per run')
  if FLAGS.out and (os.path.isdir(FLAGS.out) or not FLAGS.out.endswith('.png')):
    raise ValueError(f'--out={FLAGS.out} is not a .png file path; give one such as docs/curves/lr.png')
  problem = errors.out_problem(FLAGS.out, 'curves.png') if FLAGS.out else None
  if problem:
    raise ValueError(problem)
  minutes = _minutes(FLAGS.minutes)
  curves, tests = {}, {}
  for label, run in zip(labels, FLAGS.runs):
    curves[label] = curves_lib.validation_records(run)
    if not curves[label]:
      raise ValueError(f'{run} has no validation records with training time; train with train.eval_every > 0')
    path = os.path.join(run, 'results.json')
    if os.path.isfile(path):
      with open(path) as f:
        tests[label] = json.load(f)
  table = curves_lib.curves_table(curves, tests, minutes)
  print(table)
  if FLAGS.out:
    os.makedirs(os.path.dirname(os.path.abspath(FLAGS.out)), exist_ok=True)
    baselines = {label for label, result in tests.items() if not stored.attends(result)}  # dashed
    plots.learning_curves(curves, FLAGS.out, FLAGS.title, dashed=baselines)
    with open(FLAGS.out[: -len('.png')] + '.md', 'w') as f:
      f.write(table + '\n')
    print(f'wrote {FLAGS.out}')


def _minutes(values: list[str]) -> list[float]:
  """--minutes as numbers: each finite and above 0, at least one, else one line naming the entry."""
  if not values:
    raise ValueError('--minutes= names no time; pass training minutes such as --minutes=1,2,5')
  out = []
  for v in values:
    try:
      m = float(v)
    except ValueError:
      m = math.nan
    if not (math.isfinite(m) and m > 0):
      raise ValueError(f'--minutes: {v!r} is not a training time; pass minutes above 0, such as --minutes=1,2,5')
    out.append(m)
  return out


if __name__ == '__main__':
  app.run(main, flags_parser=common.parse_flags)
