"""Preemption and faults: exact resume after SIGKILL at five points and after a graceful SIGTERM (real
subprocesses of experiments/train.py), after a kill between the best and the latest checkpoint of one step,
a deleted or damaged newest step (in-process), non-finite losses and parameters, clip_norm=0, determinism;
tiny config."""

import asyncio
import gc
import glob
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
import types
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import attnmt
from attnmt.training import checkpoint_io, checkpoints, guards, trainer, train_step
from attnmt.training import results as run_results
from experiments.configs import tiny

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENV = dict(os.environ, JAX_PLATFORMS='cpu', PYTHONPATH=ROOT, PYTHONUNBUFFERED='1')
STEPS = 120


@pytest.fixture(scope='session')  # with xdist_group: built once, though xdist interleaves modules
def data_dir(tmp_path_factory):
  return str(tmp_path_factory.mktemp('data'))


PROCESS_TRAIN = dict(num_steps=STEPS, seeds='0,1', checkpoint_every=10, eval_every=40, log_every=10)


def flags(workdir, data_dir, train=PROCESS_TRAIN):
  """The train command's arguments, with `train` as --config.train overrides of the tiny config."""
  return [
    '-m',
    'experiments.train',
    '--config=experiments/configs/tiny.py',
    f'--workdir={workdir}',
    f'--config.data.data_dir={data_dir}',
    *(f'--config.train.{key}={value}' for key, value in train.items()),
  ]


def start(workdir, data_dir):
  return subprocess.Popen(
    [sys.executable, *flags(workdir, data_dir)],
    cwd=ROOT,
    env=ENV,
    stdout=subprocess.PIPE,
    stderr=subprocess.STDOUT,
    text=True,
  )


def run_to_end(workdir, data_dir, train=PROCESS_TRAIN):
  res = subprocess.run(
    [sys.executable, *flags(workdir, data_dir, train)], cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=600
  )
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


@pytest.fixture(scope='session')  # with xdist_group: built once, though xdist interleaves modules
def reference(tmp_path_factory, data_dir):
  workdir = tmp_path_factory.mktemp('reference') / 'run'
  run_to_end(workdir, data_dir)
  return final_params(workdir)


@pytest.mark.xdist_group('faults_reference')  # one worker trains the shared reference run
@pytest.mark.slow
def test_sigkill_at_five_points_then_resume_equals_uninterrupted(tmp_path, data_dir, reference):
  """Seven processes train the run in pieces: five are killed, one is stopped by SIGTERM (it saves a checkpoint
  and says how to resume), and the last ends; the result equals the reference run's bit for bit, so the same
  config and seeds also train identically from one process to the next."""
  workdir = tmp_path / 'run'
  ckpts = workdir / 'checkpoints'
  stops = {
    # 1. during training steps, shortly after the first checkpoint
    'mid-step': lambda p: (wait_for(p, lambda: (ckpts / '10').exists(), 'checkpoint 10'), time.sleep(0.3)),
    # 2. while a checkpoint is being written (Orbax's temporary directory exists)
    'mid-save': lambda p: wait_for(
      p, lambda: bool(glob.glob(str(ckpts / '*.orbax-checkpoint-tmp*'))), 'a checkpoint write'
    ),
    # 3. right after resuming, before any step
    'just-resumed': lambda p: wait_for_line(p, 'Resumed'),
    # not a kill: SIGTERM during training steps (below)
    'sigterm': lambda p: wait_for_line(p, f'30/{STEPS}'),
    # 4. during the second validation (eval_every=40: it starts right after the step-80 progress line)
    'mid-eval': lambda p: wait_for_line(p, f'{2 * 40}/{STEPS}'),
    # 5. during the final test evaluation, after the last checkpoint
    'final-eval': lambda p: (
      wait_for_line(p, f'step {STEPS} validation'),
      wait_for(p, lambda: (ckpts / str(STEPS)).exists(), 'the last checkpoint'),
    ),
  }
  caught_mid_save = False
  for name, trigger in stops.items():
    proc = start(workdir, data_dir)
    trigger(proc)
    if name == 'sigterm':
      proc.send_signal(signal.SIGTERM)
      out, _ = proc.communicate(timeout=120)
      assert proc.returncode == 128 + signal.SIGTERM, out[-3000:]
      last = out.strip().splitlines()[-1]
      assert last.startswith('stopped by signal 15 at step') and 'run the same command again to resume' in last
      stopped_at = int(last.split('at step ')[1].split(';')[0])
      assert checkpoints.RunCheckpoints(str(workdir)).latest_step() == stopped_at
      continue
    if name == 'mid-step':  # the Python API reads a run still training (paused here, its lock held)
      proc.send_signal(signal.SIGSTOP)
      live = attnmt.load(str(workdir))  # no evaluation yet, so no 'best': the latest checkpoint
      assert live.step == checkpoints.RunCheckpoints(str(workdir)).latest_step() >= 10
      (got,) = live.translate(['4 2 7'])
      assert got.source_tokens == ['4', '2', '7', '</s>'] and got.attention.shape == (len(got.tokens), 4)
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


