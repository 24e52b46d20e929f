"""Bad input to the cache switch and the tools (issue 53): ATTNMT_JAX_CACHE's spellings of "off", a corrupted
compilation-cache entry that heals, `./launch.sh wheelhouse` on a file, an unwritable folder or without the
network, and `./launch.sh bench` with an unknown section or no seeds: one line, a non-zero exit, nothing written."""

import os
import re
import subprocess
import sys
import time

import pytest

from experiments import common

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
UNREACHABLE = 'http://127.0.0.1:9/simple'  # the discard port: nothing answers


@pytest.mark.parametrize('spelling', ['0', 'false', 'False', 'no', 'off', 'OFF'])
def test_every_spelling_of_off_switches_the_cache_off(spelling, monkeypatch, tmp_path):
  monkeypatch.delenv('JAX_COMPILATION_CACHE_DIR', raising=False)
  monkeypatch.setenv('XDG_CACHE_HOME', str(tmp_path))
  monkeypatch.setenv('ATTNMT_JAX_CACHE', spelling)
  assert common.compilation_cache_dir() is None
  monkeypatch.setenv('ATTNMT_JAX_CACHE', '1')
  assert common.compilation_cache_dir() == os.path.join(str(tmp_path), 'attnmt', 'jax')


@pytest.mark.parametrize('spelling', ['', '1', 'true', 'Yes', 'ON'])
def test_every_spelling_of_on_keeps_the_cache_on(spelling, monkeypatch, tmp_path):
  monkeypatch.delenv('JAX_COMPILATION_CACHE_DIR', raising=False)
  monkeypatch.setenv('XDG_CACHE_HOME', str(tmp_path))
  monkeypatch.setenv('ATTNMT_JAX_CACHE', spelling)
  assert common.compilation_cache_dir() == os.path.join(str(tmp_path), 'attnmt', 'jax')


def test_an_unknown_cache_switch_is_one_line_and_exit_2(tmp_path):
  """A typo is refused before anything runs, instead of leaving the cache on silently."""
  env = {k: v for k, v in os.environ.items() if k != 'JAX_COMPILATION_CACHE_DIR'}
  env.update(ATTNMT_JAX_CACHE='maybe', XDG_CACHE_HOME=str(tmp_path), JAX_PLATFORMS='cpu')
  res = subprocess.run(
    [sys.executable, '-m', 'experiments.analyze', f'--from_scores={tmp_path / "absent.csv"}'],
    cwd=ROOT,
    env=env,
    capture_output=True,
    text=True,
  )
  assert res.returncode == 2, res.stderr[-2000:]
  lines = res.stderr.strip().splitlines()
  assert len(lines) == 1 and "ATTNMT_JAX_CACHE='maybe'" in lines[0], res.stderr[-2000:]
  assert not (tmp_path / 'attnmt').exists()  # nothing written


HEAL_SCRIPT = """
import jax, jax.numpy as jnp
from experiments import common
common.use_compilation_cache()
print(float(jax.jit(lambda x: jnp.sin(x) @ x)(jnp.ones((8, 8))).sum()))
"""


