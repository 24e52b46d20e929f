"""The model's configuration: one frozen dataclass, validated once, with errors that name the fix.

Experiments keep settings in an `ml_collections.ConfigDict` (`config.model`); `ModelConfig.from_dict`
turns that section into this hashable object, which Flax modules and `jax.jit` can hold as static data.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

import sys

import ml_collections

from attnmt import schema
from attnmt.errors import ConfigError
from attnmt.model import forms, normalizers, scores, windows
from attnmt.schema import field

# The model settings that select a component, each with the registry of its kind. A component carries its own
# options (attnmt/model/registry.py): the model's config holds each selection with every option written out.
COMPONENTS = {
  'score': scores.REGISTRY,
  'window': windows.REGISTRY,
  'normalizer': normalizers.REGISTRY,
  'query_timing': forms.REGISTRY,
}


@dataclasses.dataclass(frozen=True)
class ModelConfig:
  """Every choice of the encoder-decoder, each declared once (`schema.field`: default, meaning, accepted
  values; `MODEL` below is the same declarations as rows). The meanings give the paper term where there is one.

  The defaults are the recipe that learned fastest per CPU-minute on the embedded corpus (docs/learning.md;
  the figures named are in docs/curves/); experiments/configs/default.py takes its model section from
  here. The vocabulary sizes are filled in from the trained tokenizers.
  """

  source_vocab_size: int = field(8000, 'from the trained source tokenizer', lo=1, derived=True)
  target_vocab_size: int = field(8000, 'from the trained target tokenizer', lo=1, derived=True)
  embed_size: int = field(128, 'source and target embedding size', lo=1)
  cell: str = field('lstm', 'the RNN cell of encoder and decoder', choices=('lstm', 'gru'))
  encoder_hidden_size: int = field(128, 'per direction', lo=1)
  encoder_layers: int = field(1, 'stacked encoder RNN layers', lo=1)
  bidirectional: bool = field(True, 'annotation h_i = [fwd_i ; bwd_i] (Bahdanau Sec. 3.2)')
  decoder_hidden_size: int = field(
    256, "= annotation size, so 'dot' applies too (size.png: twice the main job's)", lo=1
  )
  decoder_layers: int = field(1, 'stacked decoder RNN layers', lo=1)
  dropout: float = field(0.2, 'between RNN layers, on embeddings and before the output layer', lo=0.0, hi='<1')
  score: str = field(
    'additive',
    "a registered score (attnmt/model/scores.py) with its options, e.g. 'additive(size=64, coverage=sum)', or an "
    "import path 'my_pkg.module:MyScore(option=value)'",
  )
  window: str = field(
    'global', "'global', 'local_m(size=10)', 'local_p(size=10, predictor_size=128)' (attnmt/model/windows.py) or a path"
  )
  normalizer: str = field(
    'softmax',
    "'softmax'; sparse: 'sparsemax', 'entmax15'; 'monotonic' (Raffel et al. 2017: expected alignment in training, "
    "hard monotonic attention in greedy and beam search; window 'global' only) (attnmt/model/normalizers.py) "
    'or an import path',
  )
  query_timing: str = field(
    'bahdanau',
    "the decoder form (attnmt/model/forms.py): 'bahdanau(deep_output_size=256)': query s_{t-1}, deep output; "
    "'luong(input_feeding=true)': query s_t, h~_t; or an import path 'my_pkg.forms:MyForm'",
  )
  init_state: str = field(
    'bridge',
    "'bridge': tanh(W mean_i h_i); 'last': final encoder states; 'zero'",
    choices=('bridge', 'last', 'zero'),
  )
  dtype: str = field('float32', 'computation dtype; parameters stay float32', choices=('float32', 'bfloat16'))
  kernels: str = field(
    'xla',
    "how the recurrences run: 'xla', the readable path; 'pallas', on a GPU the RNN cell steps and the decoder's "
    'attention (built-in dot, general, scaled_dot, additive, concat, normed_additive with the global window and '
    'softmax) as fused Pallas kernels (attnmt/model/kernels/), the same model up to rounding; what is not fused, '
    'and anything off a GPU, runs the readable path, said in one line when the model is built',
    choices=('xla', 'pallas'),
    resumable=True,
  )

  def __post_init__(self):
    for kind, registry in COMPONENTS.items():  # one spelling per selection: every option written out
      value = getattr(self, kind)
      if isinstance(value, str):
        object.__setattr__(self, kind, registry.canonical(value))

  @property
  def annotation_size(self) -> int:
    return self.encoder_hidden_size * (2 if self.bidirectional else 1)

  @classmethod
  def from_dict(cls, d: Mapping[str, Any], live: bool = False) -> 'ModelConfig':
    """The validated config of a model section; former model settings now options of a component
    (`FORMER`, e.g. window_size) are read into the selection (`live`: canonical_section's)."""
    d = canonical_section(d, live)
    fields = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(d) - fields)
    if unknown:
      raise ConfigError(f'unknown model setting(s) {unknown}; valid settings: {sorted(fields)}')
    cfg = cls(**d)
    cfg.validate()
    return cfg

  def validate(self) -> 'ModelConfig':
    schema.check('model', MODEL, dataclasses.asdict(self))  # types, bounds and choices, from the declarations
    form = forms.build(self)  # unknown names and each form's, score's, window's and normaliser's own constraints
    forms.check_sizes(form)
    form.check()
    scores.build(self).check()
    windows.build(self).check()
    normalizers.build(self).check()
    if self.init_state == 'last' and self.decoder_hidden_size != self.annotation_size:
      raise ConfigError(
        f"init_state 'last' copies the final encoder states, so decoder_hidden_size ({self.decoder_hidden_size}) "
        f'must equal the annotation size ({self.annotation_size}); use init_state \'bridge\' otherwise'
      )
    return self