def poisoned_train_step(bad_step):
  """train_step whose loss and gradients turn NaN at one step (fault injection for the guards)."""
  real = train_step.train_step

  def step(cfg, optimizer, state, batch, **losses):
    new, metrics = real(cfg, optimizer, state, batch, **losses)
    poison = jnp.where(state.step + 1 == bad_step, jnp.nan, 0.0)
    new = new.replace(params=jax.tree.map(lambda p: p + poison, new.params))
    return new, {**metrics, 'loss': metrics['loss'] + poison, 'grad_norm': metrics['grad_norm'] + poison}

  return step


def tiny_config(data_dir, **train):
  config = tiny.get_config()
  config.data.data_dir = data_dir
  config.train.update(dict(num_steps=40, checkpoint_every=5, eval_every=0, log_every=10, **train))
  return config


def assert_stops_without_saving(data_dir, workdir, bad_step: int, last_good: int) -> None:
  """Training stops at `bad_step` with one line naming it, and its latest checkpoint is `last_good`, finite."""
  with pytest.raises(
    guards.NonFiniteError,
    match=rf'non-finite loss, gradient or parameters at step {bad_step}; stopped '
    rf'without saving \(last good checkpoint: step {last_good}\)',
  ):
    trainer.train_and_evaluate(tiny_config(data_dir), str(workdir))
  params, _, step = checkpoints.restore_params(str(workdir), 'latest')
  assert step == last_good and all(np.all(np.isfinite(x)) for x in jax.tree.leaves(params))


def test_nonfinite_loss_stops_before_any_checkpoint_after_it(tmp_path, data_dir, monkeypatch):
  monkeypatch.setattr(train_step, 'train_step', poisoned_train_step(23))
  assert_stops_without_saving(data_dir, tmp_path, bad_step=23, last_good=20)


@pytest.mark.slow
def test_nonfinite_updates_can_be_skipped_and_counted(tmp_path, data_dir, monkeypatch):
  monkeypatch.setattr(train_step, 'train_step', poisoned_train_step(23))
  summary = trainer.train_and_evaluate(tiny_config(data_dir, nonfinite='skip'), str(tmp_path))
  assert summary['skipped_updates'] == 1
  params, _, step = checkpoints.restore_params(str(tmp_path), 'latest')
  assert step == 40 and all(np.all(np.isfinite(x)) for x in jax.tree.leaves(params))


def test_guard_step_keeps_parameters_on_a_skipped_update():
  state = train_step.TrainState(jnp.int32(0), {'w': jnp.ones(3)}, {'m': jnp.zeros(3)}, jax.random.key(0))

  def bad(state, batch):
    return state.replace(step=state.step + 1, params={'w': state.params['w'] * jnp.nan}), {
      'loss': jnp.float32(jnp.nan),
      'grad_norm': jnp.float32(1.0),
    }

  new, metrics = guards.guard_step(bad, skip_nonfinite=True)(state, None)
  assert not bool(metrics['finite']) and int(new.step) == 1
  np.testing.assert_array_equal(new.params['w'], np.ones(3))
  first, count = guards.track_nonfinite(jnp.int32(-1), jnp.int32(0), jnp.array([True, False]), 7)
  assert int(first) == 7 and int(count) == 1


