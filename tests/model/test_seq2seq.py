"""The encoder and decoder: padding, teacher forcing against step-by-step decoding, config errors."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from small_model import sized, steps_equal_teacher_forcing

from attnmt.model import rnn, scores, windows
from attnmt.errors import ConfigError
from attnmt.model.config import ModelConfig
from attnmt.model.forms import names as form_names
from attnmt.model.encoder import Encoder
from attnmt.model.seq2seq import Seq2Seq, init_params

# Every pair of the three axes, not every triple: each attending score with each window, its query timing
# alternating so that each score meets both timings and each window both timings (21 of the 42 triples), and
# `none` with both timings. Each case compiles its own model; the whole product took twice as long.
COMBINATIONS = [
  (s, form_names()[(i + j) % 2], w)
  for i, s in enumerate(n for n in scores.names() if n != 'none')
  for j, w in enumerate(windows.names())
] + [('none', q, 'global') for q in form_names()]


def test_reverse_within_length_is_an_involution_that_keeps_padding():
  x = jnp.arange(6)
  np.testing.assert_array_equal(rnn.reverse_within_length(x, 4), [3, 2, 1, 0, 4, 5])
  np.testing.assert_array_equal(rnn.reverse_within_length(rnn.reverse_within_length(x, 4), 4), x)


@pytest.mark.parametrize('cell,layers,bidirectional', [('lstm', 1, True), ('gru', 2, True), ('lstm', 2, False)])
@pytest.mark.slow
def test_padded_annotations_equal_unpadded(small, cell, layers, bidirectional):
  """A sentence padded with arbitrary tokens gets the annotations and final state it has unpadded."""
  cfg = ModelConfig(**sized({**small, 'cell': cell, 'encoder_layers': layers, 'bidirectional': bidirectional}))
  enc = Encoder(cfg)
  rng = np.random.default_rng(0)
  sent = rng.integers(4, 20, size=5)
  params = enc.init(jax.random.key(0), jnp.asarray(sent[None]), jnp.array([5]))
  short, short_final = enc.apply(params, jnp.asarray(sent[None]), jnp.array([5]))
  padded_src = np.concatenate([sent, rng.integers(0, 20, size=4)])[None]  # junk, not even PAD
  long, long_final = enc.apply(params, jnp.asarray(padded_src), jnp.array([5]))
  np.testing.assert_allclose(long[0, :5], short[0], rtol=1e-6, atol=1e-6)
  assert np.all(np.asarray(long[0, 5:]) == 0.0)
  for a, b in zip(short_final, long_final):
    np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
  # The backward direction at position 0 has read the whole sentence: it differs from the forward one.
  if bidirectional:
    h = cfg.encoder_hidden_size
    assert not np.allclose(short[0, 0, h:], 0.0)


def test_backward_direction_reads_right_to_left(small):
  """The backward half at position i depends on tokens >= i only (gradient check)."""
  cfg = ModelConfig(**sized(small))
  enc = Encoder(cfg)
  src = jnp.array([[5, 6, 7, 8, 9, 0, 0]])
  params = enc.init(jax.random.key(1), src, jnp.array([5]))
  h = cfg.encoder_hidden_size

  def bwd_at(embed, i):
    p = jax.tree.map(lambda x: x, params)
    p['params']['embed'] = embed
    return jnp.sum(enc.apply(p, src, jnp.array([5]))[0][0, i, h:])

  embed = params['params']['embed']
  g = jax.grad(bwd_at)(embed, 2)  # depends on tokens 7, 8, 9 only, not 5, 6 or padding 0
  touched = np.abs(np.asarray(g)).sum(1) > 0
  assert touched[7] and touched[8] and touched[9]
  assert not touched[5] and not touched[6] and not touched[0]


@pytest.mark.parametrize('score,timing,window', COMBINATIONS)
@pytest.mark.slow
def test_teacher_forced_logits_equal_step_by_step(small, score, timing, window):
  """For every score x query timing x window: one scan over the target = feeding it token by token."""
  cfg = ModelConfig(
    **sized(
      {
        **small,
        'score': score,
        'query_timing': timing,
        'window': window,
        'decoder_layers': 2 if score == 'general' else 1,
        'init_state': 'last' if score == 'dot' else 'bridge',
      }
    )
  )
  params = {'params': init_params(cfg, jax.random.key(0))}
  model = Seq2Seq(cfg)
  rng = np.random.default_rng(1)
  src = jnp.asarray(rng.integers(4, 20, size=(3, 7)))
  lengths = jnp.array([7, 3, 5])
  tgt = jnp.asarray(rng.integers(4, 23, size=(3, 6)))
  logits, weights, _ = steps_equal_teacher_forcing(model, params, src, lengths, tgt)
  w = np.asarray(weights)
  for b, n in enumerate(np.asarray(lengths)):
    assert np.all(w[b, :, n:] == 0.0)  # no weight on padding
  if window == 'global':
    np.testing.assert_allclose(w.sum(-1), 1.0, rtol=1e-5)
  assert np.all(np.isfinite(np.asarray(logits)))


@pytest.mark.parametrize('init_state', ['bridge', 'last', 'zero'])
@pytest.mark.parametrize('cell', ['lstm', 'gru'])
@pytest.mark.slow
def test_initial_states(small, init_state, cell):
  cfg = ModelConfig(**sized({**small, 'cell': cell, 'init_state': init_state}))
  params = {'params': init_params(cfg, jax.random.key(0))}
  src, lengths = jnp.array([[5, 6, 7, 2, 0]]), jnp.array([4])
  memory, state = Seq2Seq(cfg).apply(params, src, lengths, method=Seq2Seq.encode)
  h0 = np.asarray(state.rnn[0][0])
  if init_state == 'zero':
    assert np.all(h0 == 0.0)
  elif init_state == 'last':  # [fwd final at the last valid position ; bwd final at position 0]
    ann, d = np.asarray(memory.annotations[0]), cfg.encoder_hidden_size
    np.testing.assert_allclose(h0[0], np.concatenate([ann[3, :d], ann[0, d:]]), rtol=1e-6)
  else:
    p = params['params']['decoder']
    mean = np.asarray(memory.annotations[0, :4]).mean(0)
    np.testing.assert_allclose(h0[0], np.tanh(mean @ p['W_bridge'] + p['b_bridge']), rtol=1e-5, atol=1e-6)


def test_dropout_changes_training_outputs_only(small):
  cfg = ModelConfig(**sized({**small, 'dropout': 0.3, 'decoder_layers': 2, 'encoder_layers': 2}))
  params = {'params': init_params(cfg, jax.random.key(0))}
  src, lengths, tgt = jnp.array([[5, 6, 7, 2]]), jnp.array([4]), jnp.array([[1, 5, 6]])
  apply = jax.jit(Seq2Seq(cfg).apply, static_argnames='train')  # two compilations, not four eager passes
  eval1, _ = apply(params, src, lengths, tgt)
  eval2, _ = apply(params, src, lengths, tgt)
  train1, _ = apply(params, src, lengths, tgt, train=True, rngs={'dropout': jax.random.key(1)})
  train2, _ = apply(params, src, lengths, tgt, train=True, rngs={'dropout': jax.random.key(2)})
  np.testing.assert_array_equal(eval1, eval2)
  assert not np.allclose(train1, train2) and not np.allclose(train1, eval1)


@pytest.mark.parametrize(
  'overrides,message',
  [
    (dict(score='bilinear'), "unknown model.score 'bilinear'; valid: none, additive"),
    (dict(window='local'), "unknown model.window 'local'; valid: global, local_m, local_p"),
    (dict(query_timing='late'), "unknown model.query_timing 'late'"),
    (dict(score='dot', decoder_hidden_size=100), "score 'dot' needs the query size"),
    (dict(score='none', window='local_m'), "score 'none' has no attention to window"),
    (dict(init_state='last', decoder_hidden_size=100), "init_state 'last' copies the final encoder states"),
    (dict(dropout=1.0), 'model.dropout must be a finite number >= 0.0 and < 1, got 1.0'),
    (dict(embed_size=0), 'model.embed_size must be an integer >= 1, got 0'),
    (dict(score='additive(size=0)'), 'model.score additive.size must be an integer >= 1, got 0'),
    (dict(window='local_p(size=4, predictor_size=0)'), 'model.window local_p.predictor_size must be an integer >= 1'),
    (dict(query_timing='bahdanau(deep_output_size=0)'), 'model.query_timing bahdanau.deep_output_size must be'),
    (dict(score='location(positions=2.5)'), 'model.score location.positions must be an integer >= 1, got 2.5'),
    (dict(score='additive(sise=3)'), "Additive has no option 'sise'; did you mean size?"),
  ],
)
def test_config_errors_name_the_fix(small, overrides, message):
  with pytest.raises(ConfigError, match=None) as err:
    ModelConfig.from_dict({**small, **overrides})
  assert message in str(err.value) and '\n' not in str(err.value)


def test_unknown_setting_is_refused():
  with pytest.raises(ConfigError, match="unknown model setting"):
    ModelConfig.from_dict({'scroe': 'dot'})


def test_location_score_gives_no_weight_beyond_its_range(small):
  """A source longer than the location score's `positions` is translated; its positions beyond the range get weight 0, the
  first ones the softmax of W_a q over the range (Luong Eq. 9), as NumPy computes it."""
  cfg = ModelConfig(**sized({**small, 'score': 'location(positions=4)'}))
  params = init_params(cfg, jax.random.key(0), src_len=6)
  src, lengths = jnp.array([[5, 6, 7, 8, 9, 2], [5, 6, 2, 0, 0, 0]]), jnp.array([6, 3])
  tgt = jnp.array([[1, 5, 6], [1, 7, 8]])
  logits, weights = jax.jit(Seq2Seq(cfg).apply)({'params': params}, src, lengths, tgt)
  w = np.asarray(weights)
  assert np.all(np.isfinite(np.asarray(logits)))
  assert np.all(w[0, :, 4:] == 0.0) and np.all(w[1, :, 3:] == 0.0)
  np.testing.assert_allclose(w.sum(-1), 1.0, rtol=1e-5)
  memory, state = Seq2Seq(cfg).apply({'params': params}, src, lengths, method=Seq2Seq.encode)
  _, _, w0 = Seq2Seq(cfg).apply({'params': params}, memory, state, tgt[:, 0], method=Seq2Seq.decode_step)
  p = params['decoder']
  s0 = np.asarray(state.rnn[-1][0])  # bahdanau timing: the query is the state before the step
  e = s0 @ np.asarray(p['attention']['W'])
  want = np.exp(e - e.max(-1, keepdims=True))
  want[1, 3:] = 0.0
  want /= want.sum(-1, keepdims=True)
  np.testing.assert_allclose(np.asarray(w0)[:, :4], want, rtol=1e-5, atol=1e-6)
