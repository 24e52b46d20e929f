"""What the Pallas kernels share (attnmt/model/kernels/cells.py, attention.py): their mode (interpreted or
lowered for Triton), the blocks and padding Triton's dot needs (every dimension >= 16, blocks powers of two), and
the `symbolic_zeros` plumbing of their custom VJPs."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.custom_derivatives import SymbolicZero
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plt

ROWS = 16  # batch rows per program: Triton's dot needs >= 16
COLUMNS = 32  # most hidden, key or value columns per block and per step of a kernel's inner loop


def use_interpret(interpret: bool | None) -> bool:
  """The kernels' mode: Pallas's interpreter unless the default backend is a GPU (None), or as given."""
  return jax.default_backend() != 'gpu' if interpret is None else bool(interpret)


def column_block(n: int) -> int:
  """A power of two in [16, COLUMNS]: the block for an axis of n entries."""
  return min(COLUMNS, max(16, 1 << (n - 1).bit_length()))


def round_up(n: int, m: int) -> int:
  return -(-n // m) * m


def pad_to(x: jax.Array, shape: tuple) -> jax.Array:
  """x with zeros after its entries on every axis; x itself when it already has that shape."""
  return x if x.shape == shape else jnp.pad(x, [(0, s - d) for d, s in zip(x.shape, shape)])


def dense(ct, like: jax.Array) -> jax.Array:
  """A cotangent as an array: a symbolic zero (an output nobody differentiates) becomes zeros."""
  return jnp.zeros(like.shape, like.dtype) if isinstance(ct, SymbolicZero) else ct


def primals(args: tuple) -> tuple[tuple, tuple]:
  """A `symbolic_zeros` forward rule's arguments as (values, whether each is differentiated); None stays None."""
  return tuple(None if a is None else a.value for a in args), tuple(a is not None and a.perturbed for a in args)


def pallas(kernel, name, grid, in_specs, out_specs, out_shape, interpret, *args):
  """pl.pallas_call(kernel, ...)(*args) for a GPU's Triton back end (4 warps a program), or interpreted."""
  return pl.pallas_call(
    kernel,
    out_shape=out_shape,
    grid=grid,
    in_specs=in_specs,
    out_specs=out_specs,
    interpret=interpret,
    name=name,
    compiler_params=plt.CompilerParams(num_warps=4),
  )(*args)


def over_blocks(n: int, size: int, body, init):
  """fori_loop over the column blocks pl.ds(k * size, size) of an axis of n entries."""
  return jax.lax.fori_loop(0, n // size, lambda k, acc: body(pl.ds(k * size, size), acc), init)
