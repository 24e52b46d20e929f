"""The additive score's hand-written gradient equals autodiff of the plain formula."""

import jax
import jax.numpy as jnp
import numpy as np

from attnmt.model import scores


def _plain(query_A, keys_SxA, v_A):
  return jnp.sum(jnp.tanh(keys_SxA + query_A) * v_A, axis=-1)


def test_additive_scores_and_gradient_equal_autodiff():
  k = jax.random.split(jax.random.key(0), 4)
  query_BxA = jax.random.normal(k[0], (3, 8))
  keys_BxSxA = jax.random.normal(k[1], (3, 5, 8))
  v_A = jax.random.normal(k[2], (8,))
  w_BxS = jax.random.normal(k[3], (3, 5))

  def loss(fn, q, keys, v):  # vmapped over the batch, as the decoder uses it
    return jnp.sum(jax.vmap(fn, in_axes=(0, 0, None))(q, keys, v) * w_BxS)

  np.testing.assert_allclose(
    jax.vmap(scores.additive_scores, in_axes=(0, 0, None))(query_BxA, keys_BxSxA, v_A),
    jax.vmap(_plain, in_axes=(0, 0, None))(query_BxA, keys_BxSxA, v_A),
    rtol=1e-5,
    atol=1e-6,
  )
  fast = jax.jit(jax.grad(lambda *a: loss(scores.additive_scores, *a), argnums=(0, 1, 2)))(query_BxA, keys_BxSxA, v_A)
  slow = jax.grad(lambda *a: loss(_plain, *a), argnums=(0, 1, 2))(query_BxA, keys_BxSxA, v_A)
  for a, b in zip(fast, slow):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
