"""Preemption and faults: exact resume after SIGKILL at five points, graceful SIGTERM, non-finite losses,
determinism. Runs are real subprocesses of experiments/train.py on the tiny config."""
import glob
import os
import signal
import subprocess
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnmt import checkpoints, guards, train_lib, training
from experiments.configs import tiny

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = dict(os.environ, JAX_PLATFORMS='cpu', PYTHONPATH=ROOT, PYTHONUNBUFFERED='1')
STEPS = 120


@pytest.fixture(scope='module')
def data_dir(tmp_path_factory):
  return str(tmp_path_factory.mktemp('data'))


def flags(workdir, data_dir):
  return ['-m', 'experiments.train', '--config=experiments/configs/tiny.py', f'--workdir={workdir}',
          f'--config.data.data_dir={data_dir}', f'--config.train.num_steps={STEPS}', '--config.train.seeds=0,1',
          '--config.train.checkpoint_every=10', '--config.train.eval_every=40', '--config.train.log_every=10']


def start(workdir, data_dir):
  return subprocess.Popen([sys.executable, *flags(workdir, data_dir)], cwd=ROOT, env=ENV, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)


def run_to_end(workdir, data_dir):
  res = subprocess.run([sys.executable, *flags(workdir, data_dir)], cwd=ROOT, env=ENV, capture_output=True,
                       text=True, timeout=600)
  assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
  return res


def wait_for(proc, condition, what, timeout=300):
  deadline = time.time() + timeout
  while not condition():
    assert proc.poll() is None, f'the run ended before {what}'
    assert time.time() < deadline, f'timed out waiting for {what}'
    time.sleep(0.005)


def wait_for_line(proc, text, timeout=300):
  deadline = time.time() + timeout
  for line in proc.stdout:
    if text in line:
      return
    assert time.time() < deadline, f'timed out waiting for {text!r}'
  raise AssertionError(f'the run ended before printing {text!r}')


def final_params(workdir):
  params, _, step = checkpoints.restore_params(str(workdir), 'latest')
  assert step == STEPS
  return params


def assert_bitwise_equal(a, b):
  jax.tree.map(lambda x, y: np.testing.assert_array_equal(np.asarray(x), np.asarray(y)), a, b)


@pytest.fixture(scope='module')
def reference(tmp_path_factory, data_dir):
  workdir = tmp_path_factory.mktemp('reference') / 'run'
  run_to_end(workdir, data_dir)
  return final_params(workdir)


def test_same_config_and_seed_train_bitwise_identically(tmp_path, data_dir, reference):
  run_to_end(tmp_path / 'again', data_dir)
  assert_bitwise_equal(final_params(tmp_path / 'again'), reference)


