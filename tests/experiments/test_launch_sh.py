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


def test_attnmt_tcmalloc_takes_on_and_off_words_and_refuses_anything_else_in_one_line():
  """ATTNMT_TCMALLOC: 1/true/yes/on keep tcmalloc (the default, unset or empty), 0/false/no/off the system
  malloc (in any case: `false` used to keep it preloaded), anything else one line and exit status 1."""
  script = r'''
source <(sed -n '/^die()/p;/^tcmalloc_wanted()/,/^}/p' launch.sh)
ATTNMT_TCMALLOC="$1" tcmalloc_wanted && echo on || echo off
'''

  def wanted(value):
    return subprocess.run(['bash', '-c', script, 'x', value], cwd=ROOT, capture_output=True, text=True, timeout=60)

  for value, state in (
    ('', 'on'),
    ('1', 'on'),
    ('TRUE', 'on'),
    ('on', 'on'),
    ('0', 'off'),
    ('false', 'off'),
    ('No', 'off'),
  ):
    got = wanted(value)
    assert (got.returncode, got.stdout.strip()) == (0, state), (value, got.stdout, got.stderr)
  bad = wanted('maybe')
  assert bad.returncode == 1 and bad.stdout == ''
  assert (
    bad.stderr.strip() == 'launch.sh: ATTNMT_TCMALLOC=maybe: give 1 (tcmalloc, the default) or 0 (the system malloc)'
  )


def test_tcmalloc_off_takes_it_out_of_an_inherited_ld_preload():
  """ATTNMT_TCMALLOC=0 with LD_PRELOAD inherited from a shell that preloads tcmalloc: the commands run without
  it, the other libraries preloaded as they were; on, tcmalloc is preloaded once."""
  script = r'''
source <(sed -n '/^die()/p;/^tcmalloc_library()/,/^}/p;/^tcmalloc_wanted()/,/^}/p;/^use_tcmalloc()/,/^}/p' launch.sh)
tcmalloc_library() { echo /lib/libtcmalloc_minimal.so.4; }
LD_PRELOAD="$2" ATTNMT_TCMALLOC="$1" bash -c "$(declare -f die tcmalloc_library tcmalloc_wanted use_tcmalloc)
use_tcmalloc; echo \"\${LD_PRELOAD-unset}\""
'''

  def preload(value, inherited):
    res = subprocess.run(['bash', '-c', script, 'x', value, inherited], cwd=ROOT, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    return res.stdout.strip()

  tc = '/lib/libtcmalloc_minimal.so.4'
  assert preload('0', f'{tc}:/lib/other.so') == '/lib/other.so'
  assert preload('false', tc) == 'unset'
  assert preload('0', '/lib/other.so') == '/lib/other.so'
  assert preload('1', f'{tc}:/lib/other.so') == f'{tc}:/lib/other.so'
  assert preload('1', '/lib/other.so') == f'{tc}:/lib/other.so'


def test_setup_installs_the_test_tools_only_for_setup_and_test(tmp_path):
  """The online set-up installs attnmt alone for the commands that run it (main, train, ...) and with its test
  tools ([dev]) for `setup` and `test`; it reinstalls only when pyproject.toml changed or the tools are missing,
  and a set-up with the tools serves every command. A stand-in Python records each pip call."""
  venv = tmp_path / 'venv'
  (venv / 'bin').mkdir(parents=True)
  python = venv / 'bin' / 'python'
  python.write_text(f'#!/bin/sh\necho "$*" >> {tmp_path}/calls\n')
  python.chmod(0o755)
  script = r'''
source <(sed -n '/^setup()/,/^}/p' launch.sh)
die() { echo "die: $*"; exit 1; }
install_debian_packages() { :; }
use_tcmalloc() { :; }
VENV=$1 PY=$1/bin/python
setup $2
'''
  calls = tmp_path / 'calls'

  def run(kind=''):
    if calls.exists():
      calls.unlink()
    res = subprocess.run(['bash', '-c', script, 'x', str(venv), kind], cwd=ROOT, capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
    return [line for line in calls.read_text().splitlines() if 'install -q -e' in line] if calls.exists() else []

  assert run() == ['-m pip install -q -e .']  # main, train, ...: attnmt alone
  assert run() == []  # installed: nothing to do
  assert run('browser') == ['-m pip install -q -e .[dev]']  # setup / test: the tools are added
  assert run() == [] and run('browser') == []  # a set-up with the tools serves both
  stamp = venv / '.attnmt-installed'
  stamp.write_text('an older pyproject.toml\n')
  assert run() == ['-m pip install -q -e .']
