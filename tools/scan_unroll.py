"""Patches for tools/variants.py: every `lax.scan` the model traces unrolled k steps per loop iteration.

    python -m tools.ab_step --variants='{"unroll2": {"patch": "tools.scan_unroll:by2"},
                                         "unroll8": {"patch": "tools.scan_unroll:by8"}}'

Unrolling puts k recurrent steps into one iteration of the loop XLA emits, so a backend that launches
kernels per iteration (a GPU) launches 1/k as many loop iterations' worth of control; the arithmetic is
the same. The model's scans are the encoder's and the decoder's (`model/deferred_scan.py`, forward and
backward), and this changes all of them; greedy and beam decoding (while loops) are not scans.
"""

from __future__ import annotations

import contextlib
import functools
from unittest import mock

import jax


@contextlib.contextmanager
def unrolled(k: int):
  """While inside, `jax.lax.scan` defaults to `unroll=k` (a caller's own `unroll` still wins)."""
  original = jax.lax.scan

  @functools.wraps(original)
  def scan(*args, unroll=k, **kwargs):
    return original(*args, unroll=unroll, **kwargs)

  with mock.patch.object(jax.lax, 'scan', scan):
    yield


def by2():
  return unrolled(2)


def by4():
  return unrolled(4)


def by8():
  return unrolled(8)
