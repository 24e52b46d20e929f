"""Train one attention variant (one or more seeds, vmapped together) from a config file plus overrides.

    python -m experiments.train --config=experiments/configs/default.py --workdir=runs/additive \
        --config.model.score=additive --config.train.seeds=0,1

Restarting with the same --workdir resumes from the latest checkpoint; SIGTERM or Ctrl-C saves a checkpoint and
exits (status 128 + signal) saying how to resume; a NaN/inf loss stops the run (status 3) before any checkpoint
is written after it.
"""

import os
import time

from absl import app, flags
from ml_collections import config_flags

from attnmt.analysis import sweep_tables
from attnmt.training import parallel, trainer
from experiments import common

FLAGS = flags.FLAGS
config_flags.DEFINE_config_file('config', 'experiments/configs/default.py', 'Config file.', lock_config=True)
flags.DEFINE_string('workdir', None, 'Run directory: checkpoints, metrics, config, vocabulary.', required=True)
flags.DEFINE_bool('fresh', False, 'If --workdir holds a run, move it aside to <workdir>.old-<time> and start anew.')
common.define_distributed_flags()


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f'unexpected arguments {argv[1:]}; settings go in --config.x=y flags')
  common.run_guarded(
    _train, f'{FLAGS.workdir} keeps every checkpoint saved so far: run the same command again to resume'
  )


def _train():

  common.initialize_distributed()
  trainer.check_config(FLAGS.config)  # before --fresh moves anything
  if FLAGS.fresh and os.path.exists(FLAGS.workdir) and parallel.is_main_process():
    aside = f'{FLAGS.workdir.rstrip("/")}.old-{time.strftime("%Y%m%d-%H%M%S")}'
    os.rename(FLAGS.workdir, aside)
    print(f'Moved the previous run to {aside}')
  parallel.barrier('attnmt-fresh')  # no process looks at the workdir before process 0 moved it
  summary = trainer.train_and_evaluate(FLAGS.config, FLAGS.workdir)
  print(sweep_tables.format_summary(summary))


if __name__ == '__main__':
  app.run(main, flags_parser=common.parse_flags)
