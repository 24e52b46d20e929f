"""Code variants for `./launch.sh ab --patches=...`: each name maps to a context manager that changes
the library while the training step is traced and compiled, then restores it.

    ./launch.sh ab --patches=loss_products_side_by_side,optax_clip --pairs=150

A patch is how a code change is compared with the code as it is (the A/B's `base`), in one process,
against the same noise. These reproduce sessions 6 and 8's measurements (benchmarks/README.md, "Session 6").
"""
from __future__ import annotations

import functools
from unittest import mock

import jax
import optax
from absl import flags

from attnmt import deferred_scan, fused_loss, kernels, training

# The one --patches flag of the tools that take code variants (ab_step, profile_step): absl refuses a
# flag defined twice, and tests import both tools into one process.
PATCHES_FLAG = flags.DEFINE_list('patches', [], 'code variants: names in benchmarks/patches.py, a+b for both at once')

PATCHES = {
    # The vocabulary backward before session 6: d W no longer waits for d h (`after_rows` returns x).
    'loss_products_side_by_side': lambda: mock.patch.object(fused_loss, 'after_rows', lambda x, y: x),
    # optax's own clip_by_global_norm (a division per gradient) instead of training's scalar factor.
    'optax_clip': lambda: mock.patch.object(training, 'clip_by_global_norm', optax.clip_by_global_norm),
    # Every lax.scan of the step unrolled 2 or 4 steps per loop iteration.
    'unroll2': lambda: mock.patch.object(jax.lax, 'scan', functools.partial(jax.lax.scan, unroll=2)),
    'unroll4': lambda: mock.patch.object(jax.lax, 'scan', functools.partial(jax.lax.scan, unroll=4)),
    # Additive attention by its JAX path instead of the CPU kernel (attnmt/kernels, session 8).
    'no_attention_kernel': kernels.disabled,
    # The attention context (Σ_s a_s h_s) and its input gradient by XLA's batched dots instead of the kernel.
    'no_context_kernel': lambda: mock.patch.object(
        deferred_scan, 'product',
        lambda x, w: x @ w.astype(x.dtype) if w.ndim == 2 else deferred_scan._batched_product(x, w)),
}


def patch_contexts(names: list[str]) -> dict[str, list]:
  """Each variant name (patch names joined by '+') -> the context-manager factories to apply."""
  out = {}
  for name in names:
    parts = name.split('+')
    unknown = [p for p in parts if p not in PATCHES]
    if unknown:
      raise ValueError(f'unknown patch {unknown[0]!r}; known: {", ".join(sorted(PATCHES))}')
    out[name] = [PATCHES[p] for p in parts]
  return out
