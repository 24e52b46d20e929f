"""Bad input, one case per row: a one-line error naming the problem and the fix, a non-zero exit, and
nothing overwritten. Each case runs the real entry point in a subprocess. (README, Troubleshooting.)"""
import json
import os
import subprocess
import sys

import pytest

from attnmt import train_lib
from experiments.configs import tiny

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = dict(os.environ, JAX_PLATFORMS='cpu', PYTHONPATH=ROOT)


@pytest.fixture(scope='module')
def trained(tmp_path_factory):
  """A tiny trained run (in-process) and its data directory."""
  data_dir = str(tmp_path_factory.mktemp('data'))
  workdir = str(tmp_path_factory.mktemp('runs') / 'run')
  config = tiny.get_config()
  config.data.data_dir = data_dir
  config.train.num_steps = 10
  config.train.checkpoint_every = 10
  train_lib.train_and_evaluate(config, workdir)
  return workdir, data_dir


def run(module, *args):
  return subprocess.run([sys.executable, '-m', f'experiments.{module}', *args], cwd=ROOT, env=ENV,
                        capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)


def train_args(tmp_path, data_dir, *extra):
  return ['--config=experiments/configs/tiny.py', f'--workdir={tmp_path / "w"}',
          f'--config.data.data_dir={data_dir}', '--config.train.num_steps=2', *extra]


def last_line(res):
  lines = [l for l in res.stderr.strip().splitlines() if not l.startswith(('W', 'I')) or l.startswith('error')]
  return lines[-1] if lines else ''


def write(path, text):
  path.write_text(text)
  return str(path)


CASES = {
    'unknown score': (['--config.model.score=bilinear'],
                      "error: unknown model.score 'bilinear'; valid: none, additive, normed_additive, dot"),
    'unknown query timing': (['--config.model.query_timing=late'], "unknown model.query_timing 'late'; valid: bahdanau"),
    'unknown window': (['--config.model.window=local'], "unknown model.window 'local'; valid: global, local_m"),
    'unknown dataset': (['--config.data.name=klingon_bible'], "unknown dataset 'klingon_bible'; valid:"),
    'dot with unequal sizes': (['--config.model.score=dot', '--config.model.decoder_hidden_size=48'],
                               "score 'dot' needs the query size (decoder_hidden_size=48) to equal the annotation size"),
    'unknown schedule': (['--config.train.schedule=linear'], "unknown train.schedule 'linear'; valid: constant"),
    'bad seeds': (['--config.train.seeds=0,zero'], 'train.seeds must be comma-separated integers'),
    'config key that does not exist': (['--config.model.scroe=dot'], 'scroe'),
    'flag that does not exist': (['--learning_rate=0.1'], 'Unknown command line flag'),
    'more devices than exist': (['--config.train.num_devices=5'],
                                'error: train.num_devices=5, but 1 device(s) are visible; use 0 (all)'),
    'coordinator without process count': (['--coordinator_address=localhost:1'],
                                          'needs the number of processes and this process id: pass --num_processes'),
}


@pytest.mark.parametrize('case', sorted(CASES))
def test_bad_training_settings(case, tmp_path, trained):
  extra, message = CASES[case]
  res = run('train', *train_args(tmp_path, trained[1], *extra))
  assert res.returncode != 0
  assert message in res.stderr, res.stderr[-2000:]
  assert not (tmp_path / 'w' / 'checkpoints').exists()     # nothing was trained or written


@pytest.mark.parametrize('content,message', [
    ('', 'no sentence pairs'),
    ('hello\thola\tCC-BY\nonly one column\n', ':2: '),
    ('a\tb\tc\td\n', ':1: '),
])
def test_bad_pair_files(content, message, tmp_path, trained):
  path = write(tmp_path / 'pairs.tsv', content)
  res = run('train', *train_args(tmp_path, trained[1], '--config.data.name=tsv_pairs', f'--config.data.tsv_path={path}'))
  assert res.returncode == 2 and message in last_line(res) and path in last_line(res), res.stderr[-2000:]


def test_unreadable_pair_file(tmp_path, trained):
  res = run('train', *train_args(tmp_path, trained[1], '--config.data.name=tsv_pairs',
                                 f'--config.data.tsv_path={tmp_path}/missing.tsv'))
  assert res.returncode == 2 and 'missing.tsv' in last_line(res)


def test_workdir_with_a_different_run_is_refused_then_moved_aside_with_fresh(tmp_path, trained):
  workdir, data_dir = trained
  before = open(os.path.join(workdir, 'config.json')).read()
  args = ['--config=experiments/configs/tiny.py', f'--workdir={workdir}', f'--config.data.data_dir={data_dir}',
          '--config.model.score=general']
  res = run('train', *args)
  assert res.returncode == 2
  assert 'holds a run with a different config (differs in model.score)' in last_line(res)
  assert '--fresh' in last_line(res)
  assert open(os.path.join(workdir, 'config.json')).read() == before     # nothing overwritten


@pytest.mark.parametrize('setup,message', [
    ('missing', 'does not exist'),
    ('empty', 'is not an attnmt run directory'),
    ('not a run', 'is not an attnmt run directory'),
    ('garbled config', 'is unreadable'),
    ('future version', 'has format version 99'),
    ('no checkpoint', 'holds no checkpoint yet'),
    ('corrupted checkpoint', 'is corrupted or unreadable'),
])
def test_bad_checkpoint_directories(setup, message, tmp_path, trained):
  workdir, _ = trained
  d = tmp_path / 'run'
  if setup != 'missing':
    d.mkdir()
  if setup == 'not a run':
    write(d / 'notes.txt', 'hello')
  if setup == 'garbled config':
    write(d / 'config.json', '{"attnmt_format": 1, "config": ')
  if setup in ('future version', 'no checkpoint', 'corrupted checkpoint'):
    payload = json.load(open(os.path.join(workdir, 'config.json')))
    payload['attnmt_format'] = 99 if setup == 'future version' else 1
    write(d / 'config.json', json.dumps(payload))
  if setup == 'corrupted checkpoint':
    import shutil
    shutil.copytree(os.path.join(workdir, 'checkpoints'), d / 'checkpoints')
    for root, _, files in os.walk(d / 'checkpoints'):
      for f in files:
        if 'state' in root and not f.startswith('_'):
          with open(os.path.join(root, f), 'r+b') as fh:
            fh.truncate(7)
  res = run('analyze', f'--runs={d}', f'--out={tmp_path / "out"}', '--beam_size=0')
  assert res.returncode == 2 and message in last_line(res), res.stderr[-2000:]


def test_translate_refuses_an_empty_line_and_a_too_long_sentence(tmp_path, trained):
  workdir, _ = trained
  with_empty_line = write(tmp_path / 'a.txt', '1 2\n\n3\n')
  empty = run('translate', f'--run={workdir}', f'--input={with_empty_line}', '--beam_size=0')
  assert empty.returncode == 2 and last_line(empty) == 'error: input line 2 is empty; give one non-empty sentence per line'
  too_long = write(tmp_path / 'b.txt', '1 2 3 4 5 6\n')
  long = run('translate', f'--run={workdir}', f'--input={too_long}', '--max_source_tokens=4')
  assert long.returncode == 2 and 'has 7 tokens (with EOS), more than the limit 4' in last_line(long)
