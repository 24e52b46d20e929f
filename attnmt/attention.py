"""Attention: a score (attnmt/scores.py), an alignment window (attnmt/windows.py) with a normaliser
(attnmt/normalizers.py), the context.

    e_i = score(q, h_i)      a_S = window(e_S, valid positions), normalised      c = sum_i a_i h_i

Written for one sentence as the equations read; `jax.vmap` batches them. Letters in names:
S source positions, Q query size, H annotation size, K key size.
"""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp
import flax.linen as nn

from attnmt import scores, windows
from attnmt.config import ModelConfig
from attnmt.scores import additive_scores, additive_scores_jax  # noqa: F401  (the score primitives)
from attnmt.normalizers import masked_entmax15, masked_softmax, masked_sparsemax  # noqa: F401

Params = dict
Product = Callable[[str, jax.Array], jax.Array]  # mm(name, x): x times the named matrix


def context_vector(weights_S: jax.Array, annotations_SxH: jax.Array) -> jax.Array:
  """c = sum_i a_i h_i (Bahdanau Eq. 5)."""
  return jnp.einsum('s,sh->h', weights_S.astype(annotations_SxH.dtype), annotations_SxH)


class DeferredMatrix:
  """A 2-D parameter as a score's `query` (or a window's `centre`) sees it inside the decoder's scan:
  `x @ m` is the scan's product `mm(name, x)`, whose weight gradient is formed after the backward scan
  (attnmt/deferred_scan.py). It supports nothing else, so no other use can bypass that product."""

  __slots__ = ('name', 'shape', 'dtype', '_mm')

  def __init__(self, name: str, value: jax.Array, mm: Product):
    self.name, self.shape, self.dtype, self._mm = name, value.shape, value.dtype, mm

  ndim = 2

  def __rmatmul__(self, x: jax.Array) -> jax.Array:
    return self._mm(self.name, x)

  def __repr__(self):
    return f'DeferredMatrix({self.name!r}, shape={self.shape}: use it only as `x @ m`)'


def deferred_view(p: Params, mm: Product, prefix: str = 'att_') -> Params:
  """`p` with every 2-D parameter replaced by a DeferredMatrix named prefix + its name."""
  return {k: DeferredMatrix(prefix + k, v, mm) if getattr(v, 'ndim', 0) == 2 else v for k, v in p.items()}


def precompute_keys(cfg: ModelConfig, p: Params, annotations_SxH: jax.Array) -> jax.Array:
  """The per-sentence half of the configured score (S x K, K may be 0)."""
  return scores.build(cfg).keys(p, annotations_SxH)


def attention_weights(
  cfg: ModelConfig,
  p: Params,
  query_BxQ: jax.Array,
  keys_BxSxK: jax.Array,
  length_B: jax.Array,
  t: jax.Array,
  mm: Product | None = None,
) -> jax.Array:
  """Attention weights (B x S, float32) of a batch of queries: the decoder's per-step attention.

  The query products (the score's `query`, the window's `centre`) run once for the whole batch, through
  `mm` when given (inside the decoder's scan); scores and window run per sentence. `t` is the 0-based
  target position, positions >= length are padding.
  """
  score, window = scores.build(cfg), windows.build(cfg)
  p_query = p if mm is None else deferred_view(p, mm)
  half_Bx_ = score.query(p_query, query_BxQ)
  centre_B = window.centre(p_query, query_BxQ, length_B, t)

  def one(half, keys_SxK, length, centre):
    positions_S = jnp.arange(keys_SxK.shape[0])
    return window.weights(score.scores(p, half, keys_SxK), positions_S, positions_S < length, centre)

  return jax.vmap(one)(half_Bx_, keys_BxSxK, length_B, centre_B)


def attend(
  cfg: ModelConfig,
  p: Params,
  query_Q: jax.Array,
  keys_SxK: jax.Array,
  annotations_SxH: jax.Array,
  length: jax.Array,
  t: jax.Array,
) -> tuple[jax.Array, jax.Array]:
  """Context vector and attention weights for one query: score, window and normaliser, context.

  `length` is the source length (positions >= length are padding); `t` is the 0-based target position
  used as the centre of the `local_m` window. Returns (context_H, weights_S) with weights in float32.
  """
  weights_S = attention_weights(cfg, p, query_Q[None], keys_SxK[None], jnp.asarray(length)[None], t)[0]
  return context_vector(weights_S, annotations_SxH), weights_S


class AttentionParams(nn.Module):
  """Declares the parameters of the configured score and window and returns them as one dict."""

  cfg: ModelConfig

  @nn.compact
  def __call__(self) -> Params:
    def param(name, shape, init=nn.initializers.lecun_normal()):
      return self.param(name, init, shape, jnp.float32)

    return {**scores.build(self.cfg).params(param), **windows.build(self.cfg).params(param)}