def test_sigkill_at_five_points_then_resume_equals_uninterrupted(tmp_path, data_dir, reference):
  workdir = tmp_path / 'run'
  ckpts = workdir / 'checkpoints'
  kills = {
      # 1. during training steps, shortly after the first checkpoint
      'mid-step': lambda p: (wait_for(p, lambda: (ckpts / '10').exists(), 'checkpoint 10'), time.sleep(0.3)),
      # 2. while a checkpoint is being written (Orbax's temporary directory exists)
      'mid-save': lambda p: wait_for(p, lambda: bool(glob.glob(str(ckpts / '*.orbax-checkpoint-tmp*'))),
                                     'a checkpoint write'),
      # 3. right after resuming, before any step
      'just-resumed': lambda p: wait_for_line(p, 'Resumed'),
      # 4. during validation (it starts right after the step-40 progress line)
      'mid-eval': lambda p: wait_for_line(p, f'{2 * 40}/{STEPS}'),
      # 5. during the final test evaluation, after the last checkpoint
      'final-eval': lambda p: (wait_for_line(p, f'step {STEPS} validation'),
                               wait_for(p, lambda: (ckpts / str(STEPS)).exists(), 'the last checkpoint')),
  }
  caught_mid_save = False
  for name, trigger in kills.items():
    proc = start(workdir, data_dir)
    trigger(proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    if name == 'mid-save':
      caught_mid_save = bool(glob.glob(str(ckpts / '*.orbax-checkpoint-tmp*')))
  assert caught_mid_save, 'the mid-save kill did not land inside a checkpoint write'
  assert not (workdir / 'results.json').exists()
  res = run_to_end(workdir, data_dir)
  assert 'Resumed' in res.stdout
  assert_bitwise_equal(final_params(workdir), reference)
  assert (workdir / 'results.json').exists()


def test_sigterm_saves_a_checkpoint_and_says_how_to_resume(tmp_path, data_dir, reference):
  workdir = tmp_path / 'run'
  proc = start(workdir, data_dir)
  wait_for_line(proc, f'30/{STEPS}')
  proc.send_signal(signal.SIGTERM)
  out, _ = proc.communicate(timeout=120)
  assert proc.returncode == 128 + signal.SIGTERM
  last = out.strip().splitlines()[-1]
  assert last.startswith('stopped by signal 15 at step') and 'run the same command again to resume' in last
  stopped_at = int(last.split('at step ')[1].split(';')[0])
  assert checkpoints.RunCheckpoints(str(workdir)).latest_step() == stopped_at
  run_to_end(workdir, data_dir)
  assert_bitwise_equal(final_params(workdir), reference)


def poisoned_train_step(bad_step):
  """train_step whose loss and gradients turn NaN at one step (fault injection for the guards)."""
  real = training.train_step

  def step(cfg, optimizer, state, batch, label_smoothing=0.0):
    new, metrics = real(cfg, optimizer, state, batch, label_smoothing)
    poison = jnp.where(state.step + 1 == bad_step, jnp.nan, 0.0)
    new = new.replace(params=jax.tree.map(lambda p: p + poison, new.params))
    return new, {**metrics, 'loss': metrics['loss'] + poison, 'grad_norm': metrics['grad_norm'] + poison}
  return step


def tiny_config(data_dir, **train):
  config = tiny.get_config()
  config.data.data_dir = data_dir
  config.train.update(dict(num_steps=40, checkpoint_every=5, eval_every=0, log_every=10, **train))
  return config


def test_nonfinite_loss_stops_before_any_checkpoint_after_it(tmp_path, data_dir, monkeypatch):
  monkeypatch.setattr(training, 'train_step', poisoned_train_step(23))
  with pytest.raises(guards.NonFiniteError, match=r'non-finite loss or gradient at step 23; stopped without saving '
                                                  r'\(last good checkpoint: step 20\)'):
    train_lib.train_and_evaluate(tiny_config(data_dir), str(tmp_path))
  params, _, step = checkpoints.restore_params(str(tmp_path), 'latest')
  assert step == 20 and all(np.all(np.isfinite(x)) for x in jax.tree.leaves(params))


def test_nonfinite_updates_can_be_skipped_and_counted(tmp_path, data_dir, monkeypatch):
  monkeypatch.setattr(training, 'train_step', poisoned_train_step(23))
  summary = train_lib.train_and_evaluate(tiny_config(data_dir, nonfinite='skip'), str(tmp_path))
  assert summary['skipped_updates'] == 1
  params, _, step = checkpoints.restore_params(str(tmp_path), 'latest')
  assert step == 40 and all(np.all(np.isfinite(x)) for x in jax.tree.leaves(params))


def test_guard_step_keeps_parameters_on_a_skipped_update():
  state = training.TrainState(jnp.int32(0), {'w': jnp.ones(3)}, {'m': jnp.zeros(3)}, jax.random.key(0))
  def bad(state, batch):
    return state.replace(step=state.step + 1, params={'w': state.params['w'] * jnp.nan}), \
        {'loss': jnp.float32(jnp.nan), 'grad_norm': jnp.float32(1.0)}
  new, metrics = guards.guard_step(bad, skip_nonfinite=True)(state, None)
  assert not bool(metrics['finite']) and int(new.step) == 1
  np.testing.assert_array_equal(new.params['w'], np.ones(3))
  first, count = guards.track_nonfinite(jnp.int32(-1), jnp.int32(0), jnp.array([True, False]), 7)
  assert int(first) == 7 and int(count) == 1
