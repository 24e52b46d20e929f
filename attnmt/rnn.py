"""LSTM and GRU recurrences: fused gate matrices, input projections hoisted out of the time loop.

A layer's parameters are one input matrix W_ih (I x G*H), one recurrent matrix W_hh (H x G*H) and
a bias, G = 4 gates for the LSTM (i, f, g, o) and 3 for the GRU (r, z, n). `x @ W_ih + b` does not
depend on the previous step, so it is computed for the whole sentence as one matrix product before
the scan; inside the scan only `h @ W_hh` remains. Cell functions accept any leading batch shape.
Letters: S positions, I input size, H hidden size, G gates.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import flax.linen as nn

Carry = tuple  # LSTM: (h, c); GRU: (h,)


def num_gates(cell: str) -> int:
  return {'lstm': 4, 'gru': 3}[cell]


class RNNLayerParams(nn.Module):
  """Declares one RNN layer's fused parameters and returns them as a dict."""
  cell: str
  input_size: int
  hidden_size: int

  @nn.compact
  def __call__(self) -> dict:
    g, h = num_gates(self.cell), self.hidden_size
    p = {
        'W_ih': self.param('W_ih', nn.initializers.lecun_normal(), (self.input_size, g * h), jnp.float32),
        'W_hh': self.param('W_hh', nn.initializers.orthogonal(column_axis=-1), (h, g * h), jnp.float32),
    }
    if self.cell == 'lstm':   # forget-gate bias 1 (Jozefowicz et al. 2015)
      p['b'] = self.param('b', lambda k, s, d: jnp.zeros(s, d).at[h:2 * h].set(1.0), (g * h,), jnp.float32)
    else:
      p['b'] = self.param('b', nn.initializers.zeros, (g * h,), jnp.float32)
      p['b_hn'] = self.param('b_hn', nn.initializers.zeros, (h,), jnp.float32)
    return p


def zero_carry(cell: str, batch_shape: tuple, hidden_size: int, dtype=jnp.float32) -> Carry:
  z = jnp.zeros(batch_shape + (hidden_size,), dtype)
  return (z, z) if cell == 'lstm' else (z,)


def carry_from_hidden(cell: str, h: jax.Array) -> Carry:
  """A carry whose hidden state is h (the LSTM memory cell starts at zero)."""
  return (h, jnp.zeros_like(h)) if cell == 'lstm' else (h,)


def input_projection(p: dict, x_SxI: jax.Array) -> jax.Array:
  """x W_ih + b for every position at once (S x G*H)."""
  return x_SxI @ p['W_ih'].astype(x_SxI.dtype) + p['b'].astype(x_SxI.dtype)


def cell_step(cell: str, p: dict, carry: Carry, xproj_G: jax.Array) -> Carry:
  """One step of the recurrence given the hoisted input projection xproj = x W_ih + b."""
  h = carry[0]
  hproj_G = h @ p['W_hh'].astype(h.dtype)
  if cell == 'lstm':
    i, f, g, o = jnp.split(xproj_G + hproj_G, 4, axis=-1)
    c = jax.nn.sigmoid(f) * carry[1] + jax.nn.sigmoid(i) * jnp.tanh(g)
    return (jax.nn.sigmoid(o) * jnp.tanh(c), c)
  x_r, x_z, x_n = jnp.split(xproj_G, 3, axis=-1)
  h_r, h_z, h_n = jnp.split(hproj_G, 3, axis=-1)
  r = jax.nn.sigmoid(x_r + h_r)
  z = jax.nn.sigmoid(x_z + h_z)
  n = jnp.tanh(x_n + r * (h_n + p['b_hn'].astype(h.dtype)))
  return ((1.0 - z) * n + z * h,)


def reverse_within_length(x_S: jax.Array, length: jax.Array) -> jax.Array:
  """Reverses the first `length` positions and leaves padding in place (an involution)."""
  pos = jnp.arange(x_S.shape[0])
  return x_S[jnp.where(pos < length, length - 1 - pos, pos)]


def run_layer(cell: str, p: dict, x_SxI: jax.Array, length: jax.Array, reverse: bool = False
              ) -> tuple[jax.Array, Carry]:
  """Runs one direction over one sentence; padding neither updates the state nor leaks into it.

  Returns the outputs (S x H, zero at padding) and the final carry (the state after the last valid
  position, for both directions).
  """
  if reverse:
    x_SxI = reverse_within_length(x_SxI, length)
  xproj_SxG = input_projection(p, x_SxI)
  hidden = p['W_hh'].shape[0]
  carry0 = zero_carry(cell, (), hidden, x_SxI.dtype)

  def step(carry, inputs):
    xproj_G, valid = inputs
    new = cell_step(cell, p, carry, xproj_G)
    carry = jax.tree.map(lambda n, o: jnp.where(valid, n, o), new, carry)
    return carry, jnp.where(valid, carry[0], 0)

  valid_S = jnp.arange(x_SxI.shape[0]) < length
  final, out_SxH = jax.lax.scan(step, carry0, (xproj_SxG, valid_S))
  if reverse:
    out_SxH = reverse_within_length(out_SxH, length)
  return out_SxH, final
