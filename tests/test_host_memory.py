"""tcmalloc (which launch.sh preloads): a jitted program's temporary buffer is reused, not faulted anew.

Each case runs the same program in a fresh process: its temporary buffer is a 4096 x 4096 float32
product (64 MiB = 16,384 pages), larger than any block glibc's malloc keeps, so with the system
malloc every call maps it afresh and touches every page again (the reference case below).
"""
import os
import platform
import subprocess
import sys

import pytest

from attnmt import host_memory

PAGES = 4096 * 4096 * 4 // 4096

SCRIPT = r'''
import resource
from attnmt import host_memory
import jax, jax.numpy as jnp
f = jax.jit(lambda x: (jnp.tanh(x @ x.T) @ x).sum())
x = jnp.ones((4096, 64), jnp.float32)
f(x).block_until_ready()
faults = []
for _ in range(3):
  before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
  f(x).block_until_ready()
  faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(min(faults), host_memory.allocator())
'''

TCMALLOC = host_memory.tcmalloc_library()
needs_tcmalloc = pytest.mark.skipif(TCMALLOC is None and not os.environ.get('CI'),
                                    reason=f'{host_memory.DEBIAN_PACKAGE} not installed (launch.sh installs it)')


def _run(preload: str | None):
  env = {k: v for k, v in os.environ.items() if k != 'LD_PRELOAD'}
  env['JAX_PLATFORMS'] = 'cpu'
  if preload:
    env['LD_PRELOAD'] = preload
  out = subprocess.run([sys.executable, '-c', SCRIPT], env=env, capture_output=True, text=True, check=True)
  faults, allocator = out.stdout.split(' ', 1)
  return int(faults), allocator.strip()


@needs_tcmalloc
def test_tcmalloc_reuses_the_freed_buffer():
  assert TCMALLOC, f'{host_memory.DEBIAN_PACKAGE} is missing: launch.sh should have installed it'
  faults, allocator = _run(TCMALLOC)
  assert allocator == 'tcmalloc'
  assert faults < PAGES // 10, faults


@pytest.mark.skipif(not sys.platform.startswith('linux') or platform.libc_ver()[0] != 'glibc',
                    reason='the reference behaviour is glibc malloc\'s')
def test_system_malloc_faults_the_buffer_in_again():
  """The reference the test above is measured against: the same program with glibc's malloc."""
  faults, allocator = _run(None)
  assert allocator == 'system malloc'
  assert faults > PAGES // 2, faults


@pytest.mark.skipif(not os.environ.get('CI'), reason='checks the environment launch.sh gives the CI run')
def test_launch_sh_runs_python_with_tcmalloc():
  assert host_memory.allocator() == 'tcmalloc', (
      f'the tests run with the system malloc; launch.sh should install {host_memory.DEBIAN_PACKAGE} and preload it')


def test_launch_sh_finds_tcmalloc_without_dying_of_sigpipe():
  """launch.sh runs under `set -o pipefail`: a pipe reader that exits at its first match (awk's
  `exit`, `grep -q`) can kill the writer with SIGPIPE, and the pipeline then fails with 141 and stops
  launch.sh silently. The old `tcmalloc_library` did so in about 1 call in 30 here; the function must
  succeed every time, and print the same library as `host_memory.tcmalloc_library`."""
  library = host_memory.tcmalloc_library()
  if library is None:
    pytest.skip('tcmalloc is not installed: launch.sh installs it (libtcmalloc-minimal4)')
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  script = r'''
set -o pipefail
source <(sed -n '/^tcmalloc_library()/,/^}/p' launch.sh)
for i in $(seq 300); do found=$(tcmalloc_library) || { echo "failed with status $? on call $i"; exit 1; }; done
echo "$found"
'''
  res = subprocess.run(['bash', '-c', script], cwd=root, capture_output=True, text=True, timeout=120)
  assert res.returncode == 0, res.stdout + res.stderr
  assert os.path.basename(res.stdout.strip()) == os.path.basename(library)   # find_library gives the soname