def test_nonfinite_parameters_with_a_finite_loss_are_a_bad_step(tmp_path, data_dir, monkeypatch):
  """A NaN learning rate: the loss and gradient of the step are finite, the updated parameters are not."""
  real = train_step.train_step

  def nan_update(cfg, optimizer, state, batch, **losses):
    new, metrics = real(cfg, optimizer, state, batch, **losses)
    poison = jnp.where(state.step + 1 == 13, jnp.nan, 0.0)
    return new.replace(params=jax.tree.map(lambda p: p + poison, new.params)), metrics

  monkeypatch.setattr(train_step, 'train_step', nan_update)
  assert_stops_without_saving(data_dir, tmp_path, bad_step=13, last_good=10)


def test_clip_norm_zero_means_no_clipping():
  grads = {'w': jnp.full(4, 100.0)}
  params = {'w': jnp.zeros(4)}
  unclipped = train_step.make_optimizer(0.1, clip_norm=0.0)
  updates, _ = unclipped.update(grads, unclipped.init(params), params)
  plain = optax_adam_updates(grads, params)
  np.testing.assert_array_equal(np.asarray(updates['w']), np.asarray(plain['w']))
  assert np.all(np.asarray(updates['w']) != 0)
  clipped = train_step.make_optimizer(0.1, clip_norm=1.0)
  g, _ = train_step.clip_by_global_norm(1.0).update(grads, None)
  assert float(jnp.linalg.norm(g['w'])) == pytest.approx(1.0)
  assert jax.tree.structure(clipped.init(params)) == jax.tree.structure(unclipped.init(params))


def optax_adam_updates(grads, params):
  import optax

  adam = optax.adam(0.1)
  return adam.update(grads, adam.init(params), params)[0]


def test_a_run_whose_updates_were_all_skipped_is_not_a_success(tmp_path, data_dir, monkeypatch):
  real = train_step.train_step

  def always_nan(cfg, optimizer, state, batch, **losses):
    new, metrics = real(cfg, optimizer, state, batch, **losses)
    return new, {**metrics, 'loss': metrics['loss'] + jnp.nan}

  monkeypatch.setattr(train_step, 'train_step', always_nan)
  with pytest.raises(
    guards.NonFiniteError, match=r'^every one of the 40 updates \(1 seed\(s\) x 40 steps\) was non-finite'
  ):
    trainer.train_and_evaluate(tiny_config(data_dir, nonfinite='skip'), str(tmp_path))
  assert not (tmp_path / 'results.json').exists()
  meta = {'skipped_updates': 3}
  run_results.check_trained(meta, 2, 2, {'w': jnp.ones(2)})  # 3 of 4 skipped: it trained
  with pytest.raises(guards.NonFiniteError, match='final parameters are not finite'):
    run_results.check_trained(meta, 2, 2, {'w': jnp.array([1.0, jnp.inf])})


# Checkpoint faults, in-process: a run "killed" at an exact point (an exception raised there, after the
# checkpoint writes so far have finished, as a SIGKILL would leave the disk) or whose newest step is
# deleted or damaged, then resumed; each ends bitwise equal to an uninterrupted run. Most start from a copy
# of the uninterrupted run's workdir made at such a point (`killed_copy`), the disk that kill would leave.


class Killed(BaseException):
  """Stands for SIGKILL: nothing after it runs, nothing catches it."""


def fault_config(data_dir):
  config = tiny_config(data_dir)
  config.train.update(dict(num_steps=40, checkpoint_every=10, eval_every=20, seeds='0'))
  return config


class Uninterrupted(NamedTuple):
  params: dict  # the final parameters
  copies: dict  # (step, best) -> a copy of the workdir as a kill right after that save leaves it


KILL_POINTS = ((20, True), (20, False), (30, False))  # (step, best): right after saving best/step or checkpoints/step