@pytest.mark.slow
def test_a_corrupted_cache_entry_is_dropped_once_and_written_again(tmp_path):
  env = {k: v for k, v in os.environ.items() if k != 'JAX_COMPILATION_CACHE_DIR'}
  env.update(XDG_CACHE_HOME=str(tmp_path), JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS='0', JAX_PLATFORMS='cpu')
  env.pop('ATTNMT_JAX_CACHE', None)
  folder = tmp_path / 'attnmt' / 'jax'

  def run():
    res = subprocess.run([sys.executable, '-c', HEAL_SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-2000:]
    return [line for line in res.stderr.splitlines() if 'cache entry' in line]

  assert run() == []
  entries = sorted(folder.glob('*-cache'))
  assert entries
  for entry in entries:
    entry.write_bytes(b'not a compiled program')
  lines = run()
  dropped = sorted(line for line in lines if line.startswith('attnmt: '))
  # the reason is the decompressor's (zlib here; zstandard where it is installed)
  assert [re.sub(r' \(.*\); ', ' (REASON); ', line) for line in dropped] == sorted(
    f'attnmt: removed the unreadable compilation cache entry {entry} (REASON); it is written again' for entry in entries
  ), lines
  assert any('Error reading persistent compilation cache entry' in line for line in lines)  # JAX's, this once
  assert all(entry.read_bytes() != b'not a compiled program' for entry in entries)  # written again
  assert run() == []  # healed: no warning any more


def _launch(*args, **env):
  return subprocess.run(
    ['./launch.sh', *args],
    cwd=ROOT,
    env={**{k: v for k, v in os.environ.items() if k != 'ATTNMT_WHEELHOUSE'}, **env},
    capture_output=True,
    text=True,
    timeout=120,
  )


def test_wheelhouse_on_a_file_says_so_in_one_line(tmp_path):
  target = tmp_path / 'afile'
  target.write_text('x')
  for path, where in ((target, target), (target / 'sub', target)):
    res = _launch('wheelhouse', str(path))
    assert res.returncode == 2
    assert res.stderr.splitlines() == [
      f'error: wheelhouse DIR {path}: {where} is a file, not a folder; pass a folder (it is made if missing)'
    ]
  assert os.listdir(tmp_path) == ['afile'] and target.read_text() == 'x'


def test_wheelhouse_in_an_unwritable_folder_says_so_in_one_line(tmp_path):
  if os.geteuid() == 0:  # root writes anywhere but into a read-only file system
    if not os.path.isdir('/sys/kernel'):
      pytest.skip('needs /sys (read-only for root) or a user other than root')
    folder, reason = '/sys', 'Operation not permitted'
  else:
    tmp_path.chmod(0o500)
    folder, reason = str(tmp_path), 'Permission denied'
  try:
    res = _launch('wheelhouse', os.path.join(folder, 'attnmt-wheelhouse-test'))
  finally:
    tmp_path.chmod(0o700)
  assert res.returncode == 2
  assert res.stderr.splitlines() == [
    f'error: wheelhouse DIR {folder}/attnmt-wheelhouse-test: cannot write into {folder} ({reason}); pass a folder '
    'you can write to'
  ]
  assert not os.path.exists(os.path.join(folder, 'attnmt-wheelhouse-test'))
  assert not [p for p in os.listdir(folder) if p.startswith('.attnmt-wheelhouse-')]


def test_wheelhouse_without_the_network_says_it_needs_it_at_once(tmp_path):
  start = time.monotonic()
  res = _launch('wheelhouse', str(tmp_path / 'house'), PIP_INDEX_URL=UNREACHABLE, PIP_RETRIES='0')
  assert time.monotonic() - start < 20  # pip itself retried for about 71 s before failing
  assert res.returncode == 2
  assert res.stderr.splitlines() == [
    f'error: wheelhouse needs the network: the package index {UNREACHABLE} did not answer (Connection refused); '
    'run it on a machine with network (or set PIP_INDEX_URL to an index this machine reaches)'
  ]
  assert os.listdir(tmp_path) == []


SECTIONS = 'the sections are train, decode, seeds, scores, decode_seeds'


@pytest.mark.parametrize(
  'flags,line',
  [
    (['--only=nonesuch'], f'error: --only=nonesuch: unknown section nonesuch; {SECTIONS}'),
    (['--only=train,x,y'], f'error: --only=train,x,y: unknown sections x, y; {SECTIONS}'),
    (['--only='], f'error: --only=: names no section; {SECTIONS}'),
    (['--seeds=0'], "error: --seeds=0: '0' is not a seed count; pass whole numbers from 1 up, e.g. --seeds=1,2,4"),
    (['--seeds='], 'error: --seeds=: names no seed count; pass whole numbers from 1 up, e.g. --seeds=1,2,4'),
    (  # '\u00b2' passes str.isdigit, not int()
      ['--seeds=1,\u00b2,two'],
      "error: --seeds=1,\u00b2,two: '\u00b2' is not a seed count; pass whole numbers from 1 up, e.g. --seeds=1,2,4",
    ),
    (
      ['--only=decode_seeds', '--decode_seeds=0'],
      "error: --decode_seeds=0: '0' is not a seed count; pass whole numbers from 1 up, e.g. --decode_seeds=1,2,4",
    ),
  ],
)
def test_bench_names_the_accepted_sections_and_seed_counts(flags, line, tmp_path):
  out = tmp_path / 'bench.json'
  res = subprocess.run(
    [sys.executable, '-m', 'benchmarks.bench', *flags, f'--out={out}'], cwd=ROOT, capture_output=True, text=True
  )
  assert res.returncode == 2
  assert res.stderr.splitlines() == [line]
  assert not out.exists()