MODEL = schema.rows_of(ModelConfig)  # the model section's rows (keys, defaults, meanings, accepted values)

# Every former model setting that is now an option of a registered component (`Setting.formerly`), with the row
# of the option it became (the first class that declares it), and those a command line or config file may still
# set for one release (the most recent name of each option), by key with their type.
_FORMER_ROWS = {
  key: row
  for registry in reversed(COMPONENTS.values())
  for cls in reversed(registry.classes.values())
  for row in reversed(cls.settings)
  for key in row.formerly
}
FORMER = {row.formerly[0]: type(row.default) for row in _FORMER_ROWS.values()}


def former_option(key: str) -> str | None:
  """Where a former model setting `key` lives now, as a line's fix (None: `key` never was one): the component
  option it became and how to write it."""
  row = _FORMER_ROWS.get(key)
  if row is None:
    return None
  kind, cls = next(
    (kind, cls) for kind, registry in COMPONENTS.items() for cls in registry.classes.values() if row in cls.settings
  )
  return f"the option {row.key} of model.{kind} '{cls.name}': write model.{kind}='{cls.name}({row.key}=...)'"


_noticed: set = set()


def canonical_section(section: Mapping[str, Any], live: bool = False) -> dict:
  """A model section (a config's or config.json's) under current keys: each component selection with every
  option written out (a selection the section lacks: its default), a former model setting (`FORMER`) read into
  the option that declares it and then dropped (unset ones, None, are dropped silently).

  `live`: a config about to run, not a stored one. Each former setting given a value then prints one line,
  once per process, saying how to write it now, and one that no selected component reads is refused unless it
  is that option's default (a stored run keeps what it did: such a value was not read then either)."""
  d = schema.current_keys(MODEL, dict(section.items()) if hasattr(section, 'items') else dict(section))
  former = {k: d.pop(k) for k in _FORMER_ROWS if k in d}
  for key, value in former.items():
    if value is not None:  # its type alone here; the option it is read into checks its bounds
      row = _FORMER_ROWS[key]
      schema.check_value('model', dataclasses.replace(row, key=key, lo=None, hi=None, choices=()), value)
  defaults = {row.key: row.default for row in MODEL}
  for kind, registry in COMPONENTS.items():
    d[kind] = registry.canonical(str(d.get(kind, defaults[kind])), former)
  for key, value in former.items():
    if not live or value is None:
      continue
    readers = [kind for kind, registry in COMPONENTS.items() if _reads(registry.resolve(d[kind]), key)]
    if not readers and value != _FORMER_ROWS[key].default:
      raise ConfigError(
        f'model.{key}={value} is now an option of a component, and none selected here has it '
        f"({', '.join(f'{kind} {d[kind]}' for kind in COMPONENTS)}); drop it, or select a component with that option"
      )
    if key not in _noticed:
      _noticed.add(key)
      where = f'read as model.{readers[0]}={d[readers[0]]}' if readers else 'read by no component selected here'
      print(
        f'notice: model.{key}={value} is now an option of a component ({where}); write the option in the '
        'selection instead',
        file=sys.stderr,
      )
  return d


def _reads(cls: type, key: str) -> bool:
  return any(key in row.formerly for row in cls.settings)


def model_defaults() -> ml_collections.ConfigDict:
  """The model section of a config: ModelConfig's defaults less the derived vocabulary sizes, and each former
  setting (`FORMER`) as unset (None), so an old command line still parses and gets its one-line notice."""
  section = {row.key: row.default for row in MODEL if not row.derived}
  section.update({key: ml_collections.FieldReference(None, field_type=kind) for key, kind in FORMER.items()})
  return ml_collections.ConfigDict(section)
