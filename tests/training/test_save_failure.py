"""A full disk during training (issue: a failed save stops the run): the train entry point stops at the failed
save with one line naming the cause and the last complete checkpoint, which is left as it was; no Orbax,
TensorStore or asyncio traceback reaches stderr; after space is freed the same command resumes and ends
bitwise where an uninterrupted run ends. The disk is a tmpfs where this process may mount one (root), filled
just before the step-20 save to half a checkpoint's room (so that save, and no other, fails whatever the
timing of the saves before it); else the save raises OSError(ENOSPC) at the Orbax boundary."""

import os
import shutil
import subprocess
import sys

import jax
import pytest
import numpy as np

from attnmt.training import checkpoints

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FAILURE = (
  'error: could not save checkpoint step 20 under {where} (No space left on device); training stopped, and the '
  'last complete checkpoint (step 10) is untouched; free space on that disk (or give --workdir on another) and '
  'run the same command again to resume'
)


def train(workdir, data_dir, env_extra=None):
  args = [
    sys.executable,
    '-m',
    'experiments.train',
    '--config=experiments/configs/tiny.py',
    f'--workdir={workdir}',
    f'--config.data.data_dir={data_dir}',
    '--config.train.num_steps=40',
    '--config.train.checkpoint_every=10',
  ]
  env = dict(os.environ, JAX_PLATFORMS='cpu', **(env_extra or {}))
  return subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)


@pytest.fixture(scope='session')  # with xdist_group: built once, though xdist interleaves modules
def whole(tmp_path_factory):
  """An uninterrupted run of `train` (its workdir) and its data directory."""
  root = tmp_path_factory.mktemp('save_failure')
  res = train(root / 'whole', root / 'data')
  assert res.returncode == 0, res.stderr[-3000:]
  return root / 'whole', root / 'data'


def small_disk(path) -> bool:
  os.makedirs(path, exist_ok=True)
  if os.geteuid() != 0:
    return False
  return (
    subprocess.run(['mount', '-t', 'tmpfs', '-o', 'size=64m', 'tmpfs', str(path)], capture_output=True).returncode == 0
  )


# The injected failure: sitecustomize in a folder on PYTHONPATH makes the step-20 save raise ENOSPC.
INJECT = """
import errno, orbax.checkpoint as ocp
_save = ocp.CheckpointManager.save
def save(self, step, *a, **k):
  if step == 20 and 'checkpoints' in str(self.directory):
    raise OSError(errno.ENOSPC, 'No space left on device')
  return _save(self, step, *a, **k)
ocp.CheckpointManager.save = save
"""


# On the small disk: sitecustomize fills it, just before the step-20 save of the latest state, to half the size
# of the step-10 checkpoint (after the saves in flight have finished): that save fails on the disk itself.
FILL = """
import os, orbax.checkpoint as ocp
_save = ocp.CheckpointManager.save
def save(self, step, *a, **k):
  if step == 20 and 'checkpoints' in str(self.directory):
    self.wait_until_finished()
    folder = str(self.directory)
    size = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(os.path.join(folder, '10')) for f in fs)
    free = os.statvfs(folder).f_bavail * os.statvfs(folder).f_frsize
    with open(os.path.join(os.path.dirname(folder), 'filler'), 'wb') as f:
      f.write(bytes(max(0, free - size // 2)))
  return _save(self, step, *a, **k)
ocp.CheckpointManager.save = save
"""


@pytest.mark.xdist_group('save_failure_whole')  # one worker trains the shared uninterrupted run
@pytest.mark.slow
def test_a_full_disk_stops_the_run_at_the_failed_save_and_it_resumes_bitwise(tmp_path, whole):
  disk, (whole_run, data_dir) = tmp_path / 'disk', whole
  mounted = small_disk(disk)
  (tmp_path / 'inject').mkdir()
  (tmp_path / 'inject' / 'sitecustomize.py').write_text(FILL if mounted else INJECT)
  extra = {'PYTHONPATH': f'{tmp_path / "inject"}:{os.environ.get("PYTHONPATH", "")}'}
  try:
    res = train(disk / 'run', data_dir, extra)
    assert res.returncode == 2, res.stderr[-3000:]
    assert 'Traceback' not in res.stderr and 'Exception ignored' not in res.stderr, res.stderr[-3000:]
    assert res.stderr.strip().splitlines()[-1] == FAILURE.format(where=disk / 'run' / 'checkpoints')
    assert checkpoints.RunCheckpoints(str(disk / 'run')).latest.all_steps() == [10]
    freed = tmp_path / 'freed'
    shutil.copytree(disk / 'run', freed)  # space freed: the run directory on a disk with room
    if mounted:
      (freed / 'filler').unlink()
  finally:
    if mounted:
      subprocess.run(['umount', str(disk)], check=True)
  resumed = train(freed, data_dir)
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  assert 'Resumed' in resumed.stdout and 'at step 10' in resumed.stdout
  a = checkpoints.restore_params(str(freed), 'latest')[0]
  b = checkpoints.restore_params(str(whole_run), 'latest')[0]
  for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
    np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


@pytest.mark.xdist_group('save_failure_whole')  # one worker trains the shared uninterrupted run
def test_an_unreadable_checkpoint_is_refused_with_one_line_and_nothing_moves(tmp_path, whole, monkeypatch):
  """Resume tells inability to read from damage: a step with a file this user may not read is an error naming
  the file, and nothing goes to damaged/. Root reads everything, so as root the check sees the file's mode as
  another user would (os.access by the permission bits)."""
  run = tmp_path / 'run'
  shutil.copytree(whole[0], run)  # a finished run of `train`
  steps = checkpoints.RunCheckpoints(str(run)).latest.all_steps()
  newest = run / 'checkpoints' / str(max(steps))
  victim = next(p for p in sorted(newest.rglob('*')) if p.is_file())
  victim.chmod(0)
  if os.geteuid() == 0:
    real = os.access
    monkeypatch.setattr(
      checkpoints.os, 'access', lambda p, mode: real(p, mode) and (os.stat(p).st_mode & 0o444 or not mode & os.R_OK)
    )
  ckpt = checkpoints.RunCheckpoints(str(run))
  try:
    with pytest.raises(checkpoints.CheckpointError) as e:
      ckpt.resume(None)
  finally:
    ckpt.close()
  assert str(e.value) == (
    f'cannot read checkpoint {newest} ({victim} is not readable by this user); nothing was moved; give this user '
    'read access to the run directory and run again'
  )
  assert not (run / 'damaged').exists() and sorted(p.name for p in (run / 'checkpoints').iterdir()) == sorted(
    map(str, steps)
  )
