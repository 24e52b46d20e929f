"""The fast path: a scan with weight gradients formed after the backward scan equals plain autodiff."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnmt.model import deferred_scan, rnn
from attnmt.training import train_step
from attnmt.model.config import ModelConfig
from small_model import sized


def deferred_products(step, invariants, carry, xs) -> list[str]:
  """The leaves of `invariants` (key paths, with the views taken of them) whose products in `step` have deferred
  weight gradients: what `deferred_scan.deferred_weight_scan` speeds up, read from its plan."""
  plan = deferred_scan._plan(step, invariants, carry, xs)
  paths = [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(invariants)[0]]
  names = []
  for p in plan.products.values():
    leaf, chain = plan.views[p.view]
    names.append(paths[leaf] + ''.join(f'.{e.primitive.name}' for e in chain))
  return sorted(names)


def _toy_step(p, carry, x):
  """A masked tanh RNN with a per-row attention-like product against a batched matrix."""
  h, t = carry
  x_BxI, valid_B = x
  a_BxS = jax.nn.softmax(h @ p['query'], axis=-1)
  ctx_BxH = (a_BxS[:, None, :] @ p['memory'])[:, 0]
  new = jnp.tanh(h @ p['hh'] + x_BxI + ctx_BxH @ p['ctx'] + p['b'])
  h = jnp.where(valid_B[:, None], new, h)
  return (h, t + 1), (h, a_BxS)


def _toy_problem(seed=0, batch=3, steps=5, hidden=4, positions=6):
  rng = np.random.default_rng(seed)
  normal = lambda *shape: jnp.asarray(rng.normal(size=shape), jnp.float32)
  matrices = {
    'query': normal(hidden, positions),
    'memory': normal(batch, positions, hidden),
    'hh': normal(hidden, hidden),
    'ctx': normal(hidden, hidden),
    'unused': normal(2, 2),
    'b': normal(hidden),
  }
  carry = (normal(batch, hidden), jnp.int32(0))
  xs = (normal(steps, batch, hidden), jnp.asarray(rng.random((steps, batch)) > 0.3))
  return matrices, carry, xs


def _loss(scan, params, carry, xs):
  (h, t), (hs, a) = scan(_toy_step, params, carry, xs)
  return jnp.sum(h**2) + jnp.sum(jnp.sin(hs)) + jnp.sum(a * jnp.arange(a.shape[-1])) + t


@pytest.mark.parametrize('use_jit', [False, True])
def test_deferred_scan_equals_autodiff(use_jit):
  """Outputs and the gradients with respect to every input equal those of the plain scan."""
  params, carry, xs = _toy_problem()
  args = (params, carry[0], xs[0])
  loss = lambda scan, p, h0, x: _loss(scan, p, (h0, carry[1]), (x, xs[1]))
  fast = jax.grad(functools.partial(loss, deferred_scan.deferred_weight_scan), argnums=(0, 1, 2))
  slow = jax.grad(functools.partial(loss, deferred_scan.reference_scan), argnums=(0, 1, 2))
  got = (jax.jit(fast) if use_jit else fast)(*args)
  want = slow(*args)
  jax.tree.map(lambda g, w: np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5), got, want)
  assert np.all(np.asarray(got[0]['unused']) == 0.0)
  out_fast = deferred_scan.deferred_weight_scan(_toy_step, params, carry, xs)
  out_slow = deferred_scan.reference_scan(_toy_step, params, carry, xs)
  jax.tree.map(lambda g, w: np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6), out_fast, out_slow)


def test_a_matrix_read_otherwise_gets_both_gradients():
  """A plain read (here a norm penalty inside the step) is differentiated as usual, `x @ w` deferred: the
  gradient is their sum, as plain autodiff gives it."""
  params, carry, xs = _toy_problem()

  def step(p, carry, x):
    (h, t), y = _toy_step(p, carry, x)
    return (h * jnp.tanh(jnp.sum(p['hh'] ** 2)), t), y

  def loss(scan, p):
    (h, _), (hs, _) = scan(step, p, carry, xs)
    return jnp.sum(h**2) + jnp.sum(jnp.sin(hs))

  got = jax.grad(functools.partial(loss, deferred_scan.deferred_weight_scan))(params)
  want = jax.grad(functools.partial(loss, deferred_scan.reference_scan))(params)
  np.testing.assert_allclose(got['hh'], want['hh'], rtol=1e-5, atol=1e-5)
  assert np.abs(np.asarray(got['hh'])).sum() > 0


def test_the_deferred_products_are_found_by_tracing_the_step():
  """Products of a changing left operand by an invariant matrix (or a view of one) are deferred; a
  product of two invariants, or of an invariant on the left, is not."""
  params, carry, xs = _toy_problem()

  def step(p, carry, x):
    (h, t), y = _toy_step(p, carry, x)
    fixed = p['hh'] @ p['ctx']  # both invariant: an ordinary product
    return (h[:, 1:] @ p['ctx'][1:] + (p['hh'] @ h.T).T @ fixed, t), y

  assert deferred_products(step, params, carry, xs) == [
    "['ctx']",
    "['ctx'].slice",
    "['hh']",
    "['memory']",
    "['query']",
  ]


def test_a_matrix_multiplied_twice_sliced_and_cast_gets_autodiff_gradients():
  """No rules for the step: the same matrix twice in one step, a row slice of it, a cast of it."""
  params, carry, xs = _toy_problem()

  def step(p, carry, x):
    h, t = carry
    w = p['hh']
    twice = jnp.tanh((h @ w) @ w + x[0][:, 1:] @ p['ctx'][1:] + (h @ p['ctx'].astype(jnp.bfloat16)).astype(jnp.float32))
    h = jnp.where(x[1][:, None], twice, h)
    return (h, t + 1), h

  def loss(scan, p, h0):
    (h, _), hs = scan(step, p, (h0, carry[1]), xs)
    return jnp.sum(h**2) + jnp.sum(jnp.sin(hs))

  fast = jax.jit(jax.grad(functools.partial(loss, deferred_scan.deferred_weight_scan), argnums=(0, 1)))
  slow = jax.grad(functools.partial(loss, deferred_scan.reference_scan), argnums=(0, 1))
  jax.tree.map(
    lambda g, w: np.testing.assert_allclose(g, w, rtol=2e-2, atol=2e-2),  # bf16 products on both sides
    fast(params, carry[0]),
    slow(params, carry[0]),
  )
  found = deferred_products(step, params, carry, xs)
  assert found == ["['ctx'].convert_element_type", "['ctx'].slice", "['hh']", "['hh']"]


def test_deferred_scan_under_vmap_over_seeds():
  """Matrices with a leading seed axis (as in seed_axis.seed_functions: the step vmapped over seeds) get per-seed gradients."""
  params, carry, xs = _toy_problem()
  stacked = jax.tree.map(lambda w: jnp.stack([w, 0.5 * w]), params)
  grad = lambda scan: jax.vmap(jax.grad(lambda m: _loss(scan, m, carry, xs)))(stacked)
  jax.tree.map(
    lambda g, w: np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5),
    jax.jit(lambda: grad(deferred_scan.deferred_weight_scan))(),
    grad(deferred_scan.reference_scan),
  )


@pytest.mark.parametrize(
  'overrides',
  [
    dict(),
    dict(query_timing='luong', window='local_p', score='concat', decoder_layers=2, dropout=0.2),
    dict(cell='gru', encoder_layers=2, score='general', query_timing='luong(input_feeding=false)'),
    dict(score='dot', init_state='last', window='local_m'),
    dict(score='location', bidirectional=False, decoder_hidden_size=6),
  ],
)
@pytest.mark.slow
def test_model_gradients_equal_plain_autodiff(small, overrides, monkeypatch):
  """The whole training loss: the fast scans give the gradients autodiff gives the plain scans."""
  cfg = ModelConfig(**sized({**small, **overrides}))
  rng = np.random.default_rng(0)
  batch = dict(
    src=rng.integers(4, 20, (3, 7)),
    src_len=np.array([7, 3, 5]),
    tgt_in=rng.integers(4, 23, (3, 6)),
    tgt_out=rng.integers(4, 23, (3, 6)),
    tgt_len=np.array([6, 2, 4]),
  )
  params = train_step.init_train_state(cfg, train_step.make_optimizer(1e-3), 0).params
  grad = jax.grad(lambda p: train_step.loss_fn(cfg, p, batch, jax.random.key(1), True, 0.1)[0])
  fast = jax.jit(grad)(params)
  monkeypatch.setattr(deferred_scan, 'deferred_weight_scan', deferred_scan.reference_scan)
  slow = jax.jit(grad)(params)
  jax.tree.map(lambda g, w: np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-6), fast, slow)


def test_lstm_gates_gradient_equals_autodiff():
  """The hand-written LSTM gradient, padding rows (keep False) included, equals autodiff's."""
  rng = np.random.default_rng(3)
  z, c, h = (jnp.asarray(rng.normal(size=s), jnp.float32) for s in ((5, 12), (5, 3), (5, 3)))
  keep = jnp.array([True, False, True, True, False])
  wh, wc = (jnp.asarray(rng.normal(size=(5, 3)), jnp.float32) for _ in range(2))

  def plain(z, c, h):
    i, f, g, o = jnp.split(z, 4, axis=-1)
    c_new = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
    h_new = jax.nn.sigmoid(o) * jnp.tanh(c_new)
    return jnp.where(keep[:, None], h_new, h), jnp.where(keep[:, None], c_new, c)

  loss = lambda cell: lambda *a: jnp.sum(jnp.sin(cell(*a)[0]) * wh + cell(*a)[1] ** 2 * wc)
  fast = lambda z, c, h: rnn.lstm_gates(z, c, h, keep)
  jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6), fast(z, c, h), plain(z, c, h))
  jax.tree.map(
    lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6),
    jax.grad(loss(fast), argnums=(0, 1, 2))(z, c, h),
    jax.grad(loss(plain), argnums=(0, 1, 2))(z, c, h),
  )


