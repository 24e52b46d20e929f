"""An ablation: every combination of the swept values, each trained for all seeds in one vmapped program;
then one results table (Markdown and CSV), a bar chart, the validation curves and, if asked, the analysis
of every variant (BLEU by length plot, heatmaps, significance against `none`).

    python -m experiments.sweep --config=experiments/configs/main_ablation.py --workdir=runs/ablation \
        --config.sweep.scores=none,additive,dot --config.train.seeds=0,1
    python -m experiments.sweep --config=experiments/configs/main_ablation.py --workdir=runs/window \
        --config.sweep.axes="model.window=local_m(size=4),local_p(size=4),local_p(size=8)" --config.sweep.scores=general

Any config key is an axis (`sweep.axes`: `key=v1,v2;key=v1,v2`); `scores`, `query_timings` and `windows`
are shorthands for the model's three attention axes. A component's options are written after its name,
`model.window=local_p(size=4),local_p(size=8)`; a variant's name shows the options that differ between the
sweep's variants. Each variant's run directory is named by its values. Re-running with the same --workdir reuses a variant only if its stored config equals
the requested one, resumes an unfinished one, and refuses one whose settings changed (naming them)
before anything trains.
"""

import os
import sys

import jax
from absl import app, flags
from ml_collections import config_flags

from attnmt import data, schema
from attnmt.analysis import report
from attnmt.compare import family
from attnmt.errors import ConfigError
from attnmt.training import lock, parallel, trainer
from attnmt.training.lock import LockHeld
from experiments import common, cores, rounds, sweep_plan, sweep_report
from experiments.configs import default

FLAGS = flags.FLAGS
config_flags.DEFINE_config_file(
  'config', 'experiments/configs/main_ablation.py', 'Config file with a sweep section.', lock_config=True
)
flags.DEFINE_string(
  'workdir', None, 'Root directory of this sweep (required): one run directory per variant, tables, plots.'
)
common.define_distributed_flags()


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f'unexpected arguments {argv[1:]}')
  common.run_guarded(_sweep, 'finished variants and saved checkpoints are kept: run the same command again to resume')


def _sweep():
  common.initialize_distributed()
  config, root = _sweep_config(), FLAGS.workdir
  if config.sweep.rounds:  # the rounds' family must name variants that exist, before anything trains
    family.contrast_pairs(sweep_plan.pooled_names(sweep_plan.variants(config)[0]), config.sweep.contrasts)
    return rounds.run(config, root)
  runs, shard = _planned_runs(config, root)
  if config.sweep.report_only:
    return sweep_report.write_finished(config, root, runs, shard)
  done = {}
  for _, workdir, run in runs:  # a variant whose settings changed is refused before anything trains
    done[workdir] = sweep_report.finished(workdir, run)
    if done[workdir] is None:
      trainer.check_config(run)
      trainer.check_workdir(workdir, run, 'use another --workdir for this sweep, or move that variant directory aside')
  processes = 1 if shard is not None else cores.plan(config.sweep.processes, list(done.values()).count(None))
  if processes > 1:
    return _on_cores(config, root, runs, processes, [run for _, workdir, run in runs if done[workdir] is None])
  _in_turn(config, root, runs, shard, done)


def _sweep_config():
  """--config, its sweep section checked, and filled where the config was written before a sweep setting existed
  (such a setting does what its declared value_before does)."""
  config = FLAGS.config
  if 'sweep' not in config:
    raise ConfigError(
      f'{FLAGS["config"].value} has no sweep section; use a sweep config such as '
      'experiments/configs/main_ablation.py, or experiments/train.py for one run'
    )
  schema.check('sweep', default.SWEEP, config.sweep)
  with config.sweep.unlocked():
    config.sweep.update(schema.fill_missing(default.SWEEP, config.sweep.to_dict()))
  return config


def _planned_runs(config, root: str) -> tuple[list, object]:
  """(name, workdir, run config) of every run this process may train, in order, and its shard
  (sweep_plan.shard_of), the plan printed; the analysis's family is checked before anything trains."""
  if str(config.train.seeds).strip().lower() == 'auto':
    print(sweep_plan.resolve_auto_seeds(config, jax.default_backend()))
  keep, refused = sweep_plan.variants(config)
  for over, why in refused:
    print(f'skipping {over}: {why}')
  if not keep:
    raise ConfigError(
      f'no valid variant among the swept values ({len(refused)} combination(s) refused, see above); '
      'nothing was trained or written'
    )
  pooled = sweep_plan.pooled_names(keep)  # what the analysis compares: seeds trained as runs pooled
  if sweep_plan.seeds_swept(config):
    print(f'{len(keep)} run(s), a run per seed: {len(pooled)} variant(s); {len(refused)} combination(s) skipped')
  else:
    print(f'{len(keep)} variant(s) x seeds {config.train.seeds}; {len(refused)} combination(s) skipped')
  if len(keep) > 1:
    family.contrast_pairs(pooled, config.sweep.contrasts)
  runs = [(name, os.path.join(root, name.replace('/', '-')), run) for name, run in keep]
  shard = sweep_plan.shard_of(config.sweep.shard, len(runs))
  if shard == sweep_plan.AUTO:
    print('shard auto: training every unfinished variant that no other process holds, in order')
    if sweep_plan.seeds_swept(config):
      runs = sweep_plan.seed_major(runs)
  elif shard is not None:
    runs = runs[shard[0] :: shard[1]]
    print(f'shard {shard[0]}/{shard[1]}: {len(runs)} variant(s): {", ".join(n for n, _, _ in runs)}')
  return runs, shard


