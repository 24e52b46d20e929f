"""Host memory: why `launch.sh` runs Python with tcmalloc, and which malloc a process has.

XLA on CPU allocates each execution's temporary buffer afresh and frees it when the execution ends.
For the bench-config training step that buffer is 354 MB. glibc's malloc serves a block that large
with a fresh `mmap` (XLA's worker threads allocate from per-thread arenas, whose heaps hold at most
64 MB, so large blocks always fall back to `mmap`) and gives it back with `munmap` on free. Every step
then page-faults through its whole temporary buffer again: about 86,600 minor faults, 338 MB of pages
the kernel zeroes, about a tenth of the step on 2 CPU cores (benchmarks/README.md).

tcmalloc keeps freed spans and hands them to the next allocation of that size, so the step runs with
no page faults, and XLA's compiler, which allocates from many threads, compiles no slower (faster,
if anything). `launch.sh` installs it (Debian: libtcmalloc-minimal4) and starts every Python
command with it in LD_PRELOAD; ATTNMT_TCMALLOC=0 turns that off. A process started without it uses
the system malloc and runs the same, only slower. benchmarks/README.md, "Host memory", compares it
with glibc's own settings (one arena, no `mmap`: no faults, but compiling 25 % slower and a larger
heap), transparent huge pages for glibc's `mmap`s, and jemalloc (faults remain).
"""

from __future__ import annotations

import ctypes.util

LIBRARY = 'tcmalloc_minimal'
DEBIAN_PACKAGE = 'libtcmalloc-minimal4'


def allocator() -> str:
  """'tcmalloc' when this process runs with tcmalloc, else 'system malloc' (for benchmark records)."""
  try:
    with open('/proc/self/maps') as f:
      return 'tcmalloc' if any('libtcmalloc' in line for line in f) else 'system malloc'
  except OSError:
    return 'system malloc'


def tcmalloc_library() -> str | None:
  """The tcmalloc shared library's name as the dynamic loader finds it (for LD_PRELOAD), or None."""
  return ctypes.util.find_library(LIBRARY)
