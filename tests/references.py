"""Reference implementations that only the tests use: the plain forms that production code replaced with faster
or batched ones, kept to test those against (one query's attention, the unfused cross-entropy, a Pharaoh line
parser)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from attnmt.model.attention import attention_weights
from attnmt.model.config import ModelConfig

Params = dict


def context_vector(weights_S: jax.Array, annotations_SxH: jax.Array) -> jax.Array:
  """c = sum_i a_i h_i (Bahdanau Eq. 5) for one sentence."""
  return jnp.einsum('s,sh->h', weights_S.astype(annotations_SxH.dtype), annotations_SxH)


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


def masked_cross_entropy(
  logits_BxTxV: jax.Array, labels_BxT: jax.Array, length_B: jax.Array, label_smoothing: float = 0.0
) -> tuple[jax.Array, jax.Array]:
  """Summed token cross-entropy over the first `length` positions of each row, and the token count.

  With label smoothing eps the target is (1 - eps) on the label plus eps spread uniformly over the
  vocabulary (Szegedy et al. 2016).
  """
  # -log p(y) = logsumexp(logits) - logits[y]. The label's logit is picked by a comparison with an
  # iota rather than a gather, so its gradient fuses with the softmax's instead of scattering.
  logits_BxTxV = logits_BxTxV.astype(jnp.float32)
  lse_BxT = jax.nn.logsumexp(logits_BxTxV, axis=-1)
  is_label_BxTxV = jnp.arange(logits_BxTxV.shape[-1]) == labels_BxT[..., None]
  nll_BxT = lse_BxT - jnp.sum(jnp.where(is_label_BxTxV, logits_BxTxV, 0.0), axis=-1)
  if label_smoothing:  # mean_v log p(v) = mean_v logits_v - logsumexp(logits)
    mean_logp_BxT = jnp.mean(logits_BxTxV, axis=-1) - lse_BxT
    nll_BxT = (1.0 - label_smoothing) * nll_BxT - label_smoothing * mean_logp_BxT
  mask_BxT = jnp.arange(labels_BxT.shape[1])[None, :] < length_B[:, None]
  return jnp.sum(jnp.where(mask_BxT, nll_BxT, 0.0)), jnp.sum(mask_BxT)


def parse_pharaoh(line: str) -> tuple[set, set]:
  """'0-1 2p3' -> (sure, possible) sets of (source, target) pairs; sure links are also possible."""
  sure, possible = set(), set()
  for item in line.split():
    sep = '-' if '-' in item else 'p'
    s, t = (int(x) for x in item.split(sep))
    (sure if sep == '-' else possible).add((s, t))
  return sure, possible | sure
