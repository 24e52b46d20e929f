"""Attention: scores between a query and the annotations, masked softmax, alignment windows, context.

Written for one sentence as the equations read; `jax.vmap` batches them. Letters in names:
S source positions, Q query size, H annotation size, A attention size, K key size.

Scores are split in two halves so that work depending on the annotations alone happens once per
sentence (`precompute_keys`, e.g. Bahdanau's `U h_i`) and only the query-dependent half runs at every
decoder step (`scores`).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import flax.linen as nn

from attnmt.config import ConfigError, ModelConfig

Params = dict


def masked_softmax(e_S: jax.Array, mask_S: jax.Array) -> jax.Array:
  """Softmax over the positions where `mask_S` is true; masked positions get exactly 0 weight.

  Gradients to masked scores are exactly zero (they never enter an arithmetic path), and a row with
  no valid position returns all zeros instead of NaN.
  """
  e_S = e_S.astype(jnp.float32)
  any_valid = jnp.any(mask_S)
  e_max = jnp.max(jnp.where(mask_S, e_S, -jnp.inf))
  e_max = jax.lax.stop_gradient(jnp.where(any_valid, e_max, 0.0))
  z_S = jnp.where(mask_S, jnp.exp(jnp.where(mask_S, e_S, e_max) - e_max), 0.0)
  return z_S / jnp.maximum(jnp.sum(z_S), jnp.finfo(jnp.float32).tiny)


def context_vector(weights_S: jax.Array, annotations_SxH: jax.Array) -> jax.Array:
  """c = sum_i a_i h_i (Bahdanau Eq. 5)."""
  return jnp.einsum('s,sh->h', weights_S.astype(annotations_SxH.dtype), annotations_SxH)


def additive_scores(query_A: jax.Array, keys_SxA: jax.Array, v_A: jax.Array) -> jax.Array:
  """e_i = v . tanh(query_A + keys_i): Bahdanau Eq. 6 with query_A = W q + b and keys = U h."""
  return jnp.tanh(keys_SxA + query_A) @ v_A


def precompute_keys(score: str, p: Params, annotations_SxH: jax.Array) -> jax.Array:
  """The per-sentence half of a score: depends on the annotations only (S x K, K may be 0)."""
  if score in ('additive', 'normed_additive'):
    return annotations_SxH @ p['U']                    # U h_i, S x A
  if score == 'concat':
    return annotations_SxH @ p['W_h']                  # W [. ; h_i] split: W_h h_i, S x A
  if score == 'general':
    return annotations_SxH @ p['W']                    # W h_i, S x Q
  if score in ('dot', 'scaled_dot'):
    return annotations_SxH
  return jnp.zeros(annotations_SxH.shape[:1] + (0,), annotations_SxH.dtype)   # none, location


def scores(score: str, p: Params, query_Q: jax.Array, keys_SxK: jax.Array) -> jax.Array:
  """Unnormalised scores e_S of one query against precomputed keys (DESIGN.md, score table)."""
  num_positions = keys_SxK.shape[0]
  if score == 'additive':
    return additive_scores(query_Q @ p['W'] + p['b'], keys_SxK, p['v'])
  if score == 'normed_additive':     # weight-normalised v (Salimans & Kingma 2016) with gain g
    v = p['g'] * p['v'] * jax.lax.rsqrt(jnp.sum(jnp.square(p['v'])))
    return additive_scores(query_Q @ p['W'] + p['b'], keys_SxK, v)
  if score == 'concat':              # Luong Eq. 8 "concat": v . tanh(W_q q + W_h h_i), no bias
    return additive_scores(query_Q @ p['W_q'], keys_SxK, p['v'])
  if score in ('dot', 'general'):    # Luong Eq. 8 "dot" (q . h_i) and "general" (q . W h_i)
    return keys_SxK @ query_Q
  if score == 'scaled_dot':
    return keys_SxK @ query_Q * jax.lax.rsqrt(jnp.float32(query_Q.shape[-1])).astype(query_Q.dtype)
  if score == 'location':            # Luong Eq. 9: a_t = softmax(W_a q); depends on the query only
    max_len = p['W'].shape[-1]
    if num_positions > max_len:
      raise ConfigError(f"score 'location' addresses at most model.max_source_length={max_len} positions but "
                        f'the batch has {num_positions}; raise max_source_length or filter longer sources')
    return (query_Q @ p['W'])[:num_positions]
  if score == 'none':
    return jnp.zeros((num_positions,), query_Q.dtype)
  raise ConfigError(f"unknown score '{score}'")


def predicted_position(p: Params, query_Q: jax.Array, length: jax.Array) -> jax.Array:
  """local-p centre p_t = S * sigmoid(v_p . tanh(W_p q)) (Luong Eq. 9), S the true source length."""
  return length * jax.nn.sigmoid(jnp.tanh(query_Q @ p['W_p']) @ p['v_p']).astype(jnp.float32)


def attend(cfg: ModelConfig, p: Params, query_Q: jax.Array, keys_SxK: jax.Array,
           annotations_SxH: jax.Array, length: jax.Array, t: jax.Array) -> tuple[jax.Array, jax.Array]:
  """Context vector and attention weights for one query: score, window, masked softmax, context.

  `length` is the source length (positions >= length are padding); `t` is the 0-based target position
  used as the centre of the `local_m` window. Returns (context_H, weights_S) with weights in float32.
  """
  positions_S = jnp.arange(annotations_SxH.shape[0])
  mask_S = positions_S < length
  if cfg.score == 'none':            # RNNencdec baseline: a fixed summary, the mean annotation
    weights_S = mask_S / jnp.maximum(jnp.sum(mask_S), 1).astype(jnp.float32)
    return context_vector(weights_S, annotations_SxH), weights_S
  e_S = scores(cfg.score, p, query_Q, keys_SxK)
  half_width = cfg.window_size
  if cfg.window == 'local_m':        # monotonic alignment p_t = t
    mask_S &= jnp.abs(positions_S - t) <= half_width
    weights_S = masked_softmax(e_S, mask_S)
  elif cfg.window == 'local_p':
    p_t = predicted_position(p, query_Q, length)
    distance_S = positions_S.astype(jnp.float32) - p_t
    mask_S &= jnp.abs(distance_S) <= half_width
    sigma = half_width / 2.0
    weights_S = masked_softmax(e_S, mask_S) * jnp.exp(-jnp.square(distance_S) / (2.0 * sigma ** 2))
  else:
    weights_S = masked_softmax(e_S, mask_S)
  return context_vector(weights_S, annotations_SxH), weights_S


class AttentionParams(nn.Module):
  """Declares the parameters of the configured score and window and returns them as a dict."""
  cfg: ModelConfig

  @nn.compact
  def __call__(self) -> Params:
    cfg, q, h, a = self.cfg, self.cfg.decoder_hidden_size, self.cfg.annotation_size, self.cfg.attention_size
    init = nn.initializers.lecun_normal()
    param = lambda name, shape, fn=init: self.param(name, fn, shape, jnp.float32)
    p = {}
    if cfg.score in ('additive', 'normed_additive'):
      p.update(W=param('W', (q, a)), U=param('U', (h, a)), b=param('b', (a,), nn.initializers.zeros),
               v=param('v', (a, 1))[:, 0])
      if cfg.score == 'normed_additive':
        p['g'] = param('g', (), nn.initializers.constant(1.0 / a ** 0.5))
    elif cfg.score == 'concat':
      p.update(W_q=param('W_q', (q, a)), W_h=param('W_h', (h, a)), v=param('v', (a, 1))[:, 0])
    elif cfg.score == 'general':
      p['W'] = param('W', (h, q))
    elif cfg.score == 'location':
      p['W'] = param('W', (q, cfg.max_source_length))
    if cfg.window == 'local_p':
      p.update(W_p=param('W_p', (q, a)), v_p=param('v_p', (a, 1))[:, 0])
    return p
