"""Attention: scores between a query and the annotations, masked softmax, alignment windows, context.

Written for one sentence as the equations read; `jax.vmap` batches them. Letters in names:
S source positions, Q query size, H annotation size, A attention size, K key size.

Scores are split in two halves so that work depending on the annotations alone happens once per
sentence (`precompute_keys`, e.g. Bahdanau's `U h_i + b`) and only the query-dependent half runs at every
decoder step (`scores`).
"""
from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp
import flax.linen as nn

from attnmt import kernels
from attnmt.config import ConfigError, ModelConfig

Params = dict
MatMul = Callable[[jax.Array, str], jax.Array]   # matmul(x, name) = x @ p[name]


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


@jax.custom_vjp
def additive_scores_jax(query_A: jax.Array, keys_SxA: jax.Array, v_A: jax.Array) -> jax.Array:
  """e_i = v . tanh(query_A + keys_i) in JAX: the path for GPUs, TPUs and CPUs without the kernel.

  The gradient recomputes the S x A tanh instead of storing it: the decoder would otherwise keep
  one per target step (134 MB at the bench config), which costs more to write than to recompute.
  """
  # A product with v rather than sum(t * v): XLA:CPU hands a multiply-reduce to a YNNPACK fusion that
  # was about 1.6 x slower here than a tanh loop followed by a dot (measured at the bench config).
  return jnp.einsum('sa,a->s', jnp.tanh(keys_SxA + query_A), v_A)


def _additive_scores_fwd(query_A, keys_SxA, v_A):
  return additive_scores_jax(query_A, keys_SxA, v_A), (query_A, keys_SxA, v_A)


def _additive_scores_bwd(residuals, de_S):
  query_A, keys_SxA, v_A = residuals
  t_SxA = jnp.tanh(keys_SxA + query_A)
  dpre_SxA = de_S[:, None] * v_A * (1.0 - t_SxA * t_SxA)          # tanh' = 1 - tanh^2
  # dv as a product de . t, not sum(de * t): the same YNNPACK multiply-reduce as in the forward pass.
  return jnp.sum(dpre_SxA, axis=0), dpre_SxA, jnp.einsum('s,sa->a', de_S, t_SxA)


additive_scores_jax.defvjp(_additive_scores_fwd, _additive_scores_bwd)


def additive_scores(query_A: jax.Array, keys_SxA: jax.Array, v_A: jax.Array) -> jax.Array:
  """e_i = v . tanh(query_A + keys_i): Bahdanau Eq. 6 with query_A = W q and keys = U h + b.

  On the CPU, in float32 and where `kernels.available()`, the fused kernel of `attnmt.kernels` runs;
  elsewhere (other platforms, other dtypes, no compiler, traced under `kernels.disabled()`) the
  JAX path. The choice per platform is made when the program is lowered (`platform_dependent`).
  """
  return kernels.on_cpu(kernels.additive_scores, additive_scores_jax, query_A, keys_SxA, v_A)


def precompute_keys(score: str, p: Params, annotations_SxH: jax.Array) -> jax.Array:
  """The per-sentence half of a score: depends on the annotations only (S x K, K may be 0)."""
  if score in ('additive', 'normed_additive'):
    return annotations_SxH @ p['U'] + p['b']           # U h_i + b, S x A: the bias rides with the keys
  if score == 'concat':
    return annotations_SxH @ p['W_h']                  # W [. ; h_i] split: W_h h_i, S x A
  if score == 'general':
    return annotations_SxH @ p['W']                    # W h_i, S x Q
  if score in ('dot', 'scaled_dot'):
    return annotations_SxH
  return jnp.zeros(annotations_SxH.shape[:1] + (0,), annotations_SxH.dtype)   # none, location


def _plain_matmul(p: Params) -> MatMul:
  return lambda x, name: x @ p[name]


def query_half(score: str, p: Params, query_xQ: jax.Array, matmul: MatMul | None = None) -> jax.Array:
  """The query-dependent half of a score (e.g. W q), for queries with any leading shape.

  `matmul(x, name)` computes x @ p[name]; the decoder passes its own so that, inside its scan, these
  products get their weight gradients after the backward scan (`deferred_scan`).
  """
  matmul = matmul or _plain_matmul(p)
  if score in ('additive', 'normed_additive'):
    return matmul(query_xQ, 'W')       # b is in the keys: once per sentence, not per step
  if score == 'concat':              # Luong Eq. 8 "concat": v . tanh(W_q q + W_h h_i), no bias
    return matmul(query_xQ, 'W_q')
  if score == 'location':            # Luong Eq. 9: a_t = softmax(W_a q); depends on the query only
    return matmul(query_xQ, 'W')
  return query_xQ                    # dot, scaled_dot, general use q itself; none ignores it


