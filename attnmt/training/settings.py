"""Checks every `train` and `data` setting (and the types of the `model` settings) before a run writes
anything; each failure is one ConfigError naming the key and its valid range.

The model's values and their combinations are checked by attnmt.model.config.ModelConfig.validate; settings that
only work together across sections (supervised attention) by validate_supervision.
"""

from __future__ import annotations

import math
import numbers

import ml_collections

from attnmt.errors import ConfigError

# (key, kind, lowest, highest): kinds 'int', 'float', 'bool', 'str'; a bound of None is open. Intervals
# written as text in the messages: [lo, hi] inclusive; floats marked `>` exclude their lowest value.
TRAIN = (
  ('num_steps', 'int', 1, None),
  ('time_budget_minutes', 'float', 0.0, None),
  ('learning_rate', 'float', '>0', None),
  ('warmup_steps', 'int', 0, None),
  ('clip_norm', 'float', 0.0, None),
  ('label_smoothing', 'float', 0.0, '<1'),
  ('coverage_loss_weight', 'float', 0.0, None),
  ('alignment_loss_weight', 'float', 0.0, None),
  ('log_every', 'int', 1, None),
  ('eval_every', 'int', 0, None),
  ('eval_beam_size', 'int', 0, None),
  ('eval_max_sentences', 'int', 0, None),
  ('tensorboard_heatmaps', 'int', 0, None),
  ('checkpoint_every', 'int', 1, None),
  ('beam_alpha', 'float', 0.0, None),
  ('beam_coverage_penalty', 'float', 0.0, None),
  ('max_decode_factor', 'float', '>0', None),
  ('num_devices', 'int', 0, None),
  ('seeds', 'str', None, None),
  ('schedule', 'str', None, None),
  ('nonfinite', 'str', None, None),
)
TRAIN_CHOICES = {'schedule': ('constant', 'cosine', 'rsqrt'), 'nonfinite': ('stop', 'skip')}

DATA = (
  ('name', 'str', None, None),
  ('data_dir', 'str', None, None),
  ('source_lang', 'str', None, None),
  ('target_lang', 'str', None, None),
  ('books', 'str', None, None),
  ('sword_path', 'str', None, None),
  ('tsv_path', 'str', None, None),
  ('skip_bad_lines', 'bool', None, None),
  ('alignment_path', 'str', None, None),
  ('validation_fraction', 'float', 0.0, '<1'),
  ('test_fraction', 'float', 0.0, '<1'),
  ('synthetic_size', 'int', 1, None),
  ('synthetic_eval_size', 'int', 1, None),
  ('synthetic_min_numbers', 'int', 1, None),
  ('synthetic_max_numbers', 'int', 1, None),
  ('synthetic_max_digits', 'int', 1, 3),
  ('seed', 'int', None, None),
  ('tokenizer', 'str', None, None),
  ('sp_model_type', 'str', None, None),
  ('vocab_size', 'int', 5, None),
  ('max_source_length', 'int', 0, None),
  ('max_target_length', 'int', 0, None),
  ('eval_max_source_length', 'int', 0, None),
  ('eval_max_target_length', 'int', 0, None),
  ('batch_size', 'int', 1, None),
  ('batch_tokens', 'int', 0, None),
  ('bucket', 'bool', None, None),
  ('bucket_window', 'int', 1, None),
  ('pad_to_multiple', 'int', 1, None),
  ('eval_pad_to_multiple', 'int', 0, None),
  ('fixed_source_length', 'int', 0, None),
  ('fixed_target_length', 'int', 0, None),
  ('drop_remainder', 'bool', None, None),
  ('num_epochs', 'int', 0, None),
  ('shuffle_seed', 'int', None, None),
)
DATA_CHOICES = {'tokenizer': ('sentencepiece', 'word'), 'sp_model_type': ('unigram', 'bpe')}

MODEL_BOOLS = ('bidirectional', 'input_feeding')
MODEL_FLOATS = ('dropout',)


def _range_text(kind: str, lo, hi) -> str:
  what = 'an integer' if kind == 'int' else 'a finite number'
  if lo is None and hi is None:
    return what
  parts = []
  if lo is not None:
    parts.append(f'> {lo[1:]}' if isinstance(lo, str) else f'>= {lo}')
  if hi is not None:
    parts.append(f'< {hi[1:]}' if isinstance(hi, str) else f'<= {hi}')
  return f'{what} ' + ' and '.join(parts)