@pytest.fixture(scope='session')  # with xdist_group: built once, though xdist interleaves modules
def uninterrupted(tmp_path_factory, data_dir):
  """The uninterrupted run's final parameters, and {kill point: a copy of its workdir} for each of KILL_POINTS,
  copied where run_until_killed would raise (once the checkpoint writes so far have finished), without the
  lock file that the killed run's `with` block removes."""
  root = tmp_path_factory.mktemp('uninterrupted')
  workdir = str(root / 'run')
  copies = {(step, best): str(root / f'killed-{"best" if best else "latest"}-{step}') for step, best in KILL_POINTS}
  real = checkpoints.RunCheckpoints.save

  def save(self, s, state, meta, best=False):
    real(self, s, state, meta, best=best)
    if (s, best) in copies:
      self.wait()
      shutil.copytree(workdir, copies[s, best], ignore=shutil.ignore_patterns('.lock-*'))

  with pytest.MonkeyPatch.context() as mp:
    mp.setattr(checkpoints.RunCheckpoints, 'save', save)
    trainer.train_and_evaluate(fault_config(data_dir), workdir)
  return Uninterrupted(checkpoints.restore_params(workdir, 'latest')[0], copies)


def killed_copy(uninterrupted, tmp_path, step, best):
  """A workdir as a run killed right after saving (best or latest) `step` leaves it: the uninterrupted run's copy."""
  workdir = str(tmp_path / 'run')
  shutil.copytree(uninterrupted.copies[step, best], workdir)
  return workdir


@pytest.fixture
def patch():
  """A MonkeyPatch for checkpoint methods only. Not the `monkeypatch` fixture, with which tests/conftest.py also
  drops the training programs trainer caches (for tests that replace what a step is traced from): these tests
  reuse the uninterrupted run's programs."""
  with pytest.MonkeyPatch.context() as mp:
    yield mp


def kill_at(monkeypatch, step, best):
  """Makes RunCheckpoints.save raise Killed right after saving (best or latest) `step`, once finished."""
  monkeypatch.undo()
  real = checkpoints.RunCheckpoints.save

  def save(self, s, state, meta, best=False, _when=(step, best)):
    real(self, s, state, meta, best=best)
    if (s, best) == _when:
      self.wait()
      raise Killed

  monkeypatch.setattr(checkpoints.RunCheckpoints, 'save', save)


def run_until_killed(monkeypatch, data_dir, workdir, step, best):
  """Trains `workdir` until it is "killed" right after saving (best or latest) `step`."""
  kill_at(monkeypatch, step, best)
  with pytest.raises(Killed):
    trainer.train_and_evaluate(fault_config(data_dir), workdir)


def step_dirs(workdir):
  """Every saved step's directory, latest (checkpoints/) and best."""
  return [os.path.join(workdir, sub, str(step)) for sub in ('checkpoints', 'best') for step in steps(workdir, sub)]


def resume(monkeypatch, data_dir, workdir):
  monkeypatch.undo()
  trainer.train_and_evaluate(fault_config(data_dir), workdir)
  return checkpoints.restore_params(workdir, 'latest')[0]


def steps(workdir, sub):
  return sorted(int(n) for n in os.listdir(os.path.join(workdir, sub)) if n.isdigit())


def damage(step_dir):
  for root, _, files in os.walk(step_dir):
    for f in files:
      if 'state' in root and not f.startswith('_'):
        with open(os.path.join(root, f), 'r+b') as fh:
          fh.truncate(7)


@pytest.mark.xdist_group('faults_uninterrupted')  # one worker trains the shared uninterrupted run
@pytest.mark.slow
def test_killed_between_best_and_latest_of_one_step_then_newest_step_deleted(
  tmp_path, data_dir, uninterrupted, patch, capsys
):
  workdir = killed_copy(uninterrupted, tmp_path, 20, best=True)  # best/20 written, checkpoints/20 not
  assert steps(workdir, 'best') == [20] and steps(workdir, 'checkpoints') == [10]
  run_until_killed(patch, data_dir, workdir, 30, best=False)  # resumed from 10, saved best/20 again, killed at 30
  assert steps(workdir, 'best') == [20] and steps(workdir, 'checkpoints') == [20, 30]
  shutil.rmtree(os.path.join(workdir, 'checkpoints', '30'))  # docs/troubleshooting.md's advice for a bad checkpoint
  capsys.readouterr()
  assert_bitwise_equal(resume(patch, data_dir, workdir), uninterrupted.params)
  assert f'Resumed {workdir} at step 20' in capsys.readouterr().out


