"""Coverage against no coverage: `additive` attention at the main job's size with Tu et al. 2016's coverage
in the score and Wu et al. 2016's beam penalty (beta 0.2). Its baseline is the `additive`/`softmax`
variant of experiments/configs/attention_axes.py, which differs in nothing else. docs/results/coverage.md
records what it measured, with See et al. 2017's coverage loss too
(`--config.train.coverage_loss_weight=1`, which from the first step, on subword tokens, ruined the model).

    ./launch.sh sweep --config=experiments/configs/coverage.py --workdir=runs/coverage
"""

from experiments.configs import attention_axes


def get_config():
  config = attention_axes.get_config()
  config.model.score = 'additive(size=64, coverage=sum)'
  config.train.coverage_loss_weight = 0.0
  config.train.beam_coverage_penalty = 0.2
  config.sweep.scores = config.model.score
  config.sweep.axes = ''
  return config
