"""The vocabulary projection and the cross-entropy as one function with a hand-written gradient.

    nll_N = -log softmax(h_N W + b)[y_N]        (label smoothing eps: docs/design.md, "Loss")

At the bench config the logits are 2048 x 8000 floats (65 MB), so every pass over them costs about as
much as a sizeable matrix product. Autodiff makes many such passes: the forward writes the logits and
reads them for the max, the sum of exponentials and the label's logit; the backward recomputes the
softmax into d logits, copies it transposed for the weight gradient and reduces it for the bias. Here
the forward pass leaves the softmax S as the only residual, and the backward pass folds the row
cotangents g into the small operands instead of the large one. The gradient of the loss with respect
to the logits is P = S - T, T = (1 - eps) onehot(y) + eps / V the smoothed target, and T's part is
read from the labels instead of being written into an N x V array by a select over every logit
(benchmarks/README.md, "The loss's label terms"):

    d h = g ⊙ (S Wᵀ - (1 - eps) W[:, y]ᵀ - eps/V Σ_v W[:, v])
    d W = (g ⊙ h)ᵀ S - (1 - eps) Σ_n (g ⊙ h)_n e_{y_n}ᵀ - eps/V Σ_n (g ⊙ h)_n 1ᵀ
    d b = gᵀ S - (1 - eps) Σ_n g_n e_{y_n} - eps/V Σ_n g_n

(the label terms a gather and two scatter-adds of N rows). Label smoothing's mean logit is h mean_v(W) +
mean(b), a product by one column, not a pass over the logits.

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
  # the label's logit is gathered.
  w_OxV = w_OxV.astype(hidden_NxO.dtype)
  dot_NxV = (hidden_NxO @ w_OxV).astype(jnp.float32)
  b_V = b_V.astype(jnp.float32)
  logits = lambda: dot_NxV + b_V
  lse_N = jax.nn.logsumexp(logits(), axis=-1)
  label_logit_N = jnp.take_along_axis(dot_NxV, labels_N[:, None], axis=-1)[:, 0] + b_V[labels_N]
  nll_N = lse_N - label_logit_N
  eps = label_smoothing
  if eps:  # mean_v log p(v) = mean_v logits_v - logsumexp, mean_v logits_v = h mean_v(W) + mean(b)
    mean_logit_N = (hidden_NxO @ jnp.mean(w_OxV, axis=1)).astype(jnp.float32) + jnp.mean(b_V)
    nll_N = (1.0 - eps) * nll_N - eps * (mean_logit_N - lse_N)
  softmax_NxV = jnp.exp(logits() - lse_N[:, None])
  return nll_N, softmax_NxV.astype(hidden_NxO.dtype)


def _fwd(hidden_NxO, w_OxV, b_V, labels_N, label_smoothing):
  nll_N, softmax_NxV = _forward(hidden_NxO, w_OxV, b_V, labels_N, label_smoothing)
  return nll_N, (hidden_NxO, w_OxV, b_V, labels_N, softmax_NxV)


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
  hidden_NxO, w_OxV, b_V, labels_N, s_NxV = residuals
  eps, vocab = label_smoothing, w_OxV.shape[-1]
  w_OxV_ = w_OxV.astype(s_NxV.dtype)
  g_Nx1 = g_N.astype(hidden_NxO.dtype)[:, None]
  target_w_NxO = (1.0 - eps) * w_OxV_.T[labels_N] + (eps / vocab) * jnp.sum(w_OxV_, axis=1)  # T Wᵀ
  d_hidden = (s_NxV @ w_OxV_.T - target_w_NxO) * g_Nx1
  gh_NxO = after_rows(hidden_NxO * g_Nx1, d_hidden)
  d_w = (gh_NxO.T @ s_NxV).at[:, labels_N].add(-(1.0 - eps) * gh_NxO.T) - (eps / vocab) * jnp.sum(gh_NxO, 0)[:, None]
  g32_N = g_N.astype(jnp.float32)
  d_b = jnp.matmul(g32_N.astype(s_NxV.dtype), s_NxV, preferred_element_type=jnp.float32)
  d_b = d_b.at[labels_N].add(-(1.0 - eps) * g32_N) - (eps / vocab) * jnp.sum(g32_N)
  return d_hidden.astype(hidden_NxO.dtype), d_w.astype(w_OxV.dtype), d_b.astype(b_V.dtype), None


projected_nll.defvjp(_fwd, _bwd)
