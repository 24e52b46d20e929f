"""The LSTM and GRU cell steps as fused Pallas kernels (on a GPU: Triton), forward and backward
(`jax.custom_vjp`): h W_hh, the bias, the gates and the padding select (`rnn.cell_update`, `rnn.lstm_gates`) in
one forward kernel; the backward kernel forms the gate gradients from the stored activations (`rnn._lstm_gates_bwd`'s
arithmetic) and dh_prev = dz W_hhᵀ in the same kernel. W_hh's own gradient is left to the caller (the package's
docstring, attnmt/model/kernels/__init__.py, says why and how). The cell wrappers pad the batch to a multiple of
ROWS and the hidden size to a multiple of its column block gate by gate, and slice the results back.
Letters: B batch, H hidden size, G gates (4 LSTM, 3 GRU; arrays are B x G*H, kernels see B x G x H); a `p`
suffix marks a padded size.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from attnmt.model.kernels.blocks import (
  ROWS,
  column_block,
  dense,
  over_blocks,
  pad_to,
  pallas,
  primals,
  round_up,
  use_interpret,
)


class _Cell(NamedTuple):
  """A cell call's sizes: B x H unpadded, Bp x Hp padded, `cols` the column block, `gates` G."""

  B: int
  H: int
  Bp: int
  Hp: int
  cols: int
  gates: int

  @classmethod
  def of(cls, h_BxH: jax.Array, gates: int) -> _Cell:
    B, H = h_BxH.shape
    cols = column_block(H)
    return cls(B, H, round_up(B, ROWS), round_up(H, cols), cols, gates)

  def gated(self, x_NxGH: jax.Array, rows: int) -> jax.Array:
    """N x G*H -> padded rows x G x Hp: the gate axis apart, each gate padded on its own."""
    return pad_to(x_NxGH.reshape(x_NxGH.shape[0], self.gates, self.H), (rows, self.gates, self.Hp))

  def rows(self, x_BxH: jax.Array) -> jax.Array:
    return pad_to(x_BxH, (self.Bp, self.Hp))

  def keep(self, keep_B: jax.Array) -> jax.Array:
    return pad_to(keep_B.astype(jnp.int32), (self.Bp,))

  def unpad(self, x: jax.Array) -> jax.Array:
    """Bp x Hp -> B x H; Bp x G x Hp -> B x G*H."""
    if x.ndim == 2:
      return x[: self.B, : self.H]
    return x[: self.B, :, : self.H].reshape(self.B, self.gates * self.H)

  def grid(self) -> tuple[int, int]:
    return self.Bp // ROWS, self.Hp // self.cols

  def specs(self, *kinds: str) -> list:
    """BlockSpecs on the (batch block b, column block j) grid: 'row' Bp x Hp whole rows, 'block' its (b, j) block,
    'gated' Bp x G x Hp's (b, j) block, 'gated_row' its whole rows, 'keep' Bp, 'cols' Hp, 'w' Hp x G x Hp's column
    block j, 'w_rows' its row block j."""
    R, C, G, Hp = ROWS, self.cols, self.gates, self.Hp
    table = {
      'row': pl.BlockSpec((R, Hp), lambda b, j: (b, 0)),
      'block': pl.BlockSpec((R, C), lambda b, j: (b, j)),
      'gated': pl.BlockSpec((R, G, C), lambda b, j: (b, 0, j)),
      'gated_row': pl.BlockSpec((R, G, Hp), lambda b, j: (b, 0, 0)),
      'keep': pl.BlockSpec((R,), lambda b, j: (b,)),
      'cols': pl.BlockSpec((C,), lambda b, j: (j,)),
      'w': pl.BlockSpec((Hp, G, C), lambda b, j: (0, 0, j)),
      'w_rows': pl.BlockSpec((C, G, Hp), lambda b, j: (j, 0, 0)),
    }
    return [table[k] for k in kinds]

  def shapes(self, *kinds: str, dtype=jnp.float32) -> list:
    sizes = {'row': (self.Bp, self.Hp), 'gated': (self.Bp, self.gates, self.Hp)}
    return [jax.ShapeDtypeStruct(sizes[k], dtype) for k in kinds]


def _products(h_ref, w_ref, gates: int, cols: int) -> tuple:
  """h W_hh on this program's column block, one R x C array per gate: the inner loop runs over h's columns."""

  def body(ks, acc):
    h = h_ref[:, ks]
    return tuple(a + jnp.dot(h, w_ref[ks, k, :], preferred_element_type=jnp.float32) for k, a in enumerate(acc))

  zero = jnp.zeros((h_ref.shape[0], cols), jnp.float32)
  return over_blocks(h_ref.shape[1], cols, body, (zero,) * gates)


