"""The vocabulary projection and the cross-entropy as one function with a hand-written gradient.

    nll_N = -log softmax(h_N W + b)[y_N]        (label smoothing eps: docs/design.md, "Loss")

At the bench config the logits are 2048 x 8000 floats (65 MB), so every pass over them costs about as
much as a sizeable matrix product. Autodiff makes many such passes: the forward writes the logits and
reads them for the max, the sum of exponentials and the label's logit; the backward recomputes the
softmax into d logits, copies it transposed for the weight gradient and reduces it for the bias. Here
the forward pass leaves P = softmax - target (the gradient of the loss with respect to the logits, up
to each row's cotangent g) as the only residual, and the backward pass folds g into the small
operands instead of the 65 MB one:

    d h = g ⊙ (P Wᵀ),    d W = (g ⊙ h)ᵀ P,    d b = gᵀ P.

The two large products are made to run one after the other, d h first (`after_rows`). Left
independent, XLA:CPU runs them side by side (d h through YNNPACK, d W through Eigen), both spread over
the same cores, and the loss then takes 10-14 ms longer at the bench config than in turn
(benchmarks/README.md, "Two large products in turn"). d h goes first, and each row of g ⊙ h waits only for its own
row of d h, so under a batch-sharded (data-parallel) step the order costs no communication; d W's
sum over the shards follows after it.

Letters: N rows (batch x target positions), O output-layer size, V vocabulary.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp


@functools.partial(jax.custom_vjp, nondiff_argnums=(4,))
def projected_nll(
  hidden_NxO: jax.Array, w_OxV: jax.Array, b_V: jax.Array, labels_N: jax.Array, label_smoothing: float = 0.0
) -> jax.Array:
  """Per-row cross-entropy of softmax(h W + b) against the labels (float32, N)."""
  return _forward(hidden_NxO, w_OxV, b_V, labels_N, label_smoothing)[0]


def _forward(hidden_NxO, w_OxV, b_V, labels_N, label_smoothing):
  # The bias is added inside each pass that reads the logits rather than in a pass of its own, and
  # the label's logit is gathered (its gradient is P below, not a scatter).
  dot_NxV = (hidden_NxO @ w_OxV.astype(hidden_NxO.dtype)).astype(jnp.float32)
  logits = lambda: dot_NxV + b_V.astype(jnp.float32)
  lse_N = jax.nn.logsumexp(logits(), axis=-1)
  label_logit_N = jnp.take_along_axis(dot_NxV, labels_N[:, None], axis=-1)[:, 0] + b_V.astype(jnp.float32)[labels_N]
  nll_N = lse_N - label_logit_N
  eps, vocab = label_smoothing, w_OxV.shape[-1]
  if eps:  # mean_v log p(v) = mean_v logits_v - logsumexp
    nll_N = (1.0 - eps) * nll_N - eps * (jnp.mean(logits(), axis=-1) - lse_N)
  # d nll / d logits = softmax - target, target = (1 - eps) one_hot(y) + eps / V.
  is_label_NxV = jnp.arange(vocab) == labels_N[:, None]
  p_NxV = jnp.exp(logits() - lse_N[:, None]) - jnp.where(is_label_NxV, 1.0 - eps, 0.0) - eps / vocab
  return nll_N, p_NxV.astype(hidden_NxO.dtype)


def _fwd(hidden_NxO, w_OxV, b_V, labels_N, label_smoothing):
  nll_N, p_NxV = _forward(hidden_NxO, w_OxV, b_V, labels_N, label_smoothing)
  return nll_N, (hidden_NxO, w_OxV, b_V, p_NxV)


def after_rows(x_NxA: jax.Array, y_NxB: jax.Array) -> jax.Array:
  """x, each of whose rows waits for the same row of y: a zero computed from y's row is added.

  JAX has no control dependencies and XLA:CPU's runtime orders work by data only (an
  `optimization_barrier` orders nothing at run time), so a data dependency is what sequences two
  otherwise independent products. `y > inf` is never true, but XLA cannot know that; x + 0.0 is x,
  NaN and inf included, and a NaN in y does not reach x.
  """
  zero_Nx1 = jnp.where(y_NxB[:, :1] > jnp.inf, 1.0, 0.0).astype(x_NxA.dtype)
  return x_NxA + zero_Nx1


def _bwd(label_smoothing, residuals, g_N):
  del label_smoothing
  hidden_NxO, w_OxV, b_V, p_NxV = residuals
  g_Nx1 = g_N.astype(hidden_NxO.dtype)[:, None]
  d_hidden = (p_NxV @ w_OxV.astype(p_NxV.dtype).T) * g_Nx1
  d_w = (after_rows(hidden_NxO * g_Nx1, d_hidden).T @ p_NxV).astype(w_OxV.dtype)
  d_b = jnp.matmul(g_N.astype(p_NxV.dtype), p_NxV, preferred_element_type=jnp.float32).astype(b_V.dtype)
  return d_hidden.astype(hidden_NxO.dtype), d_w, d_b, None


projected_nll.defvjp(_fwd, _bwd)
