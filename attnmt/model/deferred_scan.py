"""A `lax.scan` whose weight gradients are computed after the backward scan, as one product each.

Autodiff of a scan whose step computes y_t = x_t @ W accumulates dW += x_tᵀ dy_t inside the backward
loop: at every step a thin product (contracting only the batch) and a read-modify-write of all of
dW. Here the step is written with plain products, `h @ p['W_hh']`, and the scan hands it its
parameters with every deferred matrix replaced by a `Deferred` stand-in whose `x @ w` is recorded.
The backward pass

  1. runs the scan's own VJP with those matrices held constant, which yields every other cotangent
     plus dy_t for each recorded product (as the cotangent of a zero tapped onto y_t), then
  2. forms dW = Σ_t x_tᵀ dy_t once, as a single matrix product over all steps (x_t recorded in the
     forward pass).

The result equals autodiff of the plain scan up to float summation order (tests/model/test_deferred_scan.py).

A deferred matrix is 2-D (I x N), used as x_{...xI} @ W, or batched (... x I x N), used as a batched
product x_{...xMxI} @ W_{...xIxN} with the same leading axes (the attention context c = a @ h per
sentence). Any other read of it goes through `.value`, an ordinary input of the scan whose gradient
autodiff forms as usual (a score's `scores` reads its parameters so).
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp

# step(params, carry, x) -> (carry, y), written with plain products `x @ params[...]`.
Step = Callable[..., tuple[Any, Any]]
# deferred(path, leaf) -> whether the step multiplies by this leaf of params with `@`.
Selector = Callable[[tuple, jax.Array], bool]


def matrices_2d(path: tuple, leaf: jax.Array) -> bool:
  """The default selector: every 2-D leaf is a matrix the step multiplies by."""
  del path
  return leaf.ndim == 2


class Deferred:
  """A matrix as the step sees it inside `deferred_weight_scan`: `x @ w` is a recorded product whose
  weight gradient is formed after the backward scan. `.value` is the array itself, for any other
  read (its gradient then comes from ordinary autodiff). Nothing else is supported, so no use can
  bypass the recorded product by accident."""

  __slots__ = ('name', 'value', '_mm')

  def __init__(self, name: str, value: jax.Array, mm: Callable[[str, jax.Array], jax.Array]):
    self.name, self.value, self._mm = name, value, mm

  shape = property(lambda self: self.value.shape)
  dtype = property(lambda self: self.value.dtype)
  ndim = property(lambda self: self.value.ndim)

  def __rmatmul__(self, x: jax.Array) -> jax.Array:
    return self._mm(self.name, x)

  def __repr__(self):
    return f'Deferred({self.name!r}, shape={self.shape}: use it as `x @ w`, or read `.value`)'


def value(x):
  """The array behind `x`: a Deferred's `.value`, anything else as it is."""
  return x.value if isinstance(x, Deferred) else x


def values(tree):
  """`tree` with every Deferred replaced by its `.value` (for code that reads parameters otherwise
  than as `x @ w`, such as a score's `scores`)."""
  return jax.tree.map(value, tree, is_leaf=lambda x: isinstance(x, Deferred))


def product(x: jax.Array, w: jax.Array) -> jax.Array:
  """x @ w, in x's dtype: a 2-D w, or a batched w with the same leading axes as x."""
  return jnp.matmul(x, w.astype(x.dtype))


@jax.custom_vjp
def _product_transposed_vjp(x: jax.Array, w: jax.Array, w_t: jax.Array) -> jax.Array:
  """x @ w whose input gradient dy @ w_t multiplies by a stored copy w_t = wᵀ.

  Autodiff would form dy @ wᵀ as a product contracting w's second axis; XLA:CPU (YNNPACK) runs that
  form about 10 % slower than a product with a row-major N x I matrix at the scans' sizes (64 rows),
  and inside a scan it runs once per step. The transpose is made once per scan, outside it. No
  gradient flows to w or w_t here: the scan's weights get theirs after the backward scan.
  """
  del w_t
  return product(x, w)


def _product_t_fwd(x, w, w_t):
  return product(x, w), w_t


def _product_t_bwd(w_t, dy):
  return product(dy, w_t), None, None


_product_transposed_vjp.defvjp(_product_t_fwd, _product_t_bwd)


@jax.custom_jvp
def _tap(y: jax.Array, z: jax.Array) -> jax.Array:
  """Returns y, with z's tangent added to y's: the cotangent of z is then the cotangent of y.

  Unlike `y + z`, the forward pass never reads z, so the zeros fed as z are never materialised.
  """
  del z
  return y


@_tap.defjvp
def _tap_jvp(primals, tangents):
  return primals[0], tangents[0] + tangents[1]