def _transposed_products(dhproj, w_ref, gates: int, cols: int):
  """dh = dhproj W_hhᵀ on this program's row block of W_hh: `dhproj(ks)` is the gates' gradients on columns ks."""

  def body(ks, acc):
    d = dhproj(ks)
    for k in range(gates):
      w = w_ref[:, k, ks]  # the gradients enter the product in W_hh's dtype, as in the readable path's backward
      acc = acc + jax.lax.dot_general(
        d[k].astype(w.dtype), w, (((1,), (1,)), ((), ())), preferred_element_type=jnp.float32
      )
    return acc

  return over_blocks(w_ref.shape[2], cols, body, jnp.zeros((ROWS, cols), jnp.float32))


def _keep(keep_ref) -> jax.Array:
  return keep_ref[...][:, None] != 0


def _lstm_fwd_kernel(x_ref, h_ref, c_ref, w_ref, keep_ref, h_out, c_out, act_out, tanh_out):
  j, cols = pl.program_id(1), c_out.shape[-1]
  hproj = _products(h_ref, w_ref, 4, cols)
  z = [x_ref[:, k, :].astype(jnp.float32) + hproj[k] for k in range(4)]
  i, f, g, o = jax.nn.sigmoid(z[0]), jax.nn.sigmoid(z[1]), jnp.tanh(z[2]), jax.nn.sigmoid(z[3])
  c = c_ref[...].astype(jnp.float32)
  c_new = f * c + i * g
  tanh_c = jnp.tanh(c_new)
  keep = _keep(keep_ref)
  h_out[...] = jnp.where(keep, o * tanh_c, h_ref[:, pl.ds(j * cols, cols)]).astype(h_out.dtype)
  c_out[...] = jnp.where(keep, c_new, c).astype(c_out.dtype)
  for k, a in enumerate((i, f, g, o)):
    act_out[:, k, :] = a
  tanh_out[...] = tanh_c


def _lstm_grads(act_ref, c_ref, tanh_ref, dh_ref, dc_ref, keep, ks):
  """dz (gates i, f, g, o) and dc_prev on columns ks: `rnn._lstm_gates_bwd`'s arithmetic."""
  i, f, g, o = (act_ref[:, k, ks] for k in range(4))
  c, tanh_c = c_ref[:, ks].astype(jnp.float32), tanh_ref[:, ks]
  dh, dc = dh_ref[:, ks].astype(jnp.float32), dc_ref[:, ks].astype(jnp.float32)
  dh_new = jnp.where(keep, dh, 0.0)
  dc_new = jnp.where(keep, dc, 0.0) + dh_new * o * (1.0 - tanh_c * tanh_c)
  dz = (
    dc_new * g * i * (1.0 - i),
    dc_new * c * f * (1.0 - f),
    dc_new * i * (1.0 - g * g),
    dh_new * tanh_c * o * (1.0 - o),
  )
  return dz, dc_new * f + jnp.where(keep, 0.0, dc)


def _lstm_bwd_kernel(act_ref, c_ref, tanh_ref, dh_ref, dc_ref, keep_ref, w_ref, dz_out, dh_out, dc_out):
  m, cols = pl.program_id(1), dh_out.shape[-1]
  keep = _keep(keep_ref)
  grads = lambda ks: _lstm_grads(act_ref, c_ref, tanh_ref, dh_ref, dc_ref, keep, ks)
  dz, dc_prev = grads(pl.ds(m * cols, cols))
  for k in range(4):
    dz_out[:, k, :] = dz[k].astype(dz_out.dtype)
  dc_out[...] = dc_prev.astype(dc_out.dtype)
  dh_direct = jnp.where(keep, 0.0, dh_ref[:, pl.ds(m * cols, cols)].astype(jnp.float32))
  dh_out[...] = (dh_direct + _transposed_products(lambda ks: grads(ks)[0], w_ref, 4, cols)).astype(dh_out.dtype)


def _gru_fwd_kernel(x_ref, h_ref, w_ref, b_hn_ref, keep_ref, h_out, act_out, hn_out):
  j, cols = pl.program_id(1), h_out.shape[-1]
  hproj = _products(h_ref, w_ref, 3, cols)
  x_r, x_z, x_n = (x_ref[:, k, :].astype(jnp.float32) for k in range(3))
  r = jax.nn.sigmoid(x_r + hproj[0])
  z = jax.nn.sigmoid(x_z + hproj[1])
  hn = hproj[2] + b_hn_ref[...].astype(jnp.float32)[None, :]
  n = jnp.tanh(x_n + r * hn)
  h = h_ref[:, pl.ds(j * cols, cols)].astype(jnp.float32)
  h_out[...] = jnp.where(_keep(keep_ref), (1.0 - z) * n + z * h, h).astype(h_out.dtype)
  for k, a in enumerate((r, z, n)):
    act_out[:, k, :] = a
  hn_out[...] = hn