def _sub_jaxprs(params: dict):
  for v in params.values():
    for item in v if isinstance(v, (tuple, list)) else (v,):
      if hasattr(item, 'jaxpr') and hasattr(item, 'consts'):  # a ClosedJaxpr
        yield item.jaxpr
      elif hasattr(item, 'eqns'):  # a Jaxpr
        yield item


def _scan_dot_generals(jaxpr, in_scan: bool = False) -> list:
  """The dot_general equations inside scan bodies of a jaxpr, at any depth."""
  found = []
  for eqn in jaxpr.eqns:
    if in_scan and eqn.primitive.name == 'dot_general':
      found.append(eqn)
    for sub in _sub_jaxprs(eqn.params):
      found += _scan_dot_generals(sub, in_scan or eqn.primitive.name == 'scan')
  return found


def test_backward_scan_multiplies_by_stored_transposes():
  """Inside the backward scan, dy @ Wᵀ multiplies a stored N x I copy of W (contracted on its first
  axis), never W contracted on its second axis: the form XLA:CPU runs about 10 % slower."""
  rng = np.random.default_rng(3)
  normal = lambda *shape: jnp.asarray(rng.normal(size=shape), jnp.float32)
  params = {'hh': normal(4, 5), 'ctx': normal(4, 5), 'b': normal(4)}
  carry = (normal(3, 4), jnp.int32(0))
  xs = (normal(6, 3, 4), jnp.ones((6, 3), bool))

  def step(p, carry, x):
    h, t = carry
    new = jnp.tanh((h @ p['hh'])[:, :4] + (x[0] @ p['ctx'])[:, 1:] + p['b'])
    return (new, t + 1), new

  def loss(scan, p):
    (h, _), hs = scan(step, p, carry, xs)
    return jnp.sum(h**2) + jnp.sum(jnp.sin(hs))

  fast = jax.grad(functools.partial(loss, deferred_scan.deferred_weight_scan))
  dots = _scan_dot_generals(jax.make_jaxpr(fast)(params).jaxpr)
  rhs = [(tuple(e.invars[1].aval.shape), tuple(e.params['dimension_numbers'][0][1])) for e in dots]
  assert ((4, 5), (0,)) in rhs  # forward: h @ W, W (I x N) contracted on its first axis
  assert ((5, 4), (0,)) in rhs  # backward: dy @ W_t, the stored N x I transpose
  assert ((4, 5), (1,)) not in rhs  # never dy @ Wᵀ as W contracted on its second axis
  slow = jax.grad(functools.partial(loss, deferred_scan.reference_scan))
  for got, want in zip(jax.tree.leaves(fast(params)), jax.tree.leaves(slow(params))):
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
  'overrides,decoder_products',
  [
    (
      dict(),
      ["[0]['attention']['W']", "[0]['layers'][0]['W_hh']", "[0]['layers'][0]['W_ih'].slice", '[1].annotations'],
    ),
    (
      dict(query_timing='luong', score='concat', decoder_layers=2),
      [
        "[0]['W_c']",
        "[0]['attention']['W_q']",
        "[0]['layers'][0]['W_hh']",
        "[0]['layers'][0]['W_ih'].slice",
        "[0]['layers'][1]['W_hh']",
        "[0]['layers'][1]['W_ih']",
        '[1].annotations',
      ],
    ),
  ],
)
def test_the_model_scans_defer_every_product_by_a_parameter(small, overrides, decoder_products, monkeypatch):
  """What makes training fast, pinned: the encoder's recurrent products and every decoder product by a
  parameter or the annotations (layer 0's input matrix through its row slice) are found in the plain steps."""
  cfg = ModelConfig(**sized({**small, **overrides}))
  found, real = [], deferred_scan.deferred_weight_scan

  def recording(step, invariants, carry, xs):
    found.append(deferred_products(step, invariants, carry, xs))
    return real(step, invariants, carry, xs)

  monkeypatch.setattr(deferred_scan, 'deferred_weight_scan', recording)
  batch = dict(
    src=np.ones((3, 7), np.int32),
    src_len=np.array([7, 3, 5]),
    tgt_in=np.ones((3, 6), np.int32),
    tgt_out=np.ones((3, 6), np.int32),
    tgt_len=np.array([6, 2, 4]),
  )
  params = train_step.init_train_state(cfg, train_step.make_optimizer(1e-3), 0).params
  found.clear()  # initialisation ran the model too
  jax.eval_shape(jax.grad(lambda p: train_step.loss_fn(cfg, p, batch, jax.random.key(1), True, 0.1)[0]), params)
  assert found == [["[0]['W_hh']", "[1]['W_hh']"], decoder_products]
