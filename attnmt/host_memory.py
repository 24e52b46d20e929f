"""Host memory: let glibc's malloc keep the memory XLA frees, so the next step reuses it.

XLA on CPU allocates each execution's temporary buffer afresh and frees it when the execution ends.
For the bench-config training step that buffer is 354 MB. glibc serves a block that large with a
fresh `mmap` (XLA's worker threads allocate from per-thread arenas, whose heaps are at most 64 MB, so
large blocks always fall back to `mmap`) and returns it with `munmap` on free. Every step then
page-faults through its whole temporary buffer again: 86,600 minor faults, 338 MB of pages the kernel
zeroes, about 0.1 s of a 0.95 s step on 2 CPU cores (benchmarks/README.md).

`keep_freed_memory` switches that off for the process: one arena (so every thread allocates from the
main heap, which can grow to any size), no `mmap` for large blocks, and no trimming of the heap's free
top below 2 GiB. Freed buffers stay mapped and the next step's allocation of the same size reuses
them, with no page faults. The cost is that the process keeps its peak heap mapped, which for a
training loop is the memory it needs at every step anyway.

Call it before the first JAX computation (which starts XLA's worker threads; threads that already
made their own arena keep it). The entry points in experiments/ and benchmarks/ do. Set
ATTNMT_KEEP_FREED_MEMORY=0 to leave malloc's defaults alone. On other C libraries (macOS, musl) it
does nothing.
"""
from __future__ import annotations

import ctypes
import os
import platform
import sys

# mallopt parameters, from glibc's malloc.h.
M_TRIM_THRESHOLD = -1
M_MMAP_MAX = -4
M_ARENA_MAX = -8
TRIM_THRESHOLD = 2**31 - 1   # the largest value mallopt's int takes: 2 GiB

_applied: bool | None = None


def keep_freed_memory() -> bool:
  """Sets glibc malloc to keep and reuse freed memory (see the module docstring); True if it did.

  Idempotent. Returns False, changing nothing, off glibc or when ATTNMT_KEEP_FREED_MEMORY=0.
  """
  global _applied
  if _applied is not None:
    return _applied
  _applied = False
  if os.environ.get('ATTNMT_KEEP_FREED_MEMORY', '1') == '0':
    return False
  if not sys.platform.startswith('linux') or platform.libc_ver()[0] != 'glibc':
    return False
  libc = ctypes.CDLL(None)
  _applied = all(libc.mallopt(param, value) == 1 for param, value in
                 ((M_ARENA_MAX, 1), (M_MMAP_MAX, 0), (M_TRIM_THRESHOLD, TRIM_THRESHOLD)))
  return _applied


def describe() -> str:
  """One line for benchmark records: whether freed memory is kept."""
  if _applied:
    return 'glibc malloc keeps freed memory (arena_max=1, mmap_max=0, trim_threshold=2 GiB)'
  return 'malloc defaults'
