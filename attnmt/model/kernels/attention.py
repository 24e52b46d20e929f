"""Fused Pallas kernels for attention's scores, masked softmax and context (`attend`, `additive_attend`).

One kernel computes one decoder step's attention for a batch of queries, one program per sentence; its backward
pass is one kernel too (`jax.custom_vjp`). What is fused and what is not, the padding and the anchors (Marian's
MLP attention kernel, marian-dev src/rnn/attention.h): attnmt/model/kernels/cells.py. The path these kernels replace
is attention.attention_weights with the global window and softmax, then attention.context; the model calls them
through wiring.attention_step (model.kernels='pallas').
Letters: B batch, S source positions, D key size (A for the additive score), V value size; `p`: padded.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from attnmt.model.kernels.blocks import (
  column_block,
  dense,
  over_blocks,
  pad_to,
  pallas,
  primals,
  round_up,
  use_interpret,
)

_TINY = float(jnp.finfo(jnp.float32).tiny)  # masked_softmax's floor on the normaliser


class _Sentences(NamedTuple):
  """An attention call's sizes: S, D, V unpadded; Sp, Dp, Vp padded; cd, cv the key and value column blocks.
  One program per sentence (the batch is the grid)."""

  B: int
  S: int
  D: int
  V: int
  Sp: int
  Dp: int
  Vp: int
  cd: int
  cv: int

  @classmethod
  def of(cls, keys_BxSxD: jax.Array, values_BxSxV: jax.Array) -> _Sentences:
    (B, S, D), V = keys_BxSxD.shape, values_BxSxV.shape[-1]
    cd, cv = column_block(D), column_block(V)
    return cls(B, S, D, V, max(16, 1 << (S - 1).bit_length()), round_up(D, cd), round_up(V, cv), cd, cv)

  def specs(self, *kinds: str) -> list:
    """Per-sentence BlockSpecs: 'q' B x Dp, 'keys' B x Sp x Dp, 'v' Dp (shared), 'values' B x Sp x Vp,
    'positions' B x Sp, 'ctx' B x Vp."""
    one = pl.squeezed
    table = {
      'q': pl.BlockSpec((one, self.Dp), lambda b: (b, 0)),
      'keys': pl.BlockSpec((one, self.Sp, self.Dp), lambda b: (b, 0, 0)),
      'v': pl.BlockSpec((self.Dp,), lambda b: (0,)),
      'values': pl.BlockSpec((one, self.Sp, self.Vp), lambda b: (b, 0, 0)),
      'positions': pl.BlockSpec((one, self.Sp), lambda b: (b, 0)),
      'ctx': pl.BlockSpec((one, self.Vp), lambda b: (b, 0)),
    }
    return [table[k] for k in kinds]

  def shape(self, kind: str, dtype=jnp.float32):
    sizes = {
      'q': (self.B, self.Dp),
      'keys': (self.B, self.Sp, self.Dp),
      'values': (self.B, self.Sp, self.Vp),
      'positions': (self.B, self.Sp),
      'ctx': (self.B, self.Vp),
    }
    return jax.ShapeDtypeStruct(sizes[kind], dtype)


def _scores(q_ref, k_ref, v_ref, cd: int) -> jax.Array:
  """e_S = k q (dot), or v . tanh(k + q) (additive, v_ref given), summed over the key columns block by block."""

  def body(ks, e):
    k, q = k_ref[:, ks].astype(jnp.float32), q_ref[ks].astype(jnp.float32)[None, :]
    if v_ref is None:
      return e + jnp.sum(k * q, axis=1)
    return e + jnp.sum(jnp.tanh(k + q) * v_ref[ks].astype(jnp.float32)[None, :], axis=1)

  return over_blocks(k_ref.shape[1], cd, body, jnp.zeros((k_ref.shape[0],), jnp.float32))


def _masked_softmax(e_S: jax.Array, mask_ref) -> jax.Array:
  """`normalizers.masked_softmax`, step for step: masked positions 0, a row with no valid position all 0."""
  mask = mask_ref[...]
  valid = mask != 0
  e_max = jnp.max(jnp.where(valid, e_S, -jnp.inf))
  e_max = jnp.where(jnp.max(mask) > 0, e_max, 0.0)
  z_S = jnp.where(valid, jnp.exp(jnp.where(valid, e_S, e_max) - e_max), 0.0)
  return z_S / jnp.maximum(jnp.sum(z_S), _TINY)


def _each(n: int, size: int, fn) -> None:
  """fn(pl.ds(k * size, size)) for every column block of an axis of n entries, for its writes."""

  def body(ks, carry):
    fn(ks)
    return carry

  over_blocks(n, size, body, jnp.int32(0))


def _attention_fwd_kernel(additive: bool, cd: int, cv: int, *refs):
  q_ref, k_ref, *v_ref, val_ref, mask_ref, ctx_out, w_out = refs
  w_S = _masked_softmax(_scores(q_ref, k_ref, v_ref[0] if additive else None, cd), mask_ref)
  w_out[...] = w_S

  def context(vs):
    ctx_out[vs] = jnp.sum(w_S[:, None] * val_ref[:, vs].astype(jnp.float32), axis=0).astype(ctx_out.dtype)

  _each(val_ref.shape[1], cv, context)


def _attention_bwd_kernel(additive: bool, values: bool, cd: int, cv: int, *refs):
  """The cotangents of the query, keys (v for additive, the values when `values`) from those of the context and
  weights: g = dw + values dctx, de = w (g - w . g) (softmax's Jacobian; masked positions have w = 0)."""
  refs = list(refs)
  q_ref, k_ref = refs[:2]
  v_ref = refs.pop(2) if additive else None
  val_ref, w_ref, dctx_ref, dw_ref, dq_out, dk_out, *outs = refs[2:]
  dv_out = outs.pop(0) if additive else None
  dval_out = outs.pop(0) if values else None
  w_S = w_ref[...]

  def through_values(vs, g_S):
    dctx = dctx_ref[vs].astype(jnp.float32)[None, :]
    if dval_out is not None:
      dval_out[:, vs] = (w_S[:, None] * dctx).astype(dval_out.dtype)
    return g_S + jnp.sum(val_ref[:, vs].astype(jnp.float32) * dctx, axis=1)

  g_S = over_blocks(val_ref.shape[1], cv, through_values, dw_ref[...].astype(jnp.float32))
  de_Sx1 = (w_S * (g_S - jnp.sum(w_S * g_S)))[:, None]

  def through_scores(ks):
    k, q = k_ref[:, ks].astype(jnp.float32), q_ref[ks].astype(jnp.float32)[None, :]
    if v_ref is None:
      dq_out[ks] = jnp.sum(de_Sx1 * k, axis=0).astype(dq_out.dtype)
      dk_out[:, ks] = (de_Sx1 * q).astype(dk_out.dtype)
      return
    t = jnp.tanh(k + q)  # recomputed, as scores.additive_scores does, instead of stored
    dpre = de_Sx1 * v_ref[ks].astype(jnp.float32)[None, :] * (1.0 - t * t)
    dq_out[ks] = jnp.sum(dpre, axis=0).astype(dq_out.dtype)
    dk_out[:, ks] = dpre.astype(dk_out.dtype)
    dv_out[ks] = jnp.sum(de_Sx1 * t, axis=0)  # this sentence's part; the wrapper sums over the batch

  _each(k_ref.shape[1], cd, through_scores)


def _attention_forward(interpret, query_BxD, keys_BxSxD, v_D, values_BxSxV, mask_BxS):
  """(context, weights) and the padded weights, which the backward kernel reads."""
  L, additive = _Sentences.of(keys_BxSxD, values_BxSxV), v_D is not None
  ctx, w = pallas(
    functools.partial(_attention_fwd_kernel, additive, L.cd, L.cv),
    'attnmt_additive_attend' if additive else 'attnmt_attend',
    (L.B,),
    L.specs('q', 'keys', *(['v'] if additive else []), 'values', 'positions'),
    L.specs('ctx', 'positions'),
    [L.shape('ctx', values_BxSxV.dtype), L.shape('positions')],
    interpret,
    pad_to(query_BxD, (L.B, L.Dp)),
    pad_to(keys_BxSxD, (L.B, L.Sp, L.Dp)),
    *([pad_to(v_D, (L.Dp,))] if additive else []),
    pad_to(values_BxSxV, (L.B, L.Sp, L.Vp)),
    pad_to(mask_BxS.astype(jnp.int32), (L.B, L.Sp)),
  )
  return (ctx[:, : L.V], w[:, : L.S]), w


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _attention(interpret, query_BxD, keys_BxSxD, v_D, values_BxSxV, mask_BxS):
  return _attention_forward(interpret, query_BxD, keys_BxSxD, v_D, values_BxSxV, mask_BxS)[0]


def _attention_fwd(interpret, *args):
  (query_BxD, keys_BxSxD, v_D, values_BxSxV, mask_BxS), perturbed = primals(args)
  out, w = _attention_forward(interpret, query_BxD, keys_BxSxD, v_D, values_BxSxV, mask_BxS)
  return out, (query_BxD, keys_BxSxD, v_D, values_BxSxV, mask_BxS, w, perturbed[2], perturbed[3])


def _attention_bwd(interpret, residuals, cotangents):
  query_BxD, keys_BxSxD, v_D, values_BxSxV, mask_BxS, w, with_v, with_values = residuals
  L, additive = _Sentences.of(keys_BxSxD, values_BxSxV), v_D is not None
  dctx, dw = (dense(ct, like) for ct, like in zip(cotangents, (values_BxSxV[:, 0], mask_BxS.astype(w.dtype))))
  outs = [L.shape('q', query_BxD.dtype), L.shape('keys', keys_BxSxD.dtype)]
  out_specs = L.specs('q', 'keys')
  if additive:  # dv per sentence, summed over the batch below
    outs.append(L.shape('q'))
    out_specs += L.specs('q')
  if with_values:
    outs.append(L.shape('values', values_BxSxV.dtype))
    out_specs += L.specs('values')
  grads = pallas(
    functools.partial(_attention_bwd_kernel, additive, with_values, L.cd, L.cv),
    'attnmt_additive_attend_bwd' if additive else 'attnmt_attend_bwd',
    (L.B,),
    L.specs('q', 'keys', *(['v'] if additive else []), 'values', 'positions', 'ctx', 'positions'),
    out_specs,
    outs,
    interpret,
    pad_to(query_BxD, (L.B, L.Dp)),
    pad_to(keys_BxSxD, (L.B, L.Sp, L.Dp)),
    *([pad_to(v_D, (L.Dp,))] if additive else []),
    pad_to(values_BxSxV, (L.B, L.Sp, L.Vp)),
    w,
    pad_to(dctx, (L.B, L.Vp)),
    pad_to(dw, (L.B, L.Sp)),
  )
  dq, dk, *rest = grads
  dv_BxD = rest.pop(0) if additive else None
  dv = jnp.sum(dv_BxD[:, : L.D], axis=0).astype(v_D.dtype) if with_v else None
  dvalues = rest.pop(0)[:, : L.S, : L.V] if with_values else None
  return dq[:, : L.D], dk[:, : L.S, : L.D], dv, dvalues, None


_attention.defvjp(_attention_fwd, _attention_bwd, symbolic_zeros=True)


def attend(query_BxD, keys_BxSxD, values_BxSxV, mask_BxS, *, interpret=None):
  """Dot-product attention as one kernel: e_i = k_i . q, a = masked_softmax(e, mask), c = Σ_i a_i values_i.

  Returns (context B x V in the values' dtype, weights B x S float32). For `general`, the keys are h W
  (`scores.General.keys`, once per sentence). The values' gradient is formed only when they are differentiated.
  """
  return _attention(use_interpret(interpret), query_BxD, keys_BxSxD, None, values_BxSxV, mask_BxS)


def additive_attend(query_BxA, keys_BxSxA, v_A, values_BxSxV, mask_BxS, *, interpret=None):
  """Bahdanau's attention as one kernel: e_i = v . tanh(q + k_i) (Eq. 6, with q = W s and k_i = U h_i + b
  computed outside, as `scores._TanhScore` hoists them), then `attend`'s softmax and context."""
  return _attention(use_interpret(interpret), query_BxA, keys_BxSxA, v_A, values_BxSxV, mask_BxS)