def scores_from_half(score: str, p: Params, half_A: jax.Array, keys_SxK: jax.Array) -> jax.Array:
  """Unnormalised scores e_S of one query, from its `query_half` and the precomputed keys."""
  num_positions = keys_SxK.shape[0]
  if score == 'additive':
    return additive_scores(half_A, keys_SxK, p['v'])
  if score == 'normed_additive':     # weight-normalised v (Salimans & Kingma 2016) with gain g
    v = p['g'] * p['v'] * jax.lax.rsqrt(jnp.sum(jnp.square(p['v'])))
    return additive_scores(half_A, keys_SxK, v)
  if score == 'concat':
    return additive_scores(half_A, keys_SxK, p['v'])
  if score in ('dot', 'general'):    # Luong Eq. 8 "dot" (q . h_i) and "general" (q . W h_i)
    return keys_SxK @ half_A
  if score == 'scaled_dot':
    return keys_SxK @ half_A * jax.lax.rsqrt(jnp.float32(half_A.shape[-1])).astype(half_A.dtype)
  if score == 'location':
    max_len = half_A.shape[-1]
    if num_positions > max_len:
      raise ConfigError(f"score 'location' addresses at most model.max_source_length={max_len} positions but "
                        f'the batch has {num_positions}; raise max_source_length or filter longer sources')
    return half_A[:num_positions]
  if score == 'none':
    return jnp.zeros((num_positions,), half_A.dtype)
  raise ConfigError(f"unknown score '{score}'")


def scores(score: str, p: Params, query_Q: jax.Array, keys_SxK: jax.Array) -> jax.Array:
  """Unnormalised scores e_S of one query against precomputed keys (DESIGN.md, score table)."""
  return scores_from_half(score, p, query_half(score, p, query_Q), keys_SxK)


def predicted_position(p: Params, query_Q: jax.Array, length: jax.Array, matmul: MatMul | None = None
                       ) -> jax.Array:
  """local-p centre p_t = S * sigmoid(v_p . tanh(W_p q)) (Luong Eq. 9), S the true source length."""
  matmul = matmul or _plain_matmul(p)
  return length * jax.nn.sigmoid(jnp.tanh(matmul(query_Q, 'W_p')) @ p['v_p']).astype(jnp.float32)


def _window_weights(cfg: ModelConfig, p: Params, half_A: jax.Array, keys_SxK: jax.Array, length: jax.Array,
                    t: jax.Array, p_t: jax.Array) -> jax.Array:
  """Weights a_S of one query: scores, alignment window, masked softmax (p_t: local_p's centre)."""
  positions_S = jnp.arange(keys_SxK.shape[0])
  mask_S = positions_S < length
  if cfg.score == 'none':            # RNNencdec baseline: a fixed summary, the mean annotation
    return mask_S / jnp.maximum(jnp.sum(mask_S), 1).astype(jnp.float32)
  e_S = scores_from_half(cfg.score, p, half_A, keys_SxK)
  half_width = cfg.window_size
  if cfg.window == 'local_m':        # monotonic alignment p_t = t
    mask_S &= jnp.abs(positions_S - t) <= half_width
    return masked_softmax(e_S, mask_S)
  if cfg.window == 'local_p':
    distance_S = positions_S.astype(jnp.float32) - p_t
    mask_S &= jnp.abs(distance_S) <= half_width
    sigma = half_width / 2.0
    return masked_softmax(e_S, mask_S) * jnp.exp(-jnp.square(distance_S) / (2.0 * sigma ** 2))
  return masked_softmax(e_S, mask_S)


def attention_weights(cfg: ModelConfig, p: Params, query_BxQ: jax.Array, keys_BxSxK: jax.Array,
                      length_B: jax.Array, t: jax.Array, matmul: MatMul | None = None) -> jax.Array:
  """Attention weights (B x S, float32) of a batch of queries: the decoder's per-step attention.

  The query products (`query_half`, local_p's predictor) run once for the whole batch through
  `matmul`; scores, window and softmax run per sentence. `t` is the 0-based target position.
  """
  half_BxA = query_half(cfg.score, p, query_BxQ, matmul)
  if cfg.window == 'local_p':
    p_t_B = predicted_position(p, query_BxQ, length_B, matmul)
  else:
    p_t_B = jnp.zeros(length_B.shape, jnp.float32)
  one = lambda half, keys, length, p_t: _window_weights(cfg, p, half, keys, length, t, p_t)
  return jax.vmap(one)(half_BxA, keys_BxSxK, length_B, p_t_B)


def attend(cfg: ModelConfig, p: Params, query_Q: jax.Array, keys_SxK: jax.Array,
           annotations_SxH: jax.Array, length: jax.Array, t: jax.Array) -> tuple[jax.Array, jax.Array]:
  """Context vector and attention weights for one query: score, window, masked softmax, context.

  `length` is the source length (positions >= length are padding); `t` is the 0-based target position
  used as the centre of the `local_m` window. Returns (context_H, weights_S) with weights in float32.
  """
  weights_S = attention_weights(cfg, p, query_Q[None], keys_SxK[None], jnp.asarray(length)[None], t)[0]
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