def _in_turn(config, root: str, runs: list, shard, done: dict) -> None:
  """The runs trained one after another by this process (those `done` reused), then, by process 0 of a sweep
  that is not sharded, the tables, plots and analysis. A shard shares the root with the other shards: each
  variant's own training lock keeps them apart."""
  with lock.hold(root, 'sweep', enabled=parallel.is_main_process() and shard is None):
    rows, dirs = [], []
    corpora = {}  # the runs' corpus, read once by this process (data.prepare_once)
    for name, workdir, run in runs:
      print(f'\n=== {name} -> {workdir}', flush=True)
      done[workdir] = done[workdir] or sweep_report.finished(workdir, run)  # another shard may have finished it
      if done[workdir] is not None:
        print(f'(finished earlier with this config: reusing {workdir}/results.json)')
      elif shard is not None:  # a variant another process holds is theirs to train
        try:
          done[workdir] = trainer.train_and_evaluate(run, workdir, corpora)
        except LockHeld as e:  # a sibling process of this sweep is normal; anyone else's is named
          print('(the other core is training it)' if os.environ.get(cores.CHILD_ENV) else f'(skipped: {e})')
          continue
      rows.append(done[workdir] or trainer.train_and_evaluate(run, workdir, corpora))
      dirs.append(workdir)
    if not parallel.is_main_process():
      return  # process 0 writes the tables and plots and runs the analysis
    if shard is not None and not os.environ.get(cores.CHILD_ENV):
      print(
        f'\nshard {config.sweep.shard} finished {len(rows)} variant(s); when every shard has finished, run the '
        'same command with --config.sweep.report_only=true (and no shard) to write the tables and the analysis'
      )
      return
    if shard is None:
      sweep_report.write(config, root, rows, dirs, corpora)


def _on_cores(config, root, runs, processes, unfinished):
  """The unfinished variants (`unfinished`: their run configs) trained by `processes` single-threaded processes, one
  per core (experiments/cores.py), then the tables and analysis of the whole sweep, as one process would write
  them."""
  print(
    f'training on {processes} cores, one single-threaded process per core (--config.sweep.processes=1 trains in one)'
  )
  with lock.hold(root, 'sweep'):
    # The corpus is built here, on every core (the two tokenizers on two threads), before the single-core processes
    # start and read it; the analysis uses it again.
    corpora = {}
    for run in unfinished:
      data.prepare_once(run.data, corpora)
    dirs, ahead = [workdir for _, workdir, _ in runs], {}

    def analyze_finished(training):  # on the core of the first process to finish, while the others train
      if config.sweep.analyze:
        finished = [workdir for _, workdir, run in runs if sweep_report.finished(workdir, run) is not None]
        pooled = len({run.pool for _, _, run in runs}) < len(runs)  # seeds trained as runs pool into fewer variants
        out, which, seeds_as_runs, options = sweep_report.analysis_arguments(config, root, pooled)
        stop = lambda: not training()  # the rest on every core, after training
        done = report.analyze_ahead(ahead, dirs, finished, out, which, seeds_as_runs, corpora, stop, **options)
        print(f'analysed {len(done)} finished run(s) on the idle core while the last ones train')

    args = ['--config.sweep.shard=auto', '--config.sweep.processes=1']
    failed = cores.run_children(args, processes, while_waiting=analyze_finished)
    rows = [sweep_report.finished(workdir, run) for _, workdir, run in runs]
    missing = [name for (name, _, _), row in zip(runs, rows) if row is None]
    if failed:  # the child's own lines have said why
      resume = bool(missing) or cores.stopped(failed)
      print(cores.failure_line(failed, resume), file=sys.stderr)
      if resume:
        sys.exit(failed[0][1])
    if missing:
      raise ConfigError(f'variant(s) {", ".join(missing)} did not finish; run the same command again to resume them')
    sweep_report.write(config, root, rows, dirs, corpora, ahead)


if __name__ == '__main__':
  flags.mark_flag_as_required('workdir')
  app.run(main, flags_parser=common.parse_flags)
