"""The offline set-up: `ATTNMT_WHEELHOUSE=DIR ./launch.sh main` on a host without network, from a folder of
wheels, keeping the packages the host's Python already has (as a GPU image keeps its jax). The folder is made
here without network (the attnmt wheel alone), and the host's packages are this environment's, seen by a new
environment through a .pth file. Any network use would fail: the proxies point at a closed port and pip gets
no index."""

import json
import os
import subprocess
import sys
import sysconfig

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NO_NETWORK = {k: 'http://127.0.0.1:9' for k in ('http_proxy', 'https_proxy', 'HTTP_PROXY', 'HTTPS_PROXY')}


def _house(path, with_attnmt=True):
  wheels = path / 'wheels'
  wheels.mkdir(parents=True)
  if with_attnmt:
    cmd = [sys.executable, '-m', 'pip', 'wheel', '--quiet', '--no-deps', '--no-index', '--no-build-isolation']
    subprocess.run([*cmd, '-w', str(wheels), ROOT], check=True, env={**os.environ, **NO_NETWORK}, capture_output=True)
  (path / 'attnmt-wheelhouse.json').write_text(json.dumps({'python_version': '3', 'dev': False, 'sword': False}))
  return path


def _host(path, with_packages=True):
  """A new environment on the base Python whose site-packages see this one's packages (the host's own)."""
  base = getattr(sys, '_base_executable', sys.executable)
  subprocess.run([base, '-m', 'venv', '--system-site-packages', str(path)], check=True)
  python = path / 'bin' / 'python'
  purelib = subprocess.run(
    [python, '-c', 'import sysconfig; print(sysconfig.get_paths()["purelib"])'], capture_output=True, text=True
  ).stdout.strip()
  if with_packages:  # this environment's packages but attnmt (a host has never seen it), linked into one folder
    host = path.parent / 'host_site_packages'
    host.mkdir()
    here = sysconfig.get_paths()['purelib']
    for entry in os.listdir(here):
      if 'attnmt' not in entry.lower():
        os.symlink(os.path.join(here, entry), host / entry)
    with open(os.path.join(purelib, 'host_packages.pth'), 'w') as f:
      f.write(f'{host}\n')
  return path


def _launch(venv, house, *args):
  env = {**os.environ, **NO_NETWORK, 'ATTNMT_VENV': str(venv), 'ATTNMT_WHEELHOUSE': str(house), 'ATTNMT_TCMALLOC': '0'}
  env.pop('PYTHONPATH', None)
  return subprocess.run(['./launch.sh', *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_the_main_job_runs_offline_from_a_wheelhouse(tmp_path):
  house, venv = _house(tmp_path / 'house'), _host(tmp_path / 'venv')
  res = _launch(
    venv,
    house,
    'main',  # the main job's config, made tiny: the synthetic task, small sizes, 2 steps, one variant
    f'--workdir={tmp_path / "runs"}',
    f'--config.data.data_dir={tmp_path / "data"}',
    '--config.data.name=synthetic_numbers',
    '--config.data.synthetic_size=300',
    '--config.data.synthetic_eval_size=40',
    '--config.data.tokenizer=word',
    '--config.data.vocab_size=64',
    '--config.data.max_source_length=16',
    '--config.data.max_target_length=32',
    '--config.model.embed_size=16',
    '--config.model.encoder_hidden_size=16',
    '--config.model.decoder_hidden_size=32',
    '--config.train.num_steps=2',
    '--config.train.eval_every=0',
    '--config.train.checkpoint_every=2',
    '--config.sweep.scores=additive(size=16)',  # the sizes are the swept selections' options
    '--config.sweep.query_timings=bahdanau(deep_output_size=16)',
  )
  assert res.returncode == 0, res.stderr[-3000:]
  assert (tmp_path / 'runs' / 'results.md').read_text().startswith('| variant |')
  where = subprocess.run(
    [
      venv / 'bin' / 'python',
      '-c',
      'import attnmt, jax, importlib.metadata as m; print(m.distribution("attnmt").locate_file(""), jax.__file__)',
    ],
    capture_output=True,
    text=True,
    cwd=tmp_path,
  )
  assert where.returncode == 0, where.stderr[-2000:]
  where = where.stdout.split()
  assert where[0].startswith(str(venv)), where  # attnmt from the wheelhouse, into the new environment
  assert where[1].startswith(str(tmp_path / 'host_site_packages')), where  # the host's jax, not reinstalled


@pytest.mark.parametrize('case', ['no attnmt wheel', 'no jax anywhere', 'not a wheelhouse'])
@pytest.mark.slow
def test_a_missing_wheel_is_named_with_the_command_that_fetches_it(case, tmp_path):
  house = _house(tmp_path / 'house', with_attnmt=case != 'no attnmt wheel')
  venv = _host(tmp_path / 'venv', with_packages=case != 'no jax anywhere')
  if case == 'not a wheelhouse':
    house = tmp_path / 'empty'
    house.mkdir()
  res = _launch(venv, house, 'train', '--helpshort')
  assert res.returncode != 0
  line = res.stderr.strip().splitlines()[-1]
  if case == 'not a wheelhouse':
    assert line == (
      f'launch.sh: ATTNMT_WHEELHOUSE={house} is not a wheelhouse (no wheels/ and attnmt-wheelhouse.json); make one '
      f'on a machine with network: ./launch.sh wheelhouse {house}'
    )
    return
  missing = 'attnmt' if case == 'no attnmt wheel' else 'jax'
  assert line.startswith(f'launch.sh: the wheelhouse {house} has no wheel for {missing}'), res.stderr[-2000:]
  assert f'./launch.sh wheelhouse {house} --python-version=3.' in line
