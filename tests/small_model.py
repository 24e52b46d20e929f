"""The small model the model tests build on, defined once: every size distinct, so that a transposed
shape fails. `conftest.py` hands it to tests as the `small` fixture; tests that need it at import time
(in parametrize lists, or for module-level configs) import `SMALL` from here. `steps_equal_teacher_forcing` is
the check every decoder variant passes: teacher-forced outputs equal decoding the same targets step by step.

The sizes that are options of a component (a score's `size`, a window's `size`, ...) are `OPTIONS`: `SMALL`
writes them into its own selections, and `sized(fields)` writes them into whichever selections a test chooses
(`ModelConfig(**sized({**small, 'score': 'concat', 'window': 'local_p'}))` is concat(size=5) with
local_p(size=2, predictor_size=5)), so a test that swaps a component keeps the small sizes."""

import jax
import numpy as np

# The small sizes of the components' options, by the model setting that selects the component: each is written
# into a selection whose class declares that option and does not set it already.
OPTIONS = {
  'score': {'size': 5, 'positions': 10},  # additive / normed_additive / concat's A; location's positions
  'window': {'size': 2, 'predictor_size': 5},  # local_m / local_p's half-width D; local_p's predictor size
  'query_timing': {'deep_output_size': 7},  # bahdanau's deep output
}

SMALL = dict(
  dropout=0.0,
  source_vocab_size=20,
  target_vocab_size=23,
  embed_size=8,
  encoder_hidden_size=6,
  decoder_hidden_size=12,
  score='additive(size=5)',
  query_timing='bahdanau(deep_output_size=7)',
)


def with_options(kind: str, text: str) -> str:
  """Selection `text` of component `kind` ('score', 'window', ...) with the small sizes (`OPTIONS`) of the
  options its class declares and `text` does not write."""
  from attnmt.model import registry
  from attnmt.model.config import COMPONENTS  # here: jax reads its cache settings from the environment first

  reg = COMPONENTS[kind]
  name, written = registry.parse(reg.setting, text)
  declared = {row.key for row in reg.resolve(text).settings}
  added = [(k, v) for k, v in OPTIONS.get(kind, {}).items() if k in declared and k not in dict(written)]
  options = [*written, *added]
  if not options:
    return text
  return name + '(' + ', '.join(f'{k}={str(v).lower() if isinstance(v, bool) else v}' for k, v in options) + ')'


def sized(fields: dict) -> dict:
  """ModelConfig fields with each component selection given the small sizes (`with_options`)."""
  from attnmt.model.config import ModelConfig

  out = dict(fields)
  for kind in OPTIONS:
    text = out.get(kind, getattr(ModelConfig, kind))
    if isinstance(text, str):
      out[kind] = with_options(kind, text)
  return out


def small_config(**over):
  """The small model's ModelConfig (validated) with the fields `over` changed, every component at the small
  sizes."""
  from attnmt.model.config import ModelConfig

  return ModelConfig.from_dict(sized({**SMALL, **over}))


def steps_equal_teacher_forcing(model, params, src, lengths, tgt):
  """The teacher-forced logits and weights of `model` (a Seq2Seq) on `tgt`, after checking that feeding the
  same targets one decode step at a time gives the same logits and weights at every position; returns
  (logits, weights, the state after the last step)."""
  from attnmt.model.seq2seq import Seq2Seq

  logits, weights = jax.jit(model.apply)(params, src, lengths, tgt)
  memory, state = model.apply(params, src, lengths, method=Seq2Seq.encode)
  step = jax.jit(lambda m, s, y: model.apply(params, m, s, y, method=Seq2Seq.decode_step))
  for t in range(tgt.shape[1]):
    state, step_logits, step_weights = step(memory, state, tgt[:, t])
    np.testing.assert_allclose(step_logits, logits[:, t], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(step_weights, weights[:, t], rtol=1e-5, atol=1e-6)
  return logits, weights, state
