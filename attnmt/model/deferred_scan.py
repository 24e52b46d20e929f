"""A `lax.scan` whose weight gradients are computed after the backward scan, as one product each.

Autodiff of a scan whose step computes y_t = x_t @ W accumulates dW += x_tᵀ dy_t inside the backward
loop: at every step a thin product (contracting only the batch) and a read-modify-write of all of
dW. `deferred_weight_scan` takes an ordinary step, written with ordinary arrays, and applies the
speed-up from outside. It traces the step once (`jax.make_jaxpr`) and finds every product x @ W whose
right operand W is the same at every step (a leaf of `invariants`, or a slice, cast, reshape or
transpose of one) and whose left operand is not. It then evaluates the step's equations itself and,
for those products,

  1. records the left operand x_t in the forward pass, and taps the product's output with a zero
     whose cotangent is therefore dy_t;
  2. runs the scan's own VJP with those right operands held constant, which yields every other
     cotangent plus dy_t for each recorded product; then
  3. forms dW = Σ_t x_tᵀ dy_t once, as a single product over all steps, and pulls it back through
     the slice or cast to the leaf of `invariants`.

The step knows nothing of this: a matrix may be multiplied any number of times in a step, sliced or
read in any other way (such reads are differentiated as usual). The result equals autodiff of the
plain scan up to float summation order (tests/model/test_deferred_scan.py); `reference_scan` is that
plain scan.

A fused kernel that holds a weight constant (model.kernels 'pallas': kernels.wiring.cell_step,
kernels.wiring.attention_step) states the product it stands for as an ordinary one, stop_gradient(x) @ W, whose value
nothing reads (XLA drops it) and whose cotangent is the kernel's (its `tap` argument, or `tap` below). Such a
product is deferred like any other; its left operand is recorded as x itself (shared with x's other products),
and no gradient for it is formed, as none flows through the stop_gradient.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import jax
import jax.numpy as jnp
from jax.extend import core as jax_core

# step(invariants, carry, x) -> (carry, y): an ordinary function of ordinary arrays.
Step = Callable[..., tuple[Any, Any]]

# Equations that only re-view one array (linear, one operand): a product by their output is deferred
# like a product by the array itself, and its weight gradient is pulled back through them.
_VIEWS = frozenset({'convert_element_type', 'slice', 'reshape', 'squeeze', 'transpose', 'copy'})


@dataclasses.dataclass(frozen=True)
class _Product:
  """A deferred product x @ W of the step: the `dot_general` equation `eqn` of its jaxpr."""

  eqn: Any
  view: int  # its right operand: index into _Plan.views
  lhs: int  # its left operand, recorded at every step: index into _Plan.lhs_vars
  standard: bool  # x_{...xI} @ W_{IxN}: a 2-D W contracted on its first axis, no batch axes
  held: bool  # its left operand is stop_gradient(x): lhs_vars holds x, and no gradient flows to it


@dataclasses.dataclass(frozen=True)
class _Plan:
  """What tracing the step found: its jaxpr, the deferred products by equation index, their right
  operands as (leaf of invariants, chain of view equations), and their distinct left operands."""

  jaxpr: Any
  consts: list
  out_tree: Any
  views: tuple
  products: dict
  lhs_vars: tuple
  used: tuple  # the leaves of invariants that the step reads: only these enter the scan
  num_invariants: int  # leaves of invariants: the jaxpr's first inputs, before the carry's and x's
  needed: frozenset  # the equations evaluated: not those whose outputs only deferred products read


def _plan(step: Step, invariants, carry, xs) -> _Plan:
  """Traces one step and finds its deferred products."""
  leaves, tree = jax.tree.flatten(invariants)
  abstract = jax.eval_shape(lambda *a: a, leaves, carry, jax.tree.map(lambda a: a[0], xs))
  out_tree = []

  def flat_step(inv, c, x):
    out, treedef = jax.tree.flatten(step(jax.tree.unflatten(tree, inv), c, x))
    out_tree.append(treedef)
    return out

  closed = jax.make_jaxpr(flat_step)(*abstract)
  jaxpr, n = closed.jaxpr, len(leaves)
  invariant = set(jaxpr.constvars) | set(jaxpr.invars[:n])  # the same at every step
  origin = {v: (i, ()) for i, v in enumerate(jaxpr.invars[:n])}  # a leaf, or a view of one: (leaf, chain)
  stopped = {}  # the output of a stop_gradient: its operand
  views, view_index, lhs_index, products = [], {}, {}, {}
  for k, eqn in enumerate(jaxpr.eqns):
    operands = [v for v in eqn.invars if not isinstance(v, jax_core.Literal)]
    if all(v in invariant for v in operands) and not eqn.effects:
      invariant.update(eqn.outvars)
    name = eqn.primitive.name
    if len(operands) != len(eqn.invars):  # a literal operand: neither a view nor a deferred product
      continue
    if name == 'stop_gradient':
      stopped[eqn.outvars[0]] = eqn.invars[0]
    if name in _VIEWS and len(eqn.invars) == 1 and eqn.invars[0] in origin:
      leaf, chain = origin[eqn.invars[0]]
      origin[eqn.outvars[0]] = (leaf, chain + (eqn,))
    elif name == 'dot_general' and eqn.invars[1] in origin:
      x, w = eqn.invars
      if x in invariant:
        continue
      if w not in view_index:
        view_index[w] = len(views)
        views.append(origin[w])
      recorded = stopped.get(x, x)
      lhs_index.setdefault(recorded, len(lhs_index))
      (x_contract, w_contract), (x_batch, w_batch) = eqn.params['dimension_numbers']
      standard = (
        w.aval.ndim == 2
        and tuple(w_contract) == (0,)
        and tuple(x_contract) == (x.aval.ndim - 1,)
        and not len(x_batch) + len(w_batch)
      )
      products[k] = _Product(eqn, view_index[w], lhs_index[recorded], standard, x in stopped)
  # Liveness from the outputs back, a deferred product reading only its left operand: the views it
  # multiplies by are made once, outside the scan.
  live = {v for v in jaxpr.outvars if not isinstance(v, jax_core.Literal)}
  needed = set()
  for k in reversed(range(len(jaxpr.eqns))):
    eqn = jaxpr.eqns[k]
    if eqn.effects or any(v in live for v in eqn.outvars):
      needed.add(k)
      operands = eqn.invars[:1] if k in products else eqn.invars
      live.update(v for v in operands if not isinstance(v, jax_core.Literal))
  viewed = {leaf for leaf, _ in views}
  used = tuple(i for i, v in enumerate(jaxpr.invars[:n]) if v in live or i in viewed)
  return _Plan(
    jaxpr, list(closed.consts), out_tree[0], tuple(views), products, tuple(lhs_index), used, n, frozenset(needed)
  )


def _apply_chain(chain: tuple, w: jax.Array) -> jax.Array:
  """A leaf through its view equations (a slice, a cast...)."""
  for eqn in chain:
    w = eqn.primitive.bind(w, **eqn.params)
  return w


def _bind(eqn, *args):
  with eqn.ctx.manager:
    out = eqn.primitive.bind(*args, **eqn.primitive.get_bind_params(eqn.params))
  return out if eqn.primitive.multiple_results else [out]


def _transposed_product(eqn):
  """x @ w as `eqn` computes it, whose input gradient dy @ w_t multiplies by a stored copy w_t = wᵀ.

  Autodiff would form dy @ wᵀ as a product contracting w's second axis; XLA:CPU (YNNPACK) runs that
  form about 10 % slower than a product with a row-major N x I matrix at the scans' sizes (64 rows),
  and inside a scan it runs once per step. The transpose is made once per scan, outside it. No
  gradient flows to w or w_t here: the scan's weights get theirs after the backward scan.
  """

  @jax.custom_vjp
  def product(x, w, w_t):
    del w_t
    return _bind(eqn, x, w)[0]

  def fwd(x, w, w_t):
    return product(x, w, w_t), w_t

  def bwd(w_t, dy):
    return jnp.matmul(dy, w_t.astype(dy.dtype)).astype(eqn.invars[0].aval.dtype), None, None

  product.defvjp(fwd, bwd)
  return product


@jax.custom_jvp
def tap(y: jax.Array, z: jax.Array) -> jax.Array:
  """Returns y, with z's tangent added to y's: the cotangent of z is then the cotangent of y.

  Unlike `y + z`, the forward pass never reads z, so the zeros fed as z are never materialised, and a
  product fed as z (kernels.wiring.attention_step's) is never computed.
  """
  del z
  return y


@tap.defjvp
def _tap_jvp(primals, tangents):
  return primals[0], tangents[0] + tangents[1]


def _evaluate(plan: _Plan, consts, leaves, carry, x, views, zs=None, transposed=None):
  """One step, its equations evaluated in order, the deferred products by the stored `views` (tapped
  with `zs` and multiplied through `transposed` copies when differentiated). `leaves` are the used
  leaves of the invariants. Returns the step's (carry, y) and the left operands of the deferred products."""
  env = {}
  read = lambda v: v.val if isinstance(v, jax_core.Literal) else env[v]
  env.update(zip(plan.jaxpr.constvars, consts))
  env.update((plan.jaxpr.invars[i], leaf) for i, leaf in zip(plan.used, leaves))
  env.update(zip(plan.jaxpr.invars[plan.num_invariants :], jax.tree.leaves((carry, x))))
  lhs = [None] * len(plan.lhs_vars)
  for k, eqn in enumerate(plan.jaxpr.eqns):
    if k not in plan.needed:
      continue
    product = plan.products.get(k)
    if product is None:
      outs = _bind(eqn, *map(read, eqn.invars))
    else:
      x_val = read(eqn.invars[0])
      lhs[product.lhs] = read(plan.lhs_vars[product.lhs]) if product.held else x_val
      w = views[product.view]
      if transposed is not None and product.standard and not product.held:
        out = _transposed_product(eqn)(x_val, w, transposed[product.view])
      else:
        out = _bind(eqn, x_val, w)[0]
      outs = [out if zs is None else tap(out, zs[k])]
    env.update(zip(eqn.outvars, outs))
  return jax.tree.unflatten(plan.out_tree, [read(v) for v in plan.jaxpr.outvars]), lhs


def _weight_grad(product: _Product, x_Tx_: jax.Array, dy_Tx_: jax.Array, w: jax.Array) -> jax.Array:
  """Σ over steps (and rows) of x_tᵀ dy_t: one large product instead of one per step."""
  if product.standard:
    x2 = x_Tx_.reshape(-1, x_Tx_.shape[-1])
    dy2 = dy_Tx_.reshape(-1, dy_Tx_.shape[-1])
    return jnp.matmul(x2.T, dy2, preferred_element_type=jnp.float32).astype(w.dtype)
  over_steps = lambda w: jax.vmap(lambda x: _bind(product.eqn, x, w)[0])(x_Tx_)  # e.g. c = a @ h per sentence
  return jax.vjp(over_steps, w)[1](dy_Tx_)[0]


def deferred_weight_scan(step: Step, invariants, carry, xs):
  """`lax.scan(lambda c, x: step(invariants, c, x), carry, xs)` with late weight gradients.

  Every product in the step of a changing left operand by a matrix from `invariants` (or a slice or
  cast of one) has its weight gradient formed after the backward scan; everything else is
  differentiated the ordinary way. Returns (final carry, ys).
  """
  plan = _plan(step, invariants, carry, xs)
  if not plan.products:
    return reference_scan(step, invariants, carry, xs)
  steps = jax.tree.leaves(xs)[0].shape[0]
  position = {leaf: j for j, leaf in enumerate(plan.used)}  # a leaf's place among the used ones

  def views_of(used):
    return [_apply_chain(chain, used[position[leaf]]) for leaf, chain in plan.views]

  def scan(used, consts, carry, xs, views, zs=None, transposed=None):
    def body(c, inputs):
      x, z = inputs
      out, lhs = _evaluate(plan, consts, used, c, x, views, z, transposed)
      return out[0], (out[1], lhs)

    carry, (ys, lhs) = jax.lax.scan(body, carry, (xs, zs))
    return (carry, ys), lhs

  @jax.custom_vjp
  def run(used, consts, carry, xs):
    return scan(used, consts, carry, xs, views_of(used))[0]

  def run_fwd(used, consts, carry, xs):
    views = views_of(used)
    transposed = {p.view: views[p.view].T for p in plan.products.values() if p.standard and not p.held}
    zs = {
      k: jnp.zeros((steps,) + p.eqn.outvars[0].aval.shape, p.eqn.outvars[0].aval.dtype)
      for k, p in plan.products.items()
    }
    inner = lambda used, consts, carry, xs, zs: scan(used, consts, carry, xs, views, zs, transposed)
    out, vjp_fn, lhs = jax.vjp(inner, used, consts, carry, xs, zs, has_aux=True)
    return out, (vjp_fn, lhs, used, views)

  def run_bwd(residuals, cotangent):
    vjp_fn, lhs, used, views = residuals
    d_used, d_consts, d_carry, d_xs, d_products = vjp_fn(cotangent)
    d_views = {}
    for k, p in plan.products.items():
      g = _weight_grad(p, lhs[p.lhs], d_products[k], views[p.view])
      d_views[p.view] = g if p.view not in d_views else d_views[p.view] + g
    d_used = list(d_used)
    for v, g in d_views.items():
      leaf, chain = plan.views[v]
      j = position[leaf]
      if chain:
        g = jax.vjp(lambda w: _apply_chain(chain, w), used[j])[1](g)[0]
      d_used[j] = d_used[j] + g
    return d_used, d_consts, d_carry, d_xs

  run.defvjp(run_fwd, run_bwd)
  leaves = jax.tree.leaves(invariants)
  return run([leaves[i] for i in plan.used], plan.consts, carry, xs)


def reference_scan(step: Step, invariants, carry, xs):
  """The same scan differentiated by plain autodiff: the reference `deferred_weight_scan` must equal."""
  return jax.lax.scan(lambda c, x: step(invariants, c, x), carry, xs)
