"""host_memory.keep_freed_memory: a jitted program's temporary buffer is reused, not page-faulted anew.

Each case runs in a fresh process, since the setting must precede XLA's threads. The program's
temporary buffer is a 4096 x 4096 float32 product (64 MiB = 16,384 pages), above glibc's largest
mmap threshold, so with malloc's defaults every call maps it afresh and touches every page again.
"""
import os
import platform
import subprocess
import sys

import pytest

PAGES = 4096 * 4096 * 4 // 4096

SCRIPT = r'''
import resource
from attnmt import host_memory
applied = host_memory.keep_freed_memory()
import jax, jax.numpy as jnp
f = jax.jit(lambda x: (jnp.tanh(x @ x.T) @ x).sum())
x = jnp.ones((4096, 64), jnp.float32)
f(x).block_until_ready()
faults = []
for _ in range(3):
  before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
  f(x).block_until_ready()
  faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(applied, min(faults), host_memory.describe())
'''

glibc_only = pytest.mark.skipif(not sys.platform.startswith('linux') or platform.libc_ver()[0] != 'glibc',
                                reason='mallopt settings exist on glibc only')


def _run(keep: str):
  env = dict(os.environ, ATTNMT_KEEP_FREED_MEMORY=keep, JAX_PLATFORMS='cpu')
  out = subprocess.run([sys.executable, '-c', SCRIPT], env=env, capture_output=True, text=True, check=True)
  applied, faults, describe = out.stdout.split(' ', 2)
  return applied == 'True', int(faults), describe.strip()


@glibc_only
def test_freed_buffer_is_reused_without_page_faults():
  applied, faults, describe = _run('1')
  assert applied and describe.startswith('glibc malloc keeps freed memory')
  assert faults < PAGES // 10, faults


@glibc_only
def test_malloc_defaults_fault_the_buffer_in_again():
  """The reference the test above is measured against: the same program, malloc left alone."""
  applied, faults, describe = _run('0')
  assert not applied and describe == 'malloc defaults'
  assert faults > PAGES // 2, faults
