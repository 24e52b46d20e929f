"""The model's configuration: one frozen dataclass, validated once, with errors that name the fix.

Experiments keep settings in an `ml_collections.ConfigDict` (`config.model`); `ModelConfig.from_dict`
turns that section into this hashable object, which Flax modules and `jax.jit` can hold as static data.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from attnmt import schema
from attnmt.errors import ConfigError
from attnmt.model import forms, normalizers, scores, windows
from attnmt.schema import field


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
  score: str = field('additive', "a registered score (attnmt/model/scores.py) or 'my_pkg.module:MyScore'")
  attention_size: int = field(128, "A: hidden size of additive / concat scores and of local_p's predictor", lo=1)
  window: str = field('global', "'global', 'local_m', 'local_p' (attnmt/model/windows.py) or an import path")
  window_size: int = field(10, 'D: half-width of the local window; Gaussian sigma = D / 2', lo=1)
  normalizer: str = field(
    'softmax',
    "'softmax'; sparse: 'sparsemax', 'entmax15'; 'monotonic' (Raffel et al. 2017: expected alignment in training, "
    "hard monotonic attention in greedy and beam search; window 'global' only) (attnmt/model/normalizers.py) "
    'or an import path',
  )
  coverage: str = field(
    'none',
    "'sum': Tu et al. 2016's coverage C_i = sum_{t'<t} a_t'i enters the score, e_i = v . tanh(W q + U h_i + C_i "
    'w_c + b) (w_c starts at 0); for scores whose keys enter a tanh: additive, normed_additive, concat',
    choices=('none', 'sum'),
  )
  query_timing: str = field(
    'bahdanau',
    "the decoder form (attnmt/model/forms.py): 'bahdanau': query s_{t-1}, deep output; 'luong': query s_t, "
    "h~_t; or an import path 'my_pkg.forms:MyForm'",
  )
  input_feeding: bool = field(True, 'luong only: feed h~_{t-1} into the next RNN input (Luong Sec. 3.3)')
  output_size: int = field(256, 'bahdanau only: size of tanh(W_g [s_t ; c_t ; E y_{t-1}])', lo=1)
  init_state: str = field(
    'bridge',
    "'bridge': tanh(W mean_i h_i); 'last': final encoder states; 'zero'",
    choices=('bridge', 'last', 'zero'),
  )
  location_positions: int = field(
    128,
    "source positions the 'location' score has a weight for (its output size); a longer source's later "
    'positions get no attention. Not the training filter data.max_source_length',
    lo=1,
    formerly=('max_source_length',),
  )
  dtype: str = field('float32', 'computation dtype; parameters stay float32', choices=('float32', 'bfloat16'))

  @property
  def annotation_size(self) -> int:
    return self.encoder_hidden_size * (2 if self.bidirectional else 1)

  @classmethod
  def from_dict(cls, d: Mapping[str, Any]) -> 'ModelConfig':
    d = schema.current_keys(MODEL, dict(d.items()) if hasattr(d, 'items') else dict(d))
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
    if self.coverage != 'none' and not scores.build(self).coverage_in_keys:
      raise ConfigError(
        f"model.coverage '{self.coverage}' adds C_i w_c inside the score's tanh, which score '{self.score}' does not "
        "have; use score additive, normed_additive or concat, or coverage 'none'"
      )
    if self.init_state == 'last' and self.decoder_hidden_size != self.annotation_size:
      raise ConfigError(
        f"init_state 'last' copies the final encoder states, so decoder_hidden_size ({self.decoder_hidden_size}) "
        f'must equal the annotation size ({self.annotation_size}); use init_state \'bridge\' otherwise'
      )
    return self


MODEL = schema.rows_of(ModelConfig)  # the model section's rows (keys, defaults, meanings, accepted values)