def _gru_grads(act_ref, hn_ref, h_ref, dh_ref, keep, ks):
  """On columns ks: the gradients of x W_ih + b (gates r, z, n), of h W_hh (the n gate's times r) and h's own."""
  r, z, n = (act_ref[:, k, ks] for k in range(3))
  hn, h, dh = hn_ref[:, ks], h_ref[:, ks].astype(jnp.float32), dh_ref[:, ks].astype(jnp.float32)
  dnew = jnp.where(keep, dh, 0.0)
  dn = dnew * (1.0 - z) * (1.0 - n * n)
  dz = dnew * (h - n) * z * (1.0 - z)
  dr = dn * hn * r * (1.0 - r)
  return (dr, dz, dn), (dr, dz, dn * r), jnp.where(keep, dh * z, dh)


def _gru_bwd_kernel(act_ref, hn_ref, h_ref, dh_ref, keep_ref, w_ref, dx_out, dhn_out, dh_out):
  m, cols = pl.program_id(1), dh_out.shape[-1]
  keep = _keep(keep_ref)
  grads = lambda ks: _gru_grads(act_ref, hn_ref, h_ref, dh_ref, keep, ks)
  dx, dhproj, dh_direct = grads(pl.ds(m * cols, cols))
  for k in range(3):
    dx_out[:, k, :] = dx[k].astype(dx_out.dtype)
  dhn_out[...] = dhproj[2].astype(dhn_out.dtype)
  dh_out[...] = (dh_direct + _transposed_products(lambda ks: grads(ks)[1], w_ref, 3, cols)).astype(dh_out.dtype)


def _lstm_forward(interpret, xproj_BxG, h_BxH, c_BxH, W_hh_HxG, keep_B):
  """(h', c') and what the backward kernel reads: the activations and tanh c' (padded)."""
  L = _Cell.of(h_BxH, 4)
  h, c, act, tanh_c = pallas(
    _lstm_fwd_kernel,
    'attnmt_lstm_step',
    L.grid(),
    L.specs('gated', 'row', 'block', 'w', 'keep'),
    L.specs('block', 'block', 'gated', 'block'),
    L.shapes('row', dtype=h_BxH.dtype) + L.shapes('row', dtype=c_BxH.dtype) + L.shapes('gated', 'row'),
    interpret,
    L.gated(xproj_BxG, L.Bp),
    L.rows(h_BxH),
    L.rows(c_BxH),
    L.gated(W_hh_HxG, L.Hp),
    L.keep(keep_B),
  )
  return (L.unpad(h), L.unpad(c)), (act, tanh_c)


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _lstm(interpret, xproj_BxG, h_BxH, c_BxH, W_hh_HxG, keep_B, tap):
  return _lstm_forward(interpret, xproj_BxG, h_BxH, c_BxH, W_hh_HxG, keep_B)[0]


def _lstm_fwd(interpret, *args):
  (xproj_BxG, h_BxH, c_BxH, W_hh_HxG, keep_B, _), perturbed = primals(args)
  out, (act, tanh_c) = _lstm_forward(interpret, xproj_BxG, h_BxH, c_BxH, W_hh_HxG, keep_B)
  return out, (act, tanh_c, h_BxH, c_BxH, W_hh_HxG, keep_B, perturbed[3], perturbed[5])


def _lstm_bwd(interpret, residuals, cotangents):
  act, tanh_c, h_BxH, c_BxH, W_hh_HxG, keep_B, weight, tap = residuals
  L = _Cell.of(h_BxH, 4)
  dh, dc = (L.rows(dense(ct, like)) for ct, like in zip(cotangents, (h_BxH, c_BxH)))
  dz, dh_prev, dc_prev = pallas(
    _lstm_bwd_kernel,
    'attnmt_lstm_step_bwd',
    L.grid(),
    L.specs('gated_row', 'row', 'row', 'row', 'row', 'keep', 'w_rows'),
    L.specs('gated', 'block', 'block'),
    L.shapes('gated', dtype=h_BxH.dtype) + L.shapes('row', dtype=h_BxH.dtype) + L.shapes('row', dtype=c_BxH.dtype),
    interpret,
    act,
    L.rows(c_BxH),
    tanh_c,
    dh,
    dc,
    L.keep(keep_B),
    L.gated(W_hh_HxG, L.Hp),
  )
  dz_BxG = L.unpad(dz)  # for the LSTM, the cotangent of xproj and of h W_hh alike
  dW = (h_BxH.T @ dz_BxG).astype(W_hh_HxG.dtype) if weight else None
  return dz_BxG, L.unpad(dh_prev), L.unpad(dc_prev), dW, None, dz_BxG if tap else None


_lstm.defvjp(_lstm_fwd, _lstm_bwd, symbolic_zeros=True)


