"""Code variants for `./launch.sh ab --patches=...`: each name maps to a context manager that changes
the library while the training step is traced and compiled, then restores it.

    ./launch.sh ab --patches=loss_products_side_by_side,optax_clip --pairs=150

A patch is how a code change is compared with the code as it is (the A/B's `base`), in one process,
against the same noise. These reproduce session 6's measurements (benchmarks/README.md, "Session 6").
"""
from __future__ import annotations

import contextlib
import functools

import jax
import jax.numpy as jnp
import optax

from attnmt import fused_loss, training


def _loss_bwd_side_by_side(label_smoothing, residuals, g_N):
  """The vocabulary backward before session 6: d h and d W free to run side by side."""
  del label_smoothing
  hidden_NxO, w_OxV, b_V, p_NxV = residuals
  g_Nx1 = g_N.astype(hidden_NxO.dtype)[:, None]
  d_hidden = (p_NxV @ w_OxV.astype(p_NxV.dtype).T) * g_Nx1
  d_w = ((hidden_NxO * g_Nx1).T @ p_NxV).astype(w_OxV.dtype)
  d_b = jnp.matmul(g_N.astype(p_NxV.dtype), p_NxV, preferred_element_type=jnp.float32).astype(b_V.dtype)
  return d_hidden.astype(hidden_NxO.dtype), d_w, d_b, None


@contextlib.contextmanager
def loss_products_side_by_side():
  fused_loss.projected_nll.defvjp(fused_loss._fwd, _loss_bwd_side_by_side)
  try:
    yield
  finally:
    fused_loss.projected_nll.defvjp(fused_loss._fwd, fused_loss._bwd)


@contextlib.contextmanager
def optax_clip():
  """optax's own clip_by_global_norm (a division per gradient) instead of training's scalar factor."""
  ours = training.clip_by_global_norm
  training.clip_by_global_norm = optax.clip_by_global_norm
  try:
    yield
  finally:
    training.clip_by_global_norm = ours


@contextlib.contextmanager
def _scan_unroll(n: int):
  plain = jax.lax.scan
  jax.lax.scan = functools.partial(plain, unroll=n)
  try:
    yield
  finally:
    jax.lax.scan = plain


PATCHES = {
    'loss_products_side_by_side': loss_products_side_by_side,
    'optax_clip': optax_clip,
    'unroll2': lambda: _scan_unroll(2),
    'unroll4': lambda: _scan_unroll(4),
}
