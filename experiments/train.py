"""Train one attention variant (one or more seeds, vmapped together) from a config file plus overrides.

    python -m experiments.train --config=experiments/configs/default.py --workdir=runs/additive \
        --config.model.score=additive --config.train.seeds=0,1

Restarting with the same --workdir resumes from the latest checkpoint.
"""
from absl import app, flags
from ml_collections import config_flags

from experiments import common

FLAGS = flags.FLAGS
config_flags.DEFINE_config_file('config', 'experiments/configs/default.py', 'Config file.', lock_config=True)
flags.DEFINE_string('workdir', None, 'Run directory: checkpoints, metrics, config, vocabulary.', required=True)


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f'unexpected arguments {argv[1:]}; settings go in --config.x=y flags')
  common.run_guarded(lambda: _train())


def _train():
  from attnmt import train_lib
  summary = train_lib.train_and_evaluate(FLAGS.config, FLAGS.workdir)
  print(common.format_summary(summary))


if __name__ == '__main__':
  app.run(main)
