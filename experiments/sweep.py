"""An ablation: every combination of score x query timing x window x input feeding, each trained for all
seeds in one vmapped program; then one results table (Markdown and CSV), a bar chart and, if asked,
the analysis of every variant (BLEU by length plot, heatmaps).

    python -m experiments.sweep --config=experiments/configs/main_ablation.py --workdir=runs/main \
        --config.sweep.scores=none,additive,dot --config.train.seeds=0,1

Re-running with the same --workdir reuses finished variants and resumes unfinished ones.
"""
import copy
import itertools
import json
import os

from absl import app, flags
from ml_collections import config_flags

from experiments import common

FLAGS = flags.FLAGS
config_flags.DEFINE_config_file('config', 'experiments/configs/main_ablation.py', 'Config file with a sweep section.',
                                lock_config=True)
flags.DEFINE_string('workdir', 'runs/main', 'Root directory: one run directory per variant, tables, plots.')
common.define_distributed_flags()


def variants(config):
  """The model overrides of every combination, and the combinations refused with the reason."""
  s = config.sweep
  axes = [s.scores.split(','), s.query_timings.split(','), s.windows.split(','),
          [v.strip().lower() in ('1', 'true', 'yes') for v in s.input_feeding.split(',')]]
  from attnmt.config import ConfigError, ModelConfig
  keep, refused, seen = [], [], set()
  for score, timing, window, feed in itertools.product(*axes):
    feed = feed if timing == 'luong' else True   # input feeding only exists in the luong timing
    over = dict(score=score.strip(), query_timing=timing.strip(), window=window.strip(), input_feeding=feed)
    if tuple(over.values()) in seen:
      continue
    seen.add(tuple(over.values()))
    try:
      ModelConfig.from_dict({**config.model.to_dict(), **over})
      keep.append(over)
    except ConfigError as e:
      refused.append((over, str(e)))
  return keep, refused


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f'unexpected arguments {argv[1:]}')
  common.run_guarded(_sweep)


def _sweep():
  from attnmt import analyze_lib, curves as curves_lib, parallel, plots, train_lib
  common.initialize_distributed()
  config, root = FLAGS.config, FLAGS.workdir
  keep, refused = variants(config)
  for over, why in refused:
    print(f'skipping {over}: {why}')
  print(f'{len(keep)} variant(s) x seeds {config.train.seeds}; {len(refused)} combination(s) skipped')
  rows, dirs = [], []
  for over in keep:
    run_config = copy.deepcopy(config)
    with run_config.unlocked():
      del run_config['sweep']
      run_config.model.update(over)
    workdir = os.path.join(root, train_lib.variant_name(run_config).replace('/', '-'))
    print(f'\n=== {train_lib.variant_name(run_config)} -> {workdir}', flush=True)
    rows.append(_finished(workdir, run_config) or train_lib.train_and_evaluate(run_config, workdir))
    dirs.append(workdir)
  if not parallel.is_main_process():
    return   # process 0 writes the tables and plots and runs the analysis
  table = common.results_table(rows)
  _write(os.path.join(root, 'results.md'), table + '\n')
  _write(os.path.join(root, 'results.csv'), common.results_csv(rows))
  chart = plots.results_bar_chart(rows, 'test_bleu', os.path.join(root, 'results_bleu.png'))
  print('\n' + table)
  outputs = [os.path.join(root, 'results.md'), os.path.join(root, 'results.csv'), chart]
  curves = {r['variant']: curves_lib.validation_records(d) for r, d in zip(rows, dirs)}
  if all(curves.values()):
    outputs.append(plots.learning_curves(curves, os.path.join(root, 'results_curves.png'),
                                         'Validation during training (mean over seeds)'))
  if config.sweep.analyze:
    out = os.path.join(root, 'analysis')
    results = analyze_lib.analyze_runs(dirs, out, beam_size=config.sweep.beam_size,
                                       num_heatmaps=config.sweep.num_heatmaps,
                                       heatmap_min_words=config.sweep.heatmap_min_words)
    analysis_md = common.analysis_table(results)
    _write(os.path.join(out, 'analysis.md'), analysis_md + '\n')
    print('\nAnalysis of the test split (first seed for the length buckets):\n' + analysis_md)
    print(common.attention_verdict(results))
    outputs += [os.path.join(out, 'analysis.md'), os.path.join(out, 'bleu_by_length.png'),
                os.path.join(out, '<variant>/heatmap_<i>.png')]
  print('\nWrote:\n  ' + '\n  '.join(outputs))


def _finished(workdir, run_config):
  """The results of a finished run of exactly this config, or None (train_and_evaluate then resumes a run
  whose config differs only in resumable settings, such as more steps, and refuses any other)."""
  from attnmt import checkpoints
  path = os.path.join(workdir, 'results.json')
  if not os.path.exists(path):
    return None
  saved = checkpoints.load_config(workdir).to_dict()
  if saved != json.loads(json.dumps(run_config.to_dict())):
    return None
  with open(path) as f:
    print(f'(finished earlier with this config: reusing {path})')
    return json.load(f)


def _write(path, text):
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  with open(path, 'w') as f:
    f.write(text)


if __name__ == '__main__':
  app.run(main)
