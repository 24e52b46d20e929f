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
import optax

from attnmt import fused_loss, training


@contextlib.contextmanager
def loss_products_side_by_side():
  """The vocabulary backward before session 6: d W no longer waits for d h (`after_rows` returns x)."""
  ordered = fused_loss.after_rows
  fused_loss.after_rows = lambda x, y: x
  try:
    yield
  finally:
    fused_loss.after_rows = ordered


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