@pytest.mark.xdist_group('faults_uninterrupted')  # one worker trains the shared uninterrupted run
def test_damaged_newest_step_is_moved_aside_and_the_run_resumes(tmp_path, data_dir, uninterrupted, patch, capfd):
  workdir = killed_copy(uninterrupted, tmp_path, 30, best=False)
  damage(os.path.join(workdir, 'checkpoints', '30'))
  capfd.readouterr()
  assert_bitwise_equal(resume(patch, data_dir, workdir), uninterrupted.params)
  out, err = capfd.readouterr()
  notes = [l for l in out.splitlines() if 'is corrupted or unreadable' in l]
  assert len(notes) == 1 and 'checkpoints/30 is corrupted or unreadable' in notes[0], out
  assert notes[0].endswith('resuming from step 20, the newest intact one')
  assert 'Traceback' not in out + err and 'Exception ignored' not in out + err and 'Event loop' not in out + err
  assert len(os.listdir(os.path.join(workdir, 'damaged'))) == 1


@pytest.mark.xdist_group('faults_uninterrupted')  # one worker trains the shared uninterrupted run
def test_checkpoints_deleted_but_best_kept_resumes_from_best(tmp_path, data_dir, uninterrupted, patch, capsys):
  """A user who deleted checkpoints/ to save disk keeps best/: the run resumes from it, loses nothing of it,
  and ends bitwise equal to an uninterrupted run."""
  workdir = killed_copy(uninterrupted, tmp_path, 30, best=False)  # best/20, checkpoints/20 and 30
  shutil.rmtree(os.path.join(workdir, 'checkpoints'))
  capsys.readouterr()
  assert_bitwise_equal(resume(patch, data_dir, workdir), uninterrupted.params)
  out = capsys.readouterr().out
  assert f'no intact checkpoint in {workdir}/checkpoints: resuming from best/20' in out
  assert 20 in steps(workdir, 'best')


@pytest.mark.xdist_group('faults_uninterrupted')  # one worker trains the shared uninterrupted run
def test_every_latest_step_damaged_resumes_from_best(tmp_path, data_dir, uninterrupted, patch, capfd):
  """Each damaged step of checkpoints/ is moved aside with its line, and the run resumes from best/."""
  workdir = killed_copy(uninterrupted, tmp_path, 30, best=False)  # best/20, checkpoints/20 and 30 (two kept)
  damaged = steps(workdir, 'checkpoints')
  assert damaged == [20, 30] and steps(workdir, 'best') == [20]
  for step in damaged:
    damage(os.path.join(workdir, 'checkpoints', str(step)))
  capfd.readouterr()
  assert_bitwise_equal(resume(patch, data_dir, workdir), uninterrupted.params)
  out, err = capfd.readouterr()
  notes = [l for l in out.splitlines() if 'is corrupted or unreadable' in l]
  assert [n.split(' is corrupted')[0] for n in notes] == [f'checkpoint {workdir}/checkpoints/{s}' for s in (30, 20)]
  assert all(n.endswith('resuming from step 20, the newest intact one') for n in notes), notes
  assert f'no intact checkpoint in {workdir}/checkpoints: resuming from best/20' in out
  assert 'Traceback' not in out + err and 'Exception ignored' not in out + err and 'Event loop' not in out + err
  assert sorted(n.split('-')[1] for n in os.listdir(os.path.join(workdir, 'damaged'))) == ['20', '30']


