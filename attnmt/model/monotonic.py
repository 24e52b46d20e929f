"""Monotonic attention (Raffel et al. 2017, "Online and linear-time attention by enforcing monotonic
alignments"): the math for one sentence, `jax.vmap`ped by the caller (the `monotonic` normaliser,
attnmt/model/normalizers.py).

At target step i the attention scans the source left to right from where it stopped at step i-1,
and at each position j stops with probability p_{i,j} = sigmoid(e_{i,j} + r) (Raffel Eq. 11-12), e the
score of any registered energy function and r a learned scalar bias. Stopping at j attends h_j alone.

- Training uses the expected alignment, the probability alpha_{i,j} that the scan of step i stops at j
  (Raffel Eq. 13-14):

      q_{i,j} = (1 - p_{i,j-1}) q_{i,j-1} + alpha_{i-1,j}        alpha_{i,j} = p_{i,j} q_{i,j}

  with alpha_0 one-hot at position 0. Raffel's Appendix C.1 solves it in parallel as
  alpha_i = p_i * cumprod_x(1 - p_i) * cumsum(alpha_{i-1} / cumprod_x(1 - p_i)) (cumprod_x exclusive),
  whose division by a product that underflows needs clipping, and clipping changes the result as soon
  as the product falls below the clip (any earlier p close to 1). `expected_alignment` evaluates the
  same recurrence in parallel without a division: each position is the affine map x -> (1 - p_{j-1}) x
  + alpha_{i-1,j}, and q is their prefix composition (`jax.lax.associative_scan`), so
  q_{i,j} = sum_{k<=j} alpha_{i-1,k} prod_{k<=l<j} (1 - p_{i,l}) (Raffel Eq. 9), exact for every p in [0, 1].
  alpha_i need not sum to 1: the rest is the probability that the scan stops nowhere (context 0).
- Decoding uses hard monotonic attention (Raffel Sec. 2.2, with z_{i,j} = [p_{i,j} > 0.5]): from the
  position t_{i-1} attended last, the first j >= t_{i-1} with p_{i,j} > 0.5 is attended (one-hot); if
  there is none, the weights are all 0 and the position stays.

The state carried from step to step is one S vector: alpha_{i-1} when expected, one-hot t_{i-1} when hard.
Letters: S source positions.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def stop_probabilities(e_S: jax.Array, r: jax.Array, mask_S: jax.Array) -> jax.Array:
  """p_j = sigmoid(e_j + r) on the valid positions (at least float32), exactly 0 with exactly 0 gradient on
  the padding, so that the scan never stops there."""
  z_S = (e_S + r).astype(jnp.promote_types(e_S.dtype, jnp.float32))
  return jnp.where(mask_S, jax.nn.sigmoid(jnp.where(mask_S, z_S, 0.0)), 0.0)


def initial_alignment(positions: int, dtype=jnp.float32) -> jax.Array:
  """alpha_0 = t_0: one-hot at source position 0, where the first scan starts."""
  return jnp.zeros((positions,), dtype).at[0].set(1.0)


def _compose(earlier, later):
  """Affine maps x -> c x + b, `earlier` applied first: (c2 c1) x + (c2 b1 + b2)."""
  c1, b1 = earlier
  c2, b2 = later
  return c1 * c2, c2 * b1 + b2


def expected_alignment(p_S: jax.Array, previous_S: jax.Array) -> jax.Array:
  """alpha_j = p_j q_j with q_j = (1 - p_{j-1}) q_{j-1} + previous_j, q_0 = previous_0 (Raffel Eq. 13-14),
  as a parallel prefix scan: q_j = sum_{k<=j} previous_k prod_{k<=l<j} (1 - p_l), no division.

  `previous_S` is alpha_{i-1} (`initial_alignment` at the first step). Where p is 0 (padding) alpha is 0.
  """
  keep_S = jnp.concatenate([jnp.zeros_like(p_S[:1]), 1.0 - p_S[:-1]])  # 1 - p_{j-1}; q_{-1} = 0
  _, q_S = jax.lax.associative_scan(_compose, (keep_S, previous_S.astype(p_S.dtype)))
  return p_S * q_S


def hard_alignment(p_S: jax.Array, position_S: jax.Array) -> tuple[jax.Array, jax.Array]:
  """Hard monotonic attention: (weights_S, next position_S) from the one-hot position t_{i-1}.

  The weights are one-hot at the first j >= t_{i-1} with p_j > 0.5, and the next position is that j;
  if there is none, the weights are all 0 and the position stays t_{i-1}.
  """
  positions_S = jnp.arange(p_S.shape[0])
  stop_S = (positions_S >= jnp.argmax(position_S)) & (p_S > 0.5)
  chosen_S = ((positions_S == jnp.argmax(stop_S)) & jnp.any(stop_S)).astype(p_S.dtype)
  return chosen_S, jnp.where(jnp.any(stop_S), chosen_S, position_S.astype(p_S.dtype))
