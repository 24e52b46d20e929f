"""Attention math against independent NumPy references and hand-worked examples."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnmt.model import attention, normalizers, scores
from attnmt.model.config import ModelConfig
import references

SCORED = tuple(s for s in scores.names() if s != 'none')


def score_of(cfg, p, query_Q, annotations_SxH):
  """e_S of one query through the configured score's two halves."""
  score = scores.build(cfg)
  return score.scores(p, score.query(p, query_Q[None])[0], score.keys(p, annotations_SxH))


def np_scores(score, p, q, h):
  """The score table of docs/design.md ("Model"), written directly in NumPy from the raw parameters."""
  if score == 'additive':
    return np.array([p['v'] @ np.tanh(p['W'].T @ q + p['U'].T @ hi + p['b']) for hi in h])
  if score == 'normed_additive':
    v = p['g'] * p['v'] / np.linalg.norm(p['v'])
    return np.array([v @ np.tanh(p['W'].T @ q + p['U'].T @ hi + p['b']) for hi in h])
  if score == 'dot':
    return np.array([q @ hi for hi in h])
  if score == 'scaled_dot':
    return np.array([q @ hi / np.sqrt(len(q)) for hi in h])
  if score == 'general':
    return np.array([q @ (p['W'].T @ hi) for hi in h])
  if score == 'concat':
    w = np.concatenate([p['W_q'], p['W_h']], 0)  # W [q ; h_i] with W = [W_q ; W_h]
    return np.array([p['v'] @ np.tanh(w.T @ np.concatenate([q, hi])) for hi in h])
  if score == 'location':
    return (p['W'].T @ q)[: len(h)]
  raise ValueError(score)


def np_masked_softmax(e, length):
  out = np.zeros_like(e)
  if length:
    z = np.exp(e[:length] - e[:length].max())
    out[:length] = z / z.sum()
  return out


def sized_score(score, a_size, max_len):
  """The score's selection with attention size `a_size` (the tanh scores' `size`) and `max_len` positions
  (location's `positions`), each where the score has that option."""
  options = {'size': a_size, 'positions': max_len}
  keys = [row.key for row in scores.REGISTRY.resolve(score).settings if row.key in options]
  return score + (f"({', '.join(f'{k}={options[k]}' for k in keys)})" if keys else '')


def random_params(score, q_size, h_size, a_size, max_len, seed):
  cfg = ModelConfig(
    dropout=0.0,
    score=sized_score(score, a_size, max_len),
    decoder_hidden_size=q_size,
    encoder_hidden_size=h_size // 2,
  )
  p = attention.AttentionParams(cfg).init(jax.random.key(seed)).get('params', {})
  p = attention.AttentionParams(cfg).apply({'params': p})
  return cfg, p


@pytest.mark.parametrize('use_jit', [False, True])
@pytest.mark.parametrize('score', SCORED)
@pytest.mark.parametrize('shape', [(1, 4, 4, 3), (7, 6, 6, 5), (13, 16, 16, 8)])
def test_scores_match_numpy(score, shape, use_jit):
  """Every score, batched with vmap, equals the per-position NumPy formula."""
  num_positions, q_size, h_size, a_size = shape
  if score == 'general':
    h_size = q_size + 2  # general works with unequal sizes
  cfg, p = random_params(score, q_size, h_size, a_size, 20, seed=num_positions)
  rng = np.random.default_rng(num_positions)
  q_BxQ = rng.normal(size=(3, q_size)).astype(np.float32)
  h_BxSxH = rng.normal(size=(3, num_positions, h_size)).astype(np.float32)

  def f(p, q, h):
    return score_of(cfg, p, q, h)

  f = jax.vmap(f, in_axes=(None, 0, 0))
  got = (jax.jit(f) if use_jit else f)(p, q_BxQ, h_BxSxH)
  pn = jax.tree.map(np.asarray, p)
  want = np.stack([np_scores(score, pn, q, h) for q, h in zip(q_BxQ, h_BxSxH)])
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