def _weight_grad(x_Txi: jax.Array, dy_Txn: jax.Array, w: jax.Array) -> jax.Array:
  """Σ over steps (and rows) of x_tᵀ dy_t: one large product instead of one per step."""
  if w.ndim == 2:
    x2 = x_Txi.reshape(-1, x_Txi.shape[-1])
    dy2 = dy_Txn.reshape(-1, dy_Txn.shape[-1])
    return jnp.matmul(x2.T, dy2, preferred_element_type=jnp.float32).astype(w.dtype)
  return jnp.einsum('t...mi,t...mn->...in', x_Txi, dy_Txn, preferred_element_type=jnp.float32).astype(w.dtype)


def _split(params, deferred: Selector):
  """The deferred matrices of `params` by name (their key path), and a function that rebuilds
  `params` from the matrices' stand-ins and the other leaves."""
  flat, treedef = jax.tree_util.tree_flatten_with_path(params)
  names = [jax.tree_util.keystr(path) if deferred(path, leaf) else None for path, leaf in flat]
  matrices = {n: leaf for n, (_, leaf) in zip(names, flat) if n is not None}
  return matrices, names, treedef


def _scan(step: Step, matrices: dict, params, names, treedef, carry, xs, zs, aliases: dict, transposed=None):
  """The scan itself; records each deferred product's left operand and taps its output with zs[name].

  `params` holds every leaf (the deferred ones as their ordinary values, read through `.value`).
  A left operand multiplied by several matrices is recorded once; `aliases` (filled while tracing)
  maps the other names to the recorded one. `transposed` holds wᵀ for the 2-D matrices when the
  scan is differentiated (see `_product_transposed_vjp`).
  """

  def body(carry, inputs):
    x, z = inputs
    lhs, used = {}, set()

    def mm(name, v):
      if name in used:
        raise ValueError(f'matrix {name} multiplied twice in one step; multiply once and reuse the product')
      used.add(name)
      same = [k for k, prev in lhs.items() if prev is v]
      if same:
        aliases[name] = same[0]
      else:
        lhs[name] = v
      if transposed is not None and name in transposed:
        out = _product_transposed_vjp(v, matrices[name], transposed[name])
      else:
        out = product(v, matrices[name])
      return out if z is None else _tap(out, z[name])

    leaves = [leaf if n is None else Deferred(n, leaf, mm) for n, leaf in zip(names, jax.tree.leaves(params))]
    carry, y = step(jax.tree.unflatten(treedef, leaves), carry, x)
    return carry, (y, lhs)

  carry, (ys, lhs) = jax.lax.scan(body, carry, (xs, zs))
  return (carry, ys), lhs


def deferred_weight_scan(step: Step, params, carry, xs, deferred: Selector = matrices_2d):
  """`lax.scan(lambda c, x: step(params, c, x), carry, xs)` with late weight gradients.

  The leaves of `params` that `deferred(path, leaf)` selects reach the step as `Deferred` stand-ins:
  `x @ w` is a product whose weight gradient is formed after the backward scan. Every other leaf,
  and `.value` of a deferred one, is differentiated the ordinary way. Returns (final carry, ys).
  """
  matrices, names, treedef = _split(params, deferred)
  aliases = {}

  def zero_products():
    _, lhs = jax.eval_shape(lambda: _scan(step, matrices, params, names, treedef, carry, xs, None, aliases))
    used = list(lhs) + list(aliases)
    return {
      k: jnp.zeros(lhs[aliases.get(k, k)].shape[:-1] + matrices[k].shape[-1:], lhs[aliases.get(k, k)].dtype)
      for k in used
    }

  @jax.custom_vjp
  def run(matrices, params, carry, xs):
    return _scan(step, matrices, params, names, treedef, carry, xs, None, aliases)[0]

  def run_fwd(matrices, params, carry, xs):
    transposed = {k: w.T for k, w in matrices.items() if w.ndim == 2}
    inner = lambda *args: _scan(step, matrices, *args[:1], names, treedef, *args[1:], aliases, transposed)
    out, vjp_fn, lhs = jax.vjp(inner, params, carry, xs, zero_products(), has_aux=True)
    return out, (vjp_fn, lhs, matrices)

  def run_bwd(residuals, cotangent):
    vjp_fn, lhs, mats = residuals
    d_params, d_carry, d_xs, d_products = vjp_fn(cotangent)
    d_matrices = {
      k: _weight_grad(lhs[aliases.get(k, k)], d_products[k], w) if k in d_products else jnp.zeros_like(w)
      for k, w in mats.items()
    }
    return d_matrices, d_params, d_carry, d_xs

  run.defvjp(run_fwd, run_bwd)
  return run(matrices, params, carry, xs)


def reference_scan(step: Step, params, carry, xs, deferred: Selector = matrices_2d):
  """The same scan differentiated by plain autodiff: the reference `deferred_weight_scan` must equal."""
  del deferred
  return jax.lax.scan(lambda c, x: step(params, c, x), carry, xs)