@pytest.mark.xdist_group('faults_uninterrupted')  # one worker trains the shared uninterrupted run
@pytest.mark.slow
def test_every_step_damaged_starts_from_step_0_and_moves_every_one_aside(tmp_path, data_dir, uninterrupted):
  """No intact checkpoint anywhere: the train command starts again from step 0 (bitwise the uninterrupted run),
  and the damaged steps, best/ included, are moved to damaged/, not deleted. Its own process, as a user runs it:
  Orbax's failed reads finish and are collected during training, long after the lines below, and in a test's
  process pytest would take their tracebacks and asyncio's 'never retrieved' lines off stderr."""
  workdir = killed_copy(uninterrupted, tmp_path, 30, best=False)
  for step_dir in step_dirs(workdir):
    damage(step_dir)
  train = fault_config(data_dir).train
  res = run_to_end(workdir, data_dir, {k: train[k] for k in ('num_steps', 'checkpoint_every', 'eval_every', 'seeds')})
  out, err = res.stdout, res.stderr
  assert_bitwise_equal(checkpoints.restore_params(workdir, 'latest')[0], uninterrupted.params)
  notes = [l for l in out.splitlines() if 'is corrupted or unreadable' in l]
  assert [n.split(' is corrupted')[0].rsplit('/', 2)[-2:] for n in notes] == [
    ['checkpoints', '30'],
    ['checkpoints', '20'],
    ['best', '20'],
  ]
  assert all(
    n.endswith('starting from step 0: no older checkpoint is intact, and best/ holds no intact one') for n in notes
  )
  for noise in ('Traceback', 'Exception ignored', 'Event loop', 'never retrieved', 'ERROR'):
    assert noise not in out + err, err[-3000:]
  aside = sorted(n.rsplit('-', 2)[0] for n in os.listdir(os.path.join(workdir, 'damaged')))
  assert aside == ['best-20', 'checkpoints-20', 'checkpoints-30']
  assert steps(workdir, 'best')  # the new run wrote its own best checkpoints


def test_after_a_failed_read_orbax_late_noise_is_dropped_and_any_other_is_not(patch):
  """What the damaged-steps test above sees only when a failed read's tasks end late (under load): asyncio's
  'never retrieved' line for an exception raised in Orbax's code, and TensorStore's callback on Orbax's closed
  event loop, are dropped once a checkpoint read failed; the same from the user's own code still reaches them."""
  from orbax.checkpoint._src.metadata import array_metadata_store

  seen, unraisable = [], []
  patch.setattr(logging.getLogger('asyncio'), 'filters', [])  # restored afterwards: the test's own filter
  patch.setattr(sys, 'unraisablehook', unraisable.append)

  class Keep(logging.Handler):
    def emit(self, record):
      seen.append(repr(record.exc_info[1]))

  keep = Keep()
  logging.getLogger('asyncio').addHandler(keep)

  async def orbax_read():  # what a truncated array_metadatas file raises inside Orbax
    return array_metadata_store.Serializer().deserialize('{"trunc')

  async def users_own():
    raise ValueError('the user')

  def never_retrieved(coroutine):
    loop = asyncio.new_event_loop()

    async def gather():
      gathered = asyncio.gather(coroutine)
      await asyncio.sleep(0.01)
      return gathered

    loop.run_until_complete(gather())  # the result is dropped: collected with its exception unretrieved
    loop.close()
    gc.collect()

  def late_callback():  # what TensorStore's thread meets when a read ends after Orbax closed its loop
    loop = asyncio.new_event_loop()
    loop.close()
    try:
      loop.call_soon_threadsafe(print)
    except RuntimeError as e:
      return types.SimpleNamespace(exc_type=RuntimeError, exc_value=e, exc_traceback=e.__traceback__, object=None)

  try:
    with pytest.raises(ValueError):
      with checkpoint_io.quiet_io():
        raise ValueError('a damaged step')  # a failed read: from here on the process drops Orbax's late noise
    never_retrieved(orbax_read())
    never_retrieved(users_own())
    sys.unraisablehook(late_callback())
    other = types.SimpleNamespace(
      exc_type=RuntimeError, exc_value=RuntimeError('mine'), exc_traceback=None, object=None
    )
    sys.unraisablehook(other)
  finally:
    logging.getLogger('asyncio').removeHandler(keep)
  assert seen == ["ValueError('the user')"]
  assert unraisable == [other]


