"""LSTM and GRU recurrences: fused gate matrices, input projections hoisted out of the time loop.

A layer's parameters are one input matrix W_ih (I x G*H), one recurrent matrix W_hh (H x G*H) and
a bias, G = 4 gates for the LSTM (i, f, g, o) and 3 for the GRU (r, z, n). `x @ W_ih + b` does not
depend on the previous step, so it is computed for the whole batch and sentence as one matrix
product before the scan; inside the scan only `h @ W_hh` remains, and its weight gradient is formed
after the backward scan as one product (`deferred_scan`). All directions of a layer share one scan.
Cell functions accept any leading batch shape.
Letters: B batch, S positions, I input size, H hidden size, G gates.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import flax.linen as nn

from attnmt.model import deferred_scan

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
    if self.cell == 'lstm':  # forget-gate bias 1 (Jozefowicz et al. 2015)
      p['b'] = self.param('b', lambda k, s, d: jnp.zeros(s, d).at[h : 2 * h].set(1.0), (g * h,), jnp.float32)
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


def cell_update(
  cell: str, p: dict, carry: Carry, xproj_G: jax.Array, hproj_G: jax.Array, valid: jax.Array | None = None
) -> Carry:
  """The gate arithmetic of one step, given both products xproj = x W_ih + b and hproj = h W_hh.

  Rows where `valid` (the carry's leading shape) is false keep their carry: padding.
  """
  h = carry[0]
  if cell == 'lstm':
    keep = jnp.ones(h.shape[:-1], bool) if valid is None else valid
    return lstm_gates(xproj_G + hproj_G, carry[1], h, keep)
  x_r, x_z, x_n = jnp.split(xproj_G, 3, axis=-1)
  h_r, h_z, h_n = jnp.split(hproj_G, 3, axis=-1)
  r = jax.nn.sigmoid(x_r + h_r)
  z = jax.nn.sigmoid(x_z + h_z)
  n = jnp.tanh(x_n + r * (h_n + p['b_hn'].astype(h.dtype)))
  new = (1.0 - z) * n + z * h
  return (new if valid is None else jnp.where(valid[..., None], new, h),)


@jax.custom_vjp
def lstm_gates(z_G: jax.Array, c_H: jax.Array, h_H: jax.Array, keep: jax.Array) -> Carry:
  """The LSTM update from the gate pre-activations z = x W_ih + b + h W_hh (gates i, f, g, o):
  c' = sigmoid(f) c + sigmoid(i) tanh(g), h' = sigmoid(o) tanh(c'); rows where `keep` is false
  return (h, c) unchanged.

  The gradient is written by hand so that a scan stores three arrays per step (the activations,
  c and tanh c'); autodiff of the same arithmetic stores about a dozen, each a write in the loop.
  """
  return _lstm_gates_fwd(z_G, c_H, h_H, keep)[0]


def _lstm_gates_fwd(z_G, c_H, h_H, keep):
  i, f, g, o = jnp.split(z_G, 4, axis=-1)
  i, f, g, o = jax.nn.sigmoid(i), jax.nn.sigmoid(f), jnp.tanh(g), jax.nn.sigmoid(o)
  c_new = f * c_H + i * g
  tanh_c = jnp.tanh(c_new)
  k = keep[..., None]
  carry = (jnp.where(k, o * tanh_c, h_H), jnp.where(k, c_new, c_H))
  return carry, (jnp.concatenate([i, f, g, o], axis=-1), c_H, tanh_c, keep)


def _lstm_gates_bwd(residuals, cotangents):
  act_G, c_H, tanh_c, keep = residuals
  dh, dc = cotangents
  i, f, g, o = jnp.split(act_G, 4, axis=-1)
  k = keep[..., None]
  dh_new = jnp.where(k, dh, 0.0)
  dc_new = jnp.where(k, dc, 0.0) + dh_new * o * (1.0 - tanh_c * tanh_c)
  dz_G = jnp.concatenate(
    [
      dc_new * g * i * (1.0 - i),
      dc_new * c_H * f * (1.0 - f),  # sigmoid' = s (1 - s)
      dc_new * i * (1.0 - g * g),
      dh_new * tanh_c * o * (1.0 - o),
    ],
    axis=-1,
  )  # tanh' = 1 - t^2
  dc_prev = dc_new * f + jnp.where(k, 0.0, dc)
  dh_prev = jnp.where(k, 0.0, dh)
  return dz_G.astype(act_G.dtype), dc_prev.astype(c_H.dtype), dh_prev.astype(c_H.dtype), None


lstm_gates.defvjp(_lstm_gates_fwd, _lstm_gates_bwd)


def reverse_within_length(x_S: jax.Array, length: jax.Array) -> jax.Array:
  """Reverses the first `length` positions and leaves padding in place (an involution)."""
  pos = jnp.arange(x_S.shape[0])
  return x_S[jnp.where(pos < length, length - 1 - pos, pos)]


def run_directions(
  cell: str,
  params: tuple,
  reverses: tuple,
  x_BxSxI: jax.Array,
  length_B: jax.Array,
  cell_step: Callable | None = None,
) -> tuple[list, list]:
  """Runs one layer's directions over a batch in a single scan; padding neither updates nor leaks.

  Each direction (its parameters in `params`, `reverses[k]` true for right to left) gets its input
  projection hoisted out of the scan as one product, and its recurrent product `h W_hh` inside the
  scan with a deferred weight gradient. Returns per direction the outputs (B x S x H, zero at
  padding) and the final carry (the state after the last valid position). `cell_step` (cell, p, carry, x W_ih + b,
  valid_B) -> carry replaces `cell_update` with its product, as the fused kernels do (attnmt/model/kernels/).
  """
  dtype = x_BxSxI.dtype
  valid_SxB = jnp.arange(x_BxSxI.shape[1])[:, None] < length_B[None, :]
  xproj, carries = [], []
  for p, reverse in zip(params, reverses):
    x = jax.vmap(reverse_within_length)(x_BxSxI, length_B) if reverse else x_BxSxI
    xproj.append(jnp.swapaxes(input_projection(p, x), 0, 1))  # S x B x G, time-major
    carries.append(zero_carry(cell, x_BxSxI.shape[:1], p['W_hh'].shape[0], dtype))

  def step(ps, carries, inputs):
    xproj_G, valid_B = inputs
    if cell_step is not None:
      new = [cell_step(cell, p, c, xp, valid_B) for p, c, xp in zip(ps, carries, xproj_G)]
      return new, [carry[0] for carry in new]
    new = [
      cell_update(cell, p, carry, xp, carry[0] @ p['W_hh'].astype(dtype), valid_B)
      for p, carry, xp in zip(ps, carries, xproj_G)
    ]
    return new, [carry[0] for carry in new]

  finals, outs_SxBxH = deferred_scan.deferred_weight_scan(step, params, carries, (xproj, valid_SxB))
  outs = []
  for out_SxBxH, reverse in zip(outs_SxBxH, reverses):
    out_BxSxH = jnp.swapaxes(jnp.where(valid_SxB[..., None], out_SxBxH, 0), 0, 1)  # zero at padding
    outs.append(jax.vmap(reverse_within_length)(out_BxSxH, length_B) if reverse else out_BxSxH)
  return outs, finals
