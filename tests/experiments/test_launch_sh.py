"""launch.sh: the shell functions that decide how Python runs."""

import os
import subprocess

from attnmt.training import host_memory

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_tcmalloc_library_survives_pipefail_and_agrees_with_python():
  """launch.sh runs under `set -o pipefail`: a pipe reader that exits at its first match (awk's
  `exit`, `grep -q`) can kill the writer with SIGPIPE, the pipeline then fails with 141, and launch.sh
  stops without a word. `tcmalloc_library` must succeed on every call, and name the library that
  `host_memory.tcmalloc_library` finds (nothing when tcmalloc is not installed)."""
  script = r'''
set -o pipefail
source <(sed -n '/^tcmalloc_library()/,/^}/p' launch.sh)
for i in $(seq 300); do found=$(tcmalloc_library) || { echo "failed with status $? on call $i"; exit 1; }; done
echo "$found"
'''
  res = subprocess.run(['bash', '-c', script], cwd=ROOT, capture_output=True, text=True, timeout=120)
  assert res.returncode == 0, res.stdout + res.stderr
  library = host_memory.tcmalloc_library()
  expected = os.path.basename(library) if library else ''  # find_library gives the soname
  assert os.path.basename(res.stdout.strip()) == expected
