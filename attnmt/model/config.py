"""The model's configuration: one frozen dataclass, validated once, with errors that name the fix.

Experiments keep settings in an `ml_collections.ConfigDict` (`config.model`); `ModelConfig.from_dict`
turns that section into this hashable object, which Flax modules and `jax.jit` can hold as static data.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from attnmt.errors import ConfigError
from attnmt.model import forms, normalizers, scores, windows

CELLS = ('lstm', 'gru')
INIT_STATES = ('bridge', 'last', 'zero')
COVERAGES = ('none', 'sum')
DTYPES = ('float32', 'bfloat16')


@dataclasses.dataclass(frozen=True)
class ModelConfig:
  """Every choice of the encoder-decoder. Field comments give the paper term where there is one.

  The defaults are the recipe that learned fastest per CPU-minute on the embedded corpus (docs/learning.md;
  the figures named are in docs/curves/); experiments/configs/default.py takes its model section from
  here. The vocabulary sizes are filled in from the trained tokenizers.
  """

  source_vocab_size: int = 8000
  target_vocab_size: int = 8000
  embed_size: int = 128  # source and target embedding size
  cell: str = 'lstm'  # 'lstm' or 'gru', for encoder and decoder
  encoder_hidden_size: int = 128  # per direction
  encoder_layers: int = 1
  bidirectional: bool = True  # annotation h_i = [fwd_i ; bwd_i] (Bahdanau Sec. 3.2)
  decoder_hidden_size: int = 256  # = annotation size, so 'dot' applies too (size.png: twice the main job's)
  decoder_layers: int = 1
  dropout: float = 0.2  # between RNN layers, on embeddings and before the output layer
  score: str = 'additive'  # a registered score (attnmt/model/scores.py) or 'my_pkg.module:MyScore'
  attention_size: int = 128  # A: hidden size of additive / concat scores and of local_p's predictor
  window: str = 'global'  # 'global', 'local_m', 'local_p' (attnmt/model/windows.py) or an import path
  window_size: int = 10  # D: half-width of the local window; Gaussian sigma = D / 2
  # 'softmax'; sparse: 'sparsemax', 'entmax15'; 'monotonic' (Raffel et al. 2017: expected alignment in training,
  # hard monotonic attention in greedy and beam search; window 'global' only) (attnmt/model/normalizers.py) or an import path
  normalizer: str = 'softmax'
  # 'sum': Tu et al. 2016's coverage C_i = sum_{t'<t} a_t'i enters the score, e_i = v . tanh(W q + U h_i + C_i w_c + b)
  # (w_c starts at 0); for scores whose keys enter a tanh: additive, normed_additive, concat
  coverage: str = 'none'
  # the decoder form (attnmt/model/forms.py): 'bahdanau': query s_{t-1}, deep output; 'luong': query s_t, h~_t;
  # or an import path 'my_pkg.forms:MyForm'
  query_timing: str = 'bahdanau'
  input_feeding: bool = True  # luong only: feed h~_{t-1} into the next RNN input (Luong Sec. 3.3)
  output_size: int = 256  # bahdanau only: size of tanh(W_g [s_t ; c_t ; E y_{t-1}])
  init_state: str = 'bridge'  # 'bridge': tanh(W mean_i h_i); 'last': final encoder states; 'zero'
  max_source_length: int = 128  # longest source the 'location' score can address (its output size)
  dtype: str = 'float32'  # computation dtype; parameters stay float32

  @property
  def annotation_size(self) -> int:
    return self.encoder_hidden_size * (2 if self.bidirectional else 1)

  @classmethod
  def from_dict(cls, d: Mapping[str, Any]) -> 'ModelConfig':
    d = dict(d.items()) if hasattr(d, 'items') else dict(d)
    fields = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(d) - fields)
    if unknown:
      raise ConfigError(f'unknown model setting(s) {unknown}; valid settings: {sorted(fields)}')
    cfg = cls(**d)
    cfg.validate()
    return cfg

  def validate(self) -> 'ModelConfig':
    _choice('cell', self.cell, CELLS)
    _choice('init_state', self.init_state, INIT_STATES)
    _choice('dtype', self.dtype, DTYPES)
    _choice('coverage', self.coverage, COVERAGES)
    for name in (
      'source_vocab_size',
      'target_vocab_size',
      'embed_size',
      'encoder_hidden_size',
      'encoder_layers',
      'decoder_hidden_size',
      'decoder_layers',
      'attention_size',
      'output_size',
      'max_source_length',
      'window_size',
    ):
      if int(getattr(self, name)) < 1:
        raise ConfigError(f'model.{name} must be at least 1, got {getattr(self, name)}')
    if not 0.0 <= self.dropout < 1.0:
      raise ConfigError(f'model.dropout must be in [0, 1), got {self.dropout}')
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


def _choice(name: str, value: str, valid: tuple[str, ...]) -> None:
  if value not in valid:
    raise ConfigError(f"unknown model.{name} '{value}'; valid: {', '.join(valid)}")