@pytest.mark.xdist_group('faults_uninterrupted')  # one worker trains the shared uninterrupted run
def test_an_unreadable_checkpoint_is_an_error_not_damage(tmp_path, data_dir, uninterrupted, patch):
  workdir = killed_copy(uninterrupted, tmp_path, 20, best=False)
  before = {sub: steps(workdir, sub) for sub in ('checkpoints', 'best')}

  def unreadable(self, like, step=None, best=False):
    raise PermissionError(13, 'Permission denied', os.path.join(workdir, 'checkpoints', str(step)))

  patch.setattr(checkpoints.RunCheckpoints, 'restore', unreadable)  # root reads anything: simulated
  with pytest.raises(
    checkpoints.CheckpointError, match=r'cannot read checkpoint .*Permission denied.*nothing was moved'
  ):
    trainer.train_and_evaluate(fault_config(data_dir), workdir)
  assert {sub: steps(workdir, sub) for sub in ('checkpoints', 'best')} == before
  assert not os.path.exists(os.path.join(workdir, 'damaged'))


@pytest.mark.xdist_group('faults_uninterrupted')  # one worker trains the shared uninterrupted run
def test_a_checkpoint_written_before_a_meta_field_existed_resumes_with_its_default(
  tmp_path, data_dir, uninterrupted, patch
):
  """A checkpoint from before `skipped_updates` (and the format marker) existed: a KeyError on resume once."""
  import json

  workdir = killed_copy(uninterrupted, tmp_path, 30, best=False)
  for step_dir in step_dirs(workdir):
    path = os.path.join(step_dir, 'meta', 'metadata')
    with open(path) as f:
      meta = json.load(f)
    meta.pop('skipped_updates'), meta.pop('checkpoint_format', None)
    with open(path, 'w') as f:
      json.dump(meta, f)
  assert_bitwise_equal(resume(patch, data_dir, workdir), uninterrupted.params)
  assert json.load(open(os.path.join(workdir, 'results.json')))['skipped_updates'] == 0


@pytest.mark.xdist_group('faults_uninterrupted')  # one worker trains the shared uninterrupted run
def test_a_checkpoint_of_another_format_is_an_error_and_nothing_is_moved(
  tmp_path, data_dir, uninterrupted, monkeypatch
):
  """A newer format marker, or a state with other parts than this attnmt trains, is refused with one line:
  never quarantined as damage, never the reason to restart from step 0."""
  import json

  workdir = killed_copy(uninterrupted, tmp_path, 20, best=False)
  before = {sub: steps(workdir, sub) for sub in ('checkpoints', 'best')}
  real_init = train_step.init_train_states

  def grown(cfg, optimizer, seeds):  # a later attnmt whose state has one more part
    state = real_init(cfg, optimizer, seeds)
    return state.replace(params={**state.params, 'extra': jnp.zeros((len(seeds), 3))})

  monkeypatch.setattr(train_step, 'init_train_states', grown)
  with pytest.raises(checkpoints.CheckpointError) as e:
    trainer.train_and_evaluate(fault_config(data_dir), workdir)
  assert str(e.value) == (
    f'checkpoint {workdir}/checkpoints/20 is of another format than this attnmt trains (its state lacks '
    'params/extra); nothing was moved; use the attnmt version that wrote it, or another --workdir'
  )
  monkeypatch.undo()
  path = os.path.join(workdir, 'checkpoints', '20', 'meta', 'metadata')
  with open(path) as f:
    meta = json.load(f)
  with open(path, 'w') as f:
    json.dump({**meta, 'checkpoint_format': 99}, f)
  for read in (
    lambda: trainer.train_and_evaluate(fault_config(data_dir), workdir),
    lambda: checkpoints.restore_params(workdir, 'latest'),  # analyze and translate
  ):
    with pytest.raises(checkpoints.CheckpointError, match=r'checkpoints/20 has format 99, this attnmt reads up to 1;'):
      read()
  assert {sub: steps(workdir, sub) for sub in ('checkpoints', 'best')} == before
  assert not os.path.exists(os.path.join(workdir, 'damaged'))
