"""A `lax.scan` whose weight gradients are computed after the backward scan, as one product each.

Autodiff of a scan whose step computes y_t = x_t W accumulates dW += x_tᵀ dy_t inside the backward
loop: at every step a thin product (contracting only the batch) and a read-modify-write of all of
dW. Here the step names its weight products instead, `mm('W_hh', h)`, and the backward pass

  1. runs the scan's own VJP with the named weights held constant, which yields every other
     cotangent plus dy_t for each named product (as the cotangent of a zero tapped onto y_t), then
  2. forms dW = Σ_t x_tᵀ dy_t once, as a single matrix product over all steps (x_t recorded in the
     forward pass).

The result equals autodiff of the plain scan up to float summation order (tests/test_speed_scan.py).

A named matrix is 2-D (I x N), used as x_{...xI} @ W, or batched (... x I x N) with the same leading
axes as x, used as a per-row product x_{...xI} · W_{...xIxN} (the attention context Σ_i a_i h_i is
such a product with the annotations).
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp

from attnmt import kernels

# step(mm, consts, carry, x) -> (carry, y); mm(name, x) multiplies x by the named matrix.
Step = Callable[..., tuple[Any, Any]]


def product(x: jax.Array, w: jax.Array) -> jax.Array:
  """x @ w for a 2-D w; a per-row product (leading axes shared) for a batched w."""
  if w.ndim == 2:
    return x @ w.astype(x.dtype)
  if x.shape[:-1] == w.shape[:-2]:  # the context Σ_i a_i h_i: a CPU kernel (attnmt/kernels)
    return kernels.on_cpu(kernels.context, _batched_product, x, w)
  return _batched_product(x, w)


def _batched_product(x: jax.Array, w: jax.Array) -> jax.Array:
  return jnp.einsum('...i,...in->...n', x, w.astype(x.dtype))


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


def plain_products(matrices: dict) -> Callable[[str, jax.Array], jax.Array]:
  """The `mm` of a step run outside any scan (e.g. one decoding step)."""
  return lambda name, x: product(x, matrices[name])


def _weight_grad(x_Txi: jax.Array, dy_Txn: jax.Array, w: jax.Array) -> jax.Array:
  """Σ over steps (and rows) of x_tᵀ dy_t: one large product instead of one per step."""
  if w.ndim == 2:
    x2 = x_Txi.reshape(-1, x_Txi.shape[-1])
    dy2 = dy_Txn.reshape(-1, dy_Txn.shape[-1])
    return jnp.matmul(x2.T, dy2, preferred_element_type=jnp.float32).astype(w.dtype)
  return jnp.einsum('t...i,t...n->...in', x_Txi, dy_Txn, preferred_element_type=jnp.float32).astype(w.dtype)


def _scan(step: Step, matrices: dict, consts, carry, xs, zs, aliases: dict, transposed: dict | None = None):
  """The scan itself; records each named product's left operand and taps its output with zs[name].

  A left operand multiplied by several matrices is recorded once; `aliases` (filled while
  tracing) maps the other names to the recorded one. `transposed` holds wᵀ for the 2-D matrices
  when the scan is differentiated (see `_product_transposed_vjp`).
  """

  def body(carry, inputs):
    x, z = inputs
    lhs, used = {}, set()

    def mm(name, v):
      if name in used:
        raise ValueError(f'matrix {name!r} multiplied twice in one step; give each use its own name')
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

    carry, y = step(mm, consts, carry, x)
    return carry, (y, lhs)

  carry, (ys, lhs) = jax.lax.scan(body, carry, (xs, zs))
  return (carry, ys), lhs


def deferred_weight_scan(step: Step, matrices: dict, consts, carry, xs):
  """`lax.scan(lambda c, x: step(mm, consts, c, x), carry, xs)` with late weight gradients.

  `matrices` maps names to the weights the step multiplies by through `mm`; `consts` holds
  everything else the step reads (differentiated the ordinary way). Returns (final carry, ys).
  """
  aliases = {}

  def zero_products():
    _, lhs = jax.eval_shape(lambda: _scan(step, matrices, consts, carry, xs, None, aliases))
    names = list(lhs) + list(aliases)
    return {
      k: jnp.zeros(lhs[aliases.get(k, k)].shape[:-1] + matrices[k].shape[-1:], lhs[aliases.get(k, k)].dtype)
      for k in names
    }

  @jax.custom_vjp
  def run(matrices, consts, carry, xs):
    return _scan(step, matrices, consts, carry, xs, None, aliases)[0]

  def run_fwd(matrices, consts, carry, xs):
    transposed = {k: w.T for k, w in matrices.items() if w.ndim == 2}
    inner = lambda *args: _scan(step, matrices, *args, aliases, transposed)
    out, vjp_fn, lhs = jax.vjp(inner, consts, carry, xs, zero_products(), has_aux=True)
    return out, (vjp_fn, lhs, matrices)

  def run_bwd(residuals, cotangent):
    vjp_fn, lhs, mats = residuals
    d_consts, d_carry, d_xs, d_products = vjp_fn(cotangent)
    d_matrices = {
      k: _weight_grad(lhs[aliases.get(k, k)], d_products[k], w) if k in d_products else jnp.zeros_like(w)
      for k, w in mats.items()
    }
    return d_matrices, d_consts, d_carry, d_xs

  run.defvjp(run_fwd, run_bwd)
  return run(matrices, consts, carry, xs)


def reference_scan(step: Step, matrices: dict, consts, carry, xs):
  """The same scan differentiated by plain autodiff: the reference `deferred_weight_scan` must equal."""
  return jax.lax.scan(lambda c, x: step(plain_products(matrices), consts, c, x), carry, xs)
