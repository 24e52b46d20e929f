"""attnmt.schema: each setting declared once (default, meaning, accepted values) and checked from the same
row; unknown keys refused with the nearest valid one, in the library and on the command line."""

import dataclasses
import os
import re
import subprocess
import sys

import ml_collections
import pytest

from attnmt import schema
from attnmt.data.config import DATA, get_data_config, validate_data
from attnmt.errors import ConfigError
from attnmt.schema import Setting
from attnmt.model import scores
from attnmt.model.config import FORMER, MODEL, ModelConfig, model_defaults
from attnmt.training import checkpoints, settings, train_step, trainer
from attnmt.training.settings import TRAIN, get_train_config, validate_train
from experiments.configs import default
from experiments.configs.default import SWEEP

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize('rows', [TRAIN, DATA, MODEL, SWEEP], ids=['train', 'data', 'model', 'sweep'])
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
  # the model section: ModelConfig's rows, and each former model setting (now a component's option) unset
  assert model_defaults().to_dict() == {r.key: r.default for r in MODEL if not r.derived} | dict.fromkeys(FORMER)
  assert default.get_config().model.to_dict() == model_defaults().to_dict()
  assert default.get_sweep_config('x').to_dict() == {r.key: r.default for r in SWEEP} | {'scores': 'x'}
  assert [r.key for r in MODEL] == [f.name for f in dataclasses.fields(ModelConfig)]


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
      '--config.model.max_source_length=10',  # the name before location_positions: the option it became, said
      "error: --config.model.max_source_length is a former name of the option positions of model.score 'location': "
      "write model.score='location(positions=...)' (data.max_source_length is another setting)",
    ),
    (
      '--config.model.batch_size=3',
      'error: --config.model.batch_size names no setting of the model section; did you mean --config.data.batch_size?',
    ),
    (
      '--config.sweep.scores=none',
      'error: --config.sweep.scores: this config has no sweep section; use a sweep config such as '
      'experiments/configs/main_ablation.py',
    ),
  ],
)
@pytest.mark.slow
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


@pytest.fixture
def added_settings(monkeypatch):
  """What a researcher adds: a train setting whose default changes what older runs did (so it declares the
  value that reproduces them) and one a resumed run may change, each one row and nothing else."""
  rows = TRAIN + (
    Setting('my_decay', 0.5, 'a new decay', lo=0.0, hi=1.0, before=0.0),
    Setting('my_report_every', 10, 'a new reporting interval', lo=1, resumable=True),
  )
  monkeypatch.setattr(settings, 'TRAIN', rows)
  monkeypatch.setitem(settings.SECTIONS, 'train', rows)
  config = default.get_config()
  with config.train.unlocked():
    config.train.update(schema.defaults(rows))
  return config


def test_an_added_setting_is_validated_saved_reloaded_and_compared_on_resume(added_settings, tmp_path):
  config = added_settings
  settings.validate(config)
  config.train.my_decay = 1.5
  with pytest.raises(ConfigError, match=r'^train.my_decay must be a finite number >= 0.0 and <= 1.0, got 1.5$'):
    settings.validate(config)
  config.train.my_decay = 0.5
  # saved with the run, and the same run compares equal
  run = tmp_path / 'run'
  checkpoints.save_config(str(run), config)
  assert checkpoints.load_config(str(run)).train.my_decay == 0.5
  assert checkpoints.run_differences(str(run), config) == ([], [])
  # an older run, written before both settings existed, reads as what it did
  old = tmp_path / 'old'
  older = config.to_dict()
  del older['train']['my_decay'], older['train']['my_report_every'], older['model']['query_timing']
  checkpoints.save_config(str(old), ml_collections.ConfigDict(older))
  loaded = checkpoints.load_config(str(old))
  bahdanau = ModelConfig(query_timing='bahdanau').query_timing  # the selection with its options written out
  assert (loaded.train.my_decay, loaded.train.my_report_every, loaded.model.query_timing) == (0.0, 10, bahdanau)
  # resuming it: the new decay's default is another run; the interval may change
  assert checkpoints.run_differences(str(old), config) == (['train.my_decay'], [])
  (old / 'checkpoints' / '100').mkdir(parents=True)
  with pytest.raises(ConfigError, match=r'holds a run with a different config \(differs in train.my_decay\)'):
    trainer.check_workdir(str(old), config)
  config.train.my_decay, config.train.my_report_every = 0.0, 50
  assert checkpoints.run_differences(str(old), config) == ([], ['train.my_report_every'])
  trainer.check_workdir(str(old), config)  # allowed: the run resumes with the new interval


def test_differences_by_hand():
  rows = {'train': (Setting('a', 1, 'x'), Setting('b', 1, 'x', resumable=True))}
  old = {'train': {'a': 1, 'b': 1, 'gone': 3}}
  assert schema.differences(rows, old, {'train': {'a': 2, 'b': 5}}) == (['train.a', 'train.gone'], ['train.b'])
  assert schema.differences(rows, old, old) == ([], [])
  assert schema.fill_missing((Setting('a', 1, 'x', before=0), Setting('b', 2, 'x')), {'b': 7}) == {'a': 0, 'b': 7}


