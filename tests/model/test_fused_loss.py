"""The fused vocabulary projection + cross-entropy equals autodiff of logits + masked_cross_entropy."""

import jax
import jax.extend.core
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from attnmt.model import fused_loss
from attnmt.training import train_step
from attnmt.model.config import ModelConfig
from attnmt.model.seq2seq import Seq2Seq
import references


@pytest.mark.parametrize('same_label', [False, True])
@pytest.mark.parametrize('label_smoothing', [0.0, 0.1])
@pytest.mark.slow
def test_projected_nll_and_gradients_equal_autodiff(label_smoothing, same_label):
  """Random labels (some repeated), or every row's label the same: the label terms of the gradient add up
  over the rows that share a label."""
  rng = np.random.default_rng(0)
  h, w, b = (jnp.asarray(rng.normal(size=s), jnp.float32) for s in ((7, 5), (5, 11), (11,)))
  labels = jnp.full(7, 3) if same_label else jnp.asarray(rng.integers(0, 11, 7))
  g = jnp.asarray(rng.normal(size=7), jnp.float32)

  def reference(h, w, b):
    logp = jax.nn.log_softmax(h @ w + b)
    nll = -jnp.take_along_axis(logp, labels[:, None], -1)[:, 0]
    return (1 - label_smoothing) * nll - label_smoothing * jnp.mean(logp, -1)

  fused = lambda h, w, b: fused_loss.projected_nll(h, w, b, labels, label_smoothing)
  np.testing.assert_allclose(fused(h, w, b), reference(h, w, b), rtol=1e-5, atol=1e-6)
  got = jax.grad(lambda *a: jnp.sum(g * fused(*a)), argnums=(0, 1, 2))(h, w, b)
  want = jax.grad(lambda *a: jnp.sum(g * reference(*a)), argnums=(0, 1, 2))(h, w, b)
  jax.tree.map(lambda x, y: np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6), got, want)


@pytest.mark.slow
def test_loss_fn_equals_masked_cross_entropy_of_the_logits(small):
  cfg = ModelConfig(**small)
  rng = np.random.default_rng(1)
  batch = dict(
    src=rng.integers(4, 20, (3, 7)),
    src_len=np.array([7, 3, 5]),
    tgt_in=rng.integers(4, 23, (3, 6)),
    tgt_out=rng.integers(4, 23, (3, 6)),
    tgt_len=np.array([6, 2, 4]),
  )
  params = train_step.init_train_state(cfg, train_step.make_optimizer(1e-3), 0).params

  def reference(p):
    logits, _ = Seq2Seq(cfg).apply({'params': p}, batch['src'], batch['src_len'], batch['tgt_in'])
    total, count = references.masked_cross_entropy(logits, batch['tgt_out'], batch['tgt_len'], 0.1)
    return total / count

  fast = lambda p: train_step.loss_fn(cfg, p, batch, jax.random.key(0), False, 0.1)[0]
  np.testing.assert_allclose(fast(params), reference(params), rtol=1e-6)
  jax.tree.map(
    lambda x, y: np.testing.assert_allclose(x, y, rtol=1e-4, atol=1e-7),
    jax.grad(fast)(params),
    jax.grad(reference)(params),
  )


def test_after_rows_returns_x_unchanged_whatever_y_holds():
  x = jnp.asarray([[1.5, -2.0, jnp.inf], [-jnp.inf, jnp.nan, 3e38]], jnp.float32)
  for y in ([[jnp.nan, 1.0], [jnp.inf, 0.0]], [[-jnp.inf], [7.0]], [[0.0], [-0.0]]):
    np.testing.assert_array_equal(jax.jit(fused_loss.after_rows)(x, jnp.asarray(y, jnp.float32)), x)
  jaxpr = jax.make_jaxpr(fused_loss.after_rows)(x, jnp.ones((2, 3)))
  y_var = jaxpr.jaxpr.invars[1]
  assert any(y_var in eqn.invars for eqn in jaxpr.jaxpr.eqns), 'after_rows(x, y) must read y'


def _ancestors(jaxpr, var):
  """Every variable of `jaxpr` that `var` is computed from, transitively (nested jaxprs are not entered)."""
  producer = {}
  for eqn in jaxpr.eqns:
    for out in eqn.outvars:
      producer[out] = eqn
  seen, stack = set(), [var]
  while stack:
    v = stack.pop()
    eqn = producer.get(v)
    if eqn is None:
      continue
    for inp in eqn.invars:
      if isinstance(inp, jax.extend.core.Var) and inp not in seen:
        seen.add(inp)
        stack.append(inp)
  return seen


def test_vocabulary_backward_forms_the_input_gradient_before_the_weight_gradient():
  n, o, v = 7, 5, 11
  h, w, b = jnp.ones((n, o)), jnp.ones((o, v)), jnp.zeros((v,))
  labels = jnp.arange(n) % v
  grad = jax.grad(lambda h, w, b: jnp.sum(fused_loss.projected_nll(h, w, b, labels)), argnums=(0, 1, 2))
  jaxpr = jax.make_jaxpr(grad)(h, w, b).jaxpr
  # The backward pass's two large products, told apart by their output shapes.
  dots = {tuple(e.outvars[0].aval.shape): e for e in jaxpr.eqns if e.primitive.name == 'dot_general'}
  d_w, d_h = dots[(o, v)], dots[(n, o)]
  assert d_h.outvars[0] in _ancestors(jaxpr, d_w.outvars[0]), 'dW = hᵀ P must wait for dh = P Wᵀ'
  assert d_w.outvars[0] not in _ancestors(jaxpr, d_h.outvars[0])


def test_clip_by_global_norm_scales_by_one_factor_like_optax():
  clip = train_step.clip_by_global_norm(1.0)
  # Hand-worked: ||(3, 4)|| = 5 > 1, so every gradient is scaled by 1/5.
  grads = {'a': jnp.asarray([3.0, 0.0]), 'b': jnp.asarray([[4.0]])}
  clipped, state = clip.update(grads, clip.init(grads))
  np.testing.assert_allclose(clipped['a'], [0.6, 0.0], rtol=1e-6)
  np.testing.assert_allclose(clipped['b'], [[0.8]], rtol=1e-6)
  assert state == optax.clip_by_global_norm(1.0).init(grads)  # checkpoints keep their structure
  # Below the norm the gradients pass unchanged (bit for bit); above it they match optax's division.
  rng = np.random.default_rng(3)
  tree = {'w': jnp.asarray(rng.normal(size=(6, 5)), jnp.float32), 'v': jnp.asarray(rng.normal(size=7), jnp.float32)}
  for max_norm in (100.0, 0.5):
    ours, _ = train_step.clip_by_global_norm(max_norm).update(tree, optax.EmptyState())
    want, _ = optax.clip_by_global_norm(max_norm).update(tree, optax.EmptyState())
    for k in tree:
      if max_norm == 100.0:
        np.testing.assert_array_equal(ours[k], tree[k])
      np.testing.assert_allclose(ours[k], want[k], rtol=1e-6)
