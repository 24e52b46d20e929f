"""The learning rate a run logs every train.log_every steps is its schedule's, hand-worked: a linear warm-up from 0,
then the cosine to 0 at train.num_steps."""

import json

import pytest

from attnmt.training import trainer
from experiments.configs import tiny


@pytest.mark.slow
def test_the_logged_learning_rate_is_the_schedule(tmp_path):
  config = tiny.get_config()
  config.data.data_dir = str(tmp_path / 'data')
  config.train.seeds = '0'
  config.train.num_steps, config.train.log_every, config.train.eval_every = 8, 2, 0
  config.train.warmup_steps, config.train.schedule, config.train.learning_rate = 4, 'cosine', 0.01
  trainer.train_and_evaluate(config, str(tmp_path / 'run'))
  lines = (tmp_path / 'run' / 'metrics.jsonl').read_text().splitlines()
  logged = {r['step']: r['learning_rate'] for r in map(json.loads, lines) if r['split'] == 'train'}
  # warm-up: 0.01 * step / 4; then 0.01 * (1 + cos(pi * (step - 4) / 4)) / 2
  assert logged == pytest.approx({2: 0.005, 4: 0.01, 6: 0.005, 8: 0.0}, abs=1e-8)