@pytest.mark.parametrize('former', ['location_positions', 'max_source_length'])
def test_a_renamed_setting_reads_from_its_former_key_in_a_saved_run(tmp_path, former):
  """The location score's option `positions` was model.location_positions, and before that
  model.max_source_length (deliberately the compatibility path): a run saved under either former key loads as
  the option, compares equal to the same run configured with it, and rebuilds its ModelConfig; a section holding
  both former names is refused in one line."""
  config = default.get_config()
  config.model.score = 'location(positions=96)'
  older = config.to_dict()
  older['model'] = {k: v for k, v in older['model'].items() if k not in FORMER}  # as a run written then held it
  older['model'].update({'score': 'location', former: 96})
  fields = {**dataclasses.asdict(ModelConfig(score='location')), 'query_timing': 'bahdanau', former: 96}
  fields['score'] = 'location'
  checkpoints.save_config(str(tmp_path), ml_collections.ConfigDict(older), fields)
  loaded = checkpoints.load_config(str(tmp_path)).model
  assert loaded.score == 'location(positions=96)' and former not in loaded
  assert checkpoints.run_differences(str(tmp_path), config) == ([], [])
  config.model.score = 'location(positions=95)'
  assert checkpoints.run_differences(str(tmp_path), config) == (['model.score'], [])
  rebuilt = ModelConfig.from_dict(checkpoints.load_model_fields(str(tmp_path)))
  assert rebuilt == ModelConfig(score='location(positions=96)') and rebuilt.score == 'location(positions=96)'
  assert ModelConfig.from_dict({'score': 'location', former: 12}).score == 'location(positions=12)'
  with pytest.raises(ConfigError, match=r'^both max_source_length and location_positions are set; .* keep one$'):
    ModelConfig.from_dict({'score': 'location', 'max_source_length': 12, 'location_positions': 12})


def test_model_settings_are_checked_from_the_dataclass_fields():
  for key, value, message in [
    ('query_timing', 'luong(input_feeding=1)', 'model.query_timing luong.input_feeding must be true or false, got 1'),
    ('score', 'additive(size=0)', 'model.score additive.size must be an integer >= 1, got 0'),
    ('dropout', 1.0, 'model.dropout must be a finite number >= 0.0 and < 1, got 1.0'),
    ('embed_size', 0, 'model.embed_size must be an integer >= 1, got 0'),
    ('init_state', 'mean', "unknown model.init_state 'mean'; valid: bridge, last, zero"),
    ('embed_sise', 8, 'unknown setting model.embed_sise; did you mean model.embed_size?'),
  ]:
    d = default.get_config().to_dict()
    d['model'][key] = value  # as a config file may write it
    with pytest.raises(ConfigError) as e:
      settings.validate(ml_collections.ConfigDict(d))
    assert str(e.value) == message
  with pytest.raises(ConfigError, match="^unknown model.init_state 'mean'"):
    ModelConfig(init_state='mean').validate()


def test_a_dataclass_field_without_a_declaration_is_refused():
  @dataclasses.dataclass(frozen=True)
  class Partial:
    declared: int = schema.field(1, 'has a row')
    undeclared: int = 2

  with pytest.raises(TypeError, match='Partial.undeclared is not declared with schema.field'):
    schema.rows_of(Partial)


def test_the_schedules_are_the_declared_choices():
  (row,) = [r for r in TRAIN if r.key == 'schedule']
  assert set(train_step.AFTER_WARMUP) == set(row.choices)


def test_a_sweep_config_from_before_a_setting_reads_as_what_it_did():
  filled = schema.fill_missing(SWEEP, {'scores': 'additive'})
  assert filled['processes'] == '1' and filled['cases'] == '' and filled['scores'] == 'additive'
  with pytest.raises(ConfigError, match=r'^unknown setting sweep.scorse; did you mean sweep.scores\?$'):
    schema.check('sweep', SWEEP, {'scorse': 'x'})


class _Declared(scores.Additive):
  """A researcher's score whose `settings` the cases below replace."""


@pytest.mark.parametrize(
  'settings, line',
  [
    (Setting('size', 8, 'x'), 'settings is Setting, not a tuple; write settings = (Setting(...),) with a comma'),
    ((Setting('width', [1], 'x'),), "option 'width': its default [1] is a list; an option is a bool, int, float"),
    ((Setting('width', 3, 'x', lo='a'),), "option 'width': lo='a' is not a bound; give a finite number"),
    ((Setting('width', 3, 'x', hi=float('nan')),), "option 'width': hi=nan is not a bound"),
    ((Setting('mode', 'a', 'x', choices=('b',)),), "option 'mode': choices ('b',) must be strings among which is"),
    ((Setting(3, 3, 'x'),), "the option key 3 is not a Python name; write Setting('my_option', default, doc)"),
  ],
)
def test_a_component_option_declared_badly_is_one_line_naming_it(settings, line, monkeypatch):
  monkeypatch.setattr(_Declared, 'settings', settings)
  with pytest.raises(ConfigError) as e:
    ModelConfig.from_dict({'score': f'{__name__}:_Declared'})
  assert str(e.value).startswith('score _Declared') and line in str(e.value), str(e.value)


@pytest.mark.parametrize(
  'text, says',
  [
    ('local_p(size=4))', "has 1 ')' more than '('"),
    ('local_p(size=4)x', "has text after its options' ')'"),
    ('local_p(size=4', 'does not close its options'),
    ('local_p)', "has a ')' without '('"),
  ],
)
def test_a_selection_that_is_not_name_and_options_says_what_is_wrong(text, says):
  with pytest.raises(ConfigError, match=re.escape(f"model.window '{text}' {says}; write name(key=value, ...)")):
    ModelConfig.from_dict({'window': text})
