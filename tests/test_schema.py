"""attnmt.schema: each setting declared once (default, meaning, accepted values) and checked from the same
row; unknown keys refused with the nearest valid one, in the library and on the command line."""

import os
import subprocess
import sys

import ml_collections
import pytest

from attnmt import schema
from attnmt.data.config import DATA, get_data_config, validate_data
from attnmt.errors import ConfigError
from attnmt.schema import Setting
from attnmt.training.settings import TRAIN, get_train_config, validate_train

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize('rows', [TRAIN, DATA], ids=['train', 'data'])
def test_every_row_is_documented_and_its_default_passes_its_own_check(rows):
  assert len({r.key for r in rows}) == len(rows)
  for row in rows:
    assert row.doc.strip(), row.key
    schema.check_value('x', row, row.default)
    assert not row.choices or row.default in row.choices


def test_the_sections_are_the_rows():
  assert get_train_config().to_dict() == {r.key: r.default for r in TRAIN}
  assert get_data_config().to_dict() == {r.key: r.default for r in DATA}
  validate_train(get_train_config())
  validate_data(get_data_config())


def test_a_new_setting_is_one_row():
  rows = TRAIN + (Setting('dropout_schedule_steps', 10, 'a setting a researcher adds', lo=1),)
  section = schema.defaults(rows)
  assert section.dropout_schedule_steps == 10
  section.dropout_schedule_steps = 0
  with pytest.raises(ConfigError, match=r'^x.dropout_schedule_steps must be an integer >= 1, got 0$'):
    schema.check('x', rows, section)


@pytest.mark.parametrize(
  'key,value,message',
  [
    ('num_steps', 0, 'train.num_steps must be an integer >= 1, got 0'),
    ('learning_rate', 0.0, 'train.learning_rate must be a finite number > 0, got 0.0'),
    ('label_smoothing', 1.0, 'train.label_smoothing must be a finite number >= 0.0 and < 1, got 1.0'),
    ('schedule', 'linear', "unknown train.schedule 'linear'; valid: constant, cosine, rsqrt"),
    ('num_steps', True, 'train.num_steps must be an integer >= 1, got True'),
  ],
)
def test_train_values_out_of_range(key, value, message):
  t = get_train_config()
  t[key] = value
  with pytest.raises(ConfigError) as e:
    validate_train(t)
  assert str(e.value) == message


def test_unknown_keys_name_the_nearest():
  t = ml_collections.ConfigDict({'num_step': 10})
  with pytest.raises(ConfigError, match=r'^unknown setting train.num_step; did you mean train.num_steps\?$'):
    validate_train(t)
  with pytest.raises(ConfigError, match=r'^unknown setting data.zzz; valid: name, data_dir'):
    validate_data(ml_collections.ConfigDict({'zzz': 1}))


@pytest.mark.parametrize(
  'flag,line',
  [
    (
      '--config.train.num_step=10',
      'error: --config.train.num_step names no setting of the config; did you mean --config.train.num_steps?',
    ),
    (
      '--config.trian.seeds=1',
      'error: --config.trian.seeds names no setting of the config; did you mean --config.train.seeds?',
    ),
    (
      '--config.sweep.scores=none',
      'error: --config.sweep.scores: this config has no sweep section; use a sweep config such as '
      'experiments/configs/main_ablation.py',
    ),
  ],
)
def test_a_misspelt_override_is_one_line(flag, line, tmp_path):
  res = subprocess.run(
    [
      sys.executable,
      '-m',
      'experiments.train',
      '--config=experiments/configs/default.py',
      f'--workdir={tmp_path}',
      flag,
    ],
    cwd=ROOT,
    env=dict(os.environ, JAX_PLATFORMS='cpu', PYTHONPATH=ROOT),
    capture_output=True,
    text=True,
    timeout=300,
  )
  assert res.returncode == 2 and res.stderr.strip().splitlines() == [line], res.stderr[-2000:]
  assert os.listdir(tmp_path) == []