def _check(section: str, key: str, value, kind: str, lo, hi) -> None:
  name = f'{section}.{key}'
  if kind == 'bool':
    if not isinstance(value, bool):
      raise ConfigError(f'{name} must be true or false, got {value!r}')
    return
  if kind == 'str':
    if not isinstance(value, str):
      raise ConfigError(f'{name} must be a string, got {value!r}')
    return
  if (
    isinstance(value, bool) or not isinstance(value, numbers.Real) or (kind == 'int' and not float(value).is_integer())
  ):
    raise ConfigError(f'{name} must be {_range_text(kind, lo, hi)}, got {value!r}')
  v = float(value)
  bad = not math.isfinite(v)
  if lo is not None:
    bad |= v <= float(lo[1:]) if isinstance(lo, str) else v < lo
  if hi is not None:
    bad |= v >= float(hi[1:]) if isinstance(hi, str) else v > hi
  if bad:
    raise ConfigError(f'{name} must be {_range_text(kind, lo, hi)}, got {value!r}')


def _section(config, name: str) -> ml_collections.ConfigDict:
  section = config.get(name) if hasattr(config, 'get') else None
  if section is None:
    raise ConfigError(f'the config has no {name} section; start from experiments/configs/default.py')
  return section


def validate_train(t) -> None:
  for key, kind, lo, hi in TRAIN:
    if key in t:
      _check('train', key, t[key], kind, lo, hi)
  for key, valid in TRAIN_CHOICES.items():
    if key in t and t[key] not in valid:
      raise ConfigError(f"unknown train.{key} '{t[key]}'; valid: {', '.join(valid)}")


def validate_data(d) -> None:
  for key, kind, lo, hi in DATA:
    if key in d:
      _check('data', key, d[key], kind, lo, hi)
  for key, valid in DATA_CHOICES.items():
    if key in d and d[key] not in valid:
      raise ConfigError(f"unknown data.{key} '{d[key]}'; valid: {', '.join(valid)}")
  if not d.get('name', 'x'):
    raise ConfigError("data.name is empty; name a dataset, e.g. 'bible_en_es', 'tsv_pairs' or 'synthetic_numbers'")
  if d.get('name') == 'tsv_pairs' and not d.get('tsv_path'):
    raise ConfigError('data.name=tsv_pairs needs data.tsv_path, the sentence-pair file')
  if d.get('alignment_path') and d.get('name') != 'tsv_pairs':
    raise ConfigError(
      f'data.alignment_path is read only beside a tsv_pairs corpus, and data.name={d.name}; set '
      "data.name=tsv_pairs with data.tsv_path, or data.alignment_path=''"
    )
  if d.get('validation_fraction', 0) + d.get('test_fraction', 0) >= 1:
    raise ConfigError(
      f'data.validation_fraction + data.test_fraction must be < 1 (the rest trains), got '
      f"{d.validation_fraction} + {d.test_fraction}"
    )
  if d.get('synthetic_max_numbers', 1) < d.get('synthetic_min_numbers', 1):
    raise ConfigError(
      f'data.synthetic_max_numbers ({d.synthetic_max_numbers}) must be >= '
      f'data.synthetic_min_numbers ({d.synthetic_min_numbers})'
    )


def has_gold_alignments(d) -> bool:
  """Whether the corpus of data config `d` carries gold word alignments: the synthetic task does, and a
  tsv_pairs corpus with a Pharaoh file (data.alignment_path)."""
  return d.get('name') == 'synthetic_numbers' or (d.get('name') == 'tsv_pairs' and bool(d.get('alignment_path')))


def validate_supervision(config) -> None:
  """Supervised attention (train.alignment_loss_weight > 0) needs attention to train and gold alignments."""
  weight = config.train.get('alignment_loss_weight', 0.0)
  if not weight:
    return
  if config.model.get('score') == 'none':
    raise ConfigError(
      f'train.alignment_loss_weight={weight} trains attention, and model.score=none has none (every weight is '
      '1 / length); use an attention score such as additive, or set the weight to 0'
    )
  if not has_gold_alignments(config.data):
    raise ConfigError(
      f'train.alignment_loss_weight={weight} needs gold alignments, and data.name={config.data.name} has none; '
      'use data.name=synthetic_numbers, or tsv_pairs with data.alignment_path (a Pharaoh file), or set the '
      'weight to 0'
    )


def validate_model_types(m) -> None:
  """Types only: ModelConfig.validate checks values, names and combinations."""
  for key in MODEL_BOOLS:
    if key in m and not isinstance(m[key], bool):
      raise ConfigError(f'model.{key} must be true or false, got {m[key]!r}')
  for key in MODEL_FLOATS:
    if key in m:
      _check('model', key, m[key], 'float', 0.0, '<1')
  for key, value in m.items():
    if key not in MODEL_BOOLS + MODEL_FLOATS and not isinstance(value, str):
      if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ConfigError(f'model.{key} must be an integer, got {value!r}')


def validate(config) -> None:
  """Every train and data value, the model values' types, before anything is written."""
  validate_train(_section(config, 'train'))
  validate_data(_section(config, 'data'))
  validate_model_types(_section(config, 'model'))
  validate_supervision(config)
