"""The small model the model tests build on, defined once: every size distinct, so that a transposed
shape fails. `conftest.py` hands it to tests as the `small` fixture; tests that need it at import time
(in parametrize lists, or for module-level configs) import `SMALL` from here. `steps_equal_teacher_forcing` is
the check every decoder variant passes: teacher-forced outputs equal decoding the same targets step by step."""

import jax
import numpy as np

SMALL = dict(
  dropout=0.0,
  source_vocab_size=20,
  target_vocab_size=23,
  embed_size=8,
  encoder_hidden_size=6,
  decoder_hidden_size=12,
  attention_size=5,
  output_size=7,
  window_size=2,
  location_positions=10,
)


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