def lstm_step(xproj_BxG, h_BxH, c_BxH, W_hh_HxG, keep_B, *, tap=None, interpret=None):
  """One LSTM step (gates i, f, g, o) as one kernel: (h', c') for z = xproj + h W_hh, `rnn.lstm_gates`'s update;
  rows where `keep_B` is false return (h, c). One batch axis (B x H); `jax.vmap` adds others.

  `tap` (B x G, optional; its value is never read: zeros, or the product stop_gradient(h) @ W_hh itself, as
  wiring.cell_step passes it) receives the cotangent of h W_hh: with W_hh held constant, a scan forms dW_hh
  as Σ_t h_tᵀ dtap_t after its backward pass (the module docstring).
  """
  return _lstm(use_interpret(interpret), xproj_BxG, h_BxH, c_BxH, W_hh_HxG, keep_B, tap)


def _gru_forward(interpret, xproj_BxG, h_BxH, W_hh_HxG, b_hn_H, keep_B):
  """h' and what the backward kernel reads: the activations r, z, n and h W_n + b_hn (padded)."""
  L = _Cell.of(h_BxH, 3)
  h, act, hn = pallas(
    _gru_fwd_kernel,
    'attnmt_gru_step',
    L.grid(),
    L.specs('gated', 'row', 'w', 'cols', 'keep'),
    L.specs('block', 'gated', 'block'),
    L.shapes('row', dtype=h_BxH.dtype) + L.shapes('gated', 'row'),
    interpret,
    L.gated(xproj_BxG, L.Bp),
    L.rows(h_BxH),
    L.gated(W_hh_HxG, L.Hp),
    pad_to(b_hn_H, (L.Hp,)),
    L.keep(keep_B),
  )
  return L.unpad(h), (act, hn)


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _gru(interpret, xproj_BxG, h_BxH, W_hh_HxG, b_hn_H, keep_B, tap):
  return _gru_forward(interpret, xproj_BxG, h_BxH, W_hh_HxG, b_hn_H, keep_B)[0]


def _gru_fwd(interpret, *args):
  (xproj_BxG, h_BxH, W_hh_HxG, b_hn_H, keep_B, _), perturbed = primals(args)
  out, (act, hn) = _gru_forward(interpret, xproj_BxG, h_BxH, W_hh_HxG, b_hn_H, keep_B)
  return out, (act, hn, h_BxH, W_hh_HxG, b_hn_H, keep_B, perturbed[2], perturbed[3], perturbed[5])


def _gru_bwd(interpret, residuals, dh_BxH):
  act, hn, h_BxH, W_hh_HxG, b_hn_H, keep_B, weight, bias, tap = residuals
  L = _Cell.of(h_BxH, 3)
  dx, dhn, dh_prev = pallas(
    _gru_bwd_kernel,
    'attnmt_gru_step_bwd',
    L.grid(),
    L.specs('gated_row', 'row', 'row', 'row', 'keep', 'w_rows'),
    L.specs('gated', 'block', 'block'),
    L.shapes('gated', dtype=h_BxH.dtype) + L.shapes('row') + L.shapes('row', dtype=h_BxH.dtype),
    interpret,
    act,
    hn,
    L.rows(h_BxH),
    L.rows(dense(dh_BxH, h_BxH)),
    L.keep(keep_B),
    L.gated(W_hh_HxG, L.Hp),
  )
  dx_BxG, dhn_BxH = L.unpad(dx), L.unpad(dhn)
  dhproj_BxG = None
  if weight or tap:  # the cotangent of h W_hh: xproj's, with the n gate's times r
    dhproj_BxG = jnp.concatenate([dx_BxG[:, : 2 * L.H], dhn_BxH.astype(dx_BxG.dtype)], axis=1)
  dW = (h_BxH.T @ dhproj_BxG).astype(W_hh_HxG.dtype) if weight else None
  db_hn = jnp.sum(dhn_BxH, axis=0).astype(b_hn_H.dtype) if bias else None
  return dx_BxG, L.unpad(dh_prev), dW, db_hn, None, dhproj_BxG if tap else None


_gru.defvjp(_gru_fwd, _gru_bwd, symbolic_zeros=True)


def gru_step(xproj_BxG, h_BxH, W_hh_HxG, b_hn_H, keep_B, *, tap=None, interpret=None):
  """One GRU step (gates r, z, n) as one kernel: `rnn.cell_update`'s GRU branch, n = tanh(x_n + r (h W_n + b_hn));
  rows where `keep_B` is false keep h. `tap` as in `lstm_step`: for the GRU the cotangent of h W_hh differs from
  that of xproj in the n gate, by the factor r, and b_hn's gradient is the batch sum of its n block (formed per
  call only when b_hn is differentiated)."""
  return _gru(use_interpret(interpret), xproj_BxG, h_BxH, W_hh_HxG, b_hn_H, keep_B, tap)