# 'none' takes no window: that combination is a ConfigError (tests/model/test_seq2seq.py).
@pytest.mark.parametrize(
  'score,window', [(s, w) for s in SCORED for w in ('global', 'local_m', 'local_p')] + [('none', 'global')]
)
def test_attend_matches_numpy(score, window):
  """Scores, window, masked softmax and context together, for one query at target position t."""
  q_size = h_size = 6
  cfg, p = random_params(score, q_size, h_size, 5, 12, seed=3)
  # local_p's predictor has the attention size of the additive parameters it takes below
  sizes = {'global': '', 'local_m': '(size=2)', 'local_p': '(size=2, predictor_size=5)'}
  cfg = ModelConfig(**{**cfg.__dict__, 'window': window + sizes[window]})
  if window == 'local_p':
    _, p_loc = random_params('additive', q_size, h_size, 5, 12, seed=4)
    p = dict(p, W_p=p_loc['W'], v_p=p_loc['v'])
  rng = np.random.default_rng(5)
  q, h = rng.normal(size=q_size).astype(np.float32), rng.normal(size=(9, h_size)).astype(np.float32)
  length, t = 7, 5
  h[length:] = 0.0
  ctx, w = jax.jit(functools.partial(references.attend, cfg, p))(
    q, attention.precompute_keys(cfg, p, h), h, jnp.int32(length), jnp.int32(t)
  )
  pn = jax.tree.map(np.asarray, p)
  pos = np.arange(9)
  if score == 'none':
    want = (pos < length) / length
  else:
    e = np_scores(score, pn, q, h)
    if window == 'global':
      want = np_masked_softmax(e, length)
    else:
      centre = t if window == 'local_m' else length / (1 + np.exp(-pn['v_p'] @ np.tanh(pn['W_p'].T @ q)))
      inside = (pos < length) & (np.abs(pos - centre) <= 2)
      z = np.where(inside, np.exp(e - e[inside].max()), 0.0)
      want = z / z.sum()
      if window == 'local_p':
        want = want * np.exp(-((pos - centre) ** 2) / (2 * 1.0**2))
  np.testing.assert_allclose(w, want, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(ctx, want @ h, rtol=1e-5, atol=1e-6)
  assert np.all(np.asarray(w)[length:] == 0.0)


def test_additive_hand_worked_example():
  """README, 'Attention by hand': q = (1, 0), h = ((1, 0), (0, 1)), W = U = I, b = 0, v = (1, 1)."""
  p = {'W': jnp.eye(2), 'U': jnp.eye(2), 'b': jnp.zeros(2), 'v': jnp.ones(2)}
  h = jnp.array([[1.0, 0.0], [0.0, 1.0]])
  e = score_of(ModelConfig(dropout=0.0, score='additive'), p, jnp.array([1.0, 0.0]), h)
  np.testing.assert_allclose(e, [0.9640, 1.5232], atol=1e-4)  # tanh(2)+tanh(0), tanh(1)+tanh(1)
  a = normalizers.masked_softmax(e, jnp.array([True, True]))
  np.testing.assert_allclose(a, [0.3637, 0.6363], atol=1e-4)
  np.testing.assert_allclose(references.context_vector(a, h), [0.3637, 0.6363], atol=1e-4)


def test_dot_hand_worked_example():
  """README, 'Attention by hand': q = (1, 2), h = ((1, 0), (0, 1), (1, 1)); the last position is padding."""
  h = jnp.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
  e = score_of(ModelConfig(score='dot', encoder_hidden_size=1, decoder_hidden_size=2), {}, jnp.array([1.0, 2.0]), h)
  np.testing.assert_allclose(e, [1.0, 2.0, 3.0])
  a = normalizers.masked_softmax(e, jnp.array([True, True, True]))
  np.testing.assert_allclose(a, [0.0900, 0.2447, 0.6652], atol=1e-4)
  np.testing.assert_allclose(references.context_vector(a, h), [0.7553, 0.9100], atol=1e-4)
  a_masked = normalizers.masked_softmax(e, jnp.array([True, True, False]))  # softmax(1, 2) = (0.2689, 0.7311)
  np.testing.assert_allclose(a_masked, [0.2689, 0.7311, 0.0], atol=1e-4)


def test_masked_softmax_padding_gets_zero_weight_and_zero_gradient():
  e = jnp.array([0.3, -1.2, 2.0, 50.0, -7.0])
  mask = jnp.array([True, True, True, False, False])
  w = normalizers.masked_softmax(e, mask)
  assert np.all(np.asarray(w[3:]) == 0.0)
  np.testing.assert_allclose(w[:3], np_masked_softmax(np.asarray(e), 3)[:3], rtol=1e-6)
  # Gradient of any function of the weights (and of the context) w.r.t. padded scores is exactly 0.
  target = jnp.array([0.1, 0.5, -2.0, 3.0, 4.0])
  grad = jax.grad(lambda e: jnp.sum(normalizers.masked_softmax(e, mask) * target))(e)
  assert np.all(np.asarray(grad[3:]) == 0.0)
  assert np.all(np.asarray(grad[:3]) != 0.0)


def test_masked_softmax_all_padding_row_is_zero_without_nan():
  e = jnp.array([1.0, 2.0, 3.0])
  mask = jnp.zeros(3, bool)
  w = normalizers.masked_softmax(e, mask)
  assert np.all(np.asarray(w) == 0.0)
  grad = jax.grad(lambda e: jnp.sum(normalizers.masked_softmax(e, mask) ** 2))(e)
  assert np.all(np.isfinite(grad)) and np.all(np.asarray(grad) == 0.0)
  # A local_m window past the end of the source is such a row too.
  cfg = ModelConfig(dropout=0.0, score='dot', window='local_m(size=1)', decoder_hidden_size=4, encoder_hidden_size=2)
  h = jnp.ones((6, 4))
  ctx, w = references.attend(cfg, {}, jnp.ones(4), h, h, jnp.int32(2), jnp.int32(5))
  assert np.all(np.asarray(w) == 0.0) and np.all(np.isfinite(ctx))


def test_padding_gets_zero_gradient_through_the_whole_attention():
  """The context's gradient w.r.t. annotations and scores at padded positions is exactly zero."""
  cfg, p = random_params('additive', 4, 4, 3, 8, seed=0)
  rng = np.random.default_rng(0)
  q, h = jnp.asarray(rng.normal(size=4), jnp.float32), jnp.asarray(rng.normal(size=(6, 4)), jnp.float32)

  def loss(h):
    ctx, _ = references.attend(cfg, p, q, attention.precompute_keys(cfg, p, h), h, jnp.int32(4), jnp.int32(0))
    return jnp.sum(ctx**2)

  g = np.asarray(jax.grad(loss)(h))
  assert np.all(g[4:] == 0.0) and np.all(g[:4] != 0.0)
