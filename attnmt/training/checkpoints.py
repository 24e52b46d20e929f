"""Self-describing run directories, written with Orbax.

    <workdir>/config.json        the full config of the run (ml_collections ConfigDict as JSON)
    <workdir>/vocab/{source,target}/   the tokenizers
    <workdir>/checkpoints/<step>/      latest checkpoints, every `checkpoint_every` steps
    <workdir>/best/<step>/             the checkpoint with the best validation BLEU
    <workdir>/metrics.jsonl, <workdir>/tensorboard/   metrics

A checkpoint holds the train state (parameters, optimiser state, step, RNG key; with a leading seed
axis when seeds train vmapped) and, as JSON, the data iterators' positions and the run's history.
Restoring needs nothing but the directory.
"""

from __future__ import annotations

import contextlib
import errno
import gc
import io
import json
import logging
import os
import re
import sys
import time
import weakref
from typing import Any, Optional

import jax
import ml_collections
import orbax.checkpoint as ocp
from etils import epath

from attnmt import schema
from attnmt.errors import CheckpointError
from attnmt.model.config import COMPONENTS, canonical_section
from attnmt.training import guards, settings, train_step

CONFIG_FILE = 'config.json'
FORMAT_VERSION = 1
# The layout of a checkpoint's state and meta, stored in its meta as 'checkpoint_format' (absent: 1). A
# checkpoint of a newer format, or whose state has other parts than this attnmt's, is an error, not damage.
CHECKPOINT_FORMAT = 1


def save_config(workdir: str, config: ml_collections.ConfigDict, model: Optional[dict] = None) -> None:
  """Writes config.json: the run's config and, as `model`, the complete ModelConfig (vocabulary sizes
  included), so the model can be rebuilt from the directory alone."""
  os.makedirs(workdir, exist_ok=True)
  payload = {'attnmt_format': FORMAT_VERSION, 'config': config.to_dict()}
  if model is not None:
    payload['model'] = model
  tmp = os.path.join(workdir, CONFIG_FILE + '.tmp')
  with open(tmp, 'w') as f:
    json.dump(payload, f, indent=1, sort_keys=True)
  os.replace(tmp, os.path.join(workdir, CONFIG_FILE))


def load_config(workdir: str) -> ml_collections.ConfigDict:
  """The run's config. Settings added to attnmt after the run was written read as what that run did (each
  row's `value_before`, declared with the setting: attnmt/schema.py), so such a run still resumes and compares
  equal."""
  config = _load_payload(workdir)['config']
  for section, rows in settings.SECTIONS.items():
    if isinstance(config.get(section), dict):
      config[section] = schema.fill_missing(rows, config[section])
  config = ml_collections.ConfigDict(config)
  return settings.canonical(config) if isinstance(config.get('model'), ml_collections.ConfigDict) else config


def run_differences(workdir: str, config: ml_collections.ConfigDict) -> Optional[tuple[list[str], list[str]]]:
  """Is `config` the run saved in `workdir`? None when the workdir holds no run (no config.json); otherwise
  the settings that differ, as (those that make it another run, those a resumed run may change), each a
  sorted list of 'section.key'. Training (resume or refuse) and the sweep (finished or not) both ask this."""
  if not os.path.exists(os.path.join(workdir, CONFIG_FILE)):
    return None
  old = load_config(workdir).to_dict()
  new = json.loads(json.dumps(settings.canonical(config).to_dict()))  # tuples as lists, as config.json holds them
  return schema.differences(settings.SECTIONS, old, new)


def load_model_fields(workdir: str) -> Optional[dict]:
  """The complete ModelConfig fields config.json stores (None for a run that stopped before writing them),
  under their current names (a renamed setting's former key reads as its new one)."""
  fields = _load_payload(workdir).get('model')
  return None if fields is None else canonical_section(fields)


def _load_payload(workdir: str) -> dict:
  path = os.path.join(workdir, CONFIG_FILE)
  if not os.path.isdir(workdir):
    raise CheckpointError(f'{workdir} does not exist; pass the workdir of a training run')
  if not os.path.exists(path):
    raise CheckpointError(
      f'{workdir} is not an attnmt run directory (no {CONFIG_FILE}); pass the workdir '
      'that experiments/train.py or sweep.py wrote'
    )
  try:
    with open(path) as f:
      payload = json.load(f)
  except (OSError, json.JSONDecodeError) as e:
    raise CheckpointError(f'{path} is unreadable ({e}); the run directory is corrupted') from e
  version = payload.get('attnmt_format') if isinstance(payload, dict) else None
  if version != FORMAT_VERSION:
    raise CheckpointError(
      f'{path} has format version {version}, this attnmt reads version {FORMAT_VERSION}; '
      'use the attnmt version that wrote it'
    )
  return payload


def _to_saveable(state: train_step.TrainState) -> train_step.TrainState:
  """Typed PRNG keys are stored as their raw uint32 data."""
  return state.replace(rng=jax.random.key_data(state.rng))


def _from_saved(state: train_step.TrainState) -> train_step.TrainState:
  return state.replace(rng=jax.random.wrap_key_data(state.rng))


@contextlib.contextmanager
def quiet_io(collect: bool = True):
  """Keeps Orbax's, TensorStore's and asyncio's own messages off the user's stderr while a block reads or
  writes checkpoints: absl log lines below FATAL (Orbax logs a failed background write from every thread
  that saw it) and the tracebacks background threads print. Yields the captured text, which a failure
  summarises in its one line; a block that succeeds leaves nothing to say, so it is dropped.

  Coroutines Orbax leaves behind when a read or write fails report themselves when collected ("Exception
  ignored in: <coroutine ...>"): they are collected inside the block (gc.collect) and recorded instead of
  printed, whenever the block raises, and also when it succeeds unless `collect=False`. A full collection
  takes about 0.4 s in a training process; a save that succeeds leaves no such coroutine, so saves pass
  False (14 saves were 6.5 s of a 43 s tiny run)."""
  absl = logging.getLogger('absl')
  level, captured, hook = absl.level, io.StringIO(), sys.unraisablehook
  absl.setLevel(logging.FATAL)
  sys.unraisablehook = lambda u: captured.write(f'unraisable: {u.exc_type.__name__}: {u.exc_value}\n')
  failed = False
  try:
    with contextlib.redirect_stderr(captured):
      try:
        yield captured
      except BaseException:
        failed = True
        gc.collect()
        raise
      if collect:
        gc.collect()
  finally:
    sys.unraisablehook = hook
    absl.setLevel(level)
    if failed:
      _drop_late_loop_callbacks()


def _is_late_loop_callback(unraisable) -> bool:
  """Whether an unraisable exception is TensorStore finishing a read after Orbax closed its event loop: the
  read's callback, scheduled from TensorStore's thread, raises 'Event loop is closed' in call_soon_threadsafe."""
  if unraisable.exc_type is not RuntimeError or str(unraisable.exc_value) != 'Event loop is closed':
    return False
  frame = unraisable.exc_traceback
  while frame is not None:
    if frame.tb_frame.f_code.co_name == 'call_soon_threadsafe':
      return True
    frame = frame.tb_next
  return False


class _LateOrbaxTasks(logging.Filter):
  """Drops asyncio's 'Task exception was never retrieved' (or Future, or _GatheringFuture) for Orbax's and
  TensorStore's own reads: the tasks of a failed read are collected long after it, each logging the error
  already reported. Theirs: the message names orbax or tensorstore, or the exception was raised in their code."""

  def filter(self, record: logging.LogRecord) -> bool:
    text = record.getMessage()
    if 'exception was never retrieved' not in text:
      return True
    if 'orbax' in text or 'tensorstore' in text:
      return False
    frame = record.exc_info[2] if record.exc_info else None
    while frame is not None:
      path = frame.tb_frame.f_code.co_filename
      if f'{os.sep}orbax{os.sep}' in path or f'{os.sep}tensorstore{os.sep}' in path:
        return False
      frame = frame.tb_next
    return True


def _drop_late_loop_callbacks() -> None:
  """After a checkpoint read or write failed, the reads Orbax started for it may finish or be collected at any
  later time, outside quiet_io: each prints an 'Event loop is closed' traceback or logs an asyncio 'exception
  was never retrieved' (the step was already reported in one line). From then on the process drops exactly
  those; every other unraisable exception goes to the hook that was in place, every other log line through.
  Installed once."""
  asyncio_log = logging.getLogger('asyncio')
  if not any(isinstance(f, _LateOrbaxTasks) for f in asyncio_log.filters):
    asyncio_log.addFilter(_LateOrbaxTasks())
  previous = sys.unraisablehook
  if getattr(previous, 'drops_late_loop_callbacks', False):
    return

  def hook(unraisable):
    if not _is_late_loop_callback(unraisable):
      previous(unraisable)

  hook.drops_late_loop_callbacks = True
  sys.unraisablehook = hook


def failure_cause(error: BaseException) -> str:
  """The cause of a failed checkpoint write in a few words: the operating system's message where the
  error carries one (an OSError, or TensorStore's [os_error_code='28']), else the error's first line."""
  code = getattr(error, 'errno', None)
  if code is None:
    found = re.search(r"os_error_code='(\d+)'", str(error))
    code = int(found.group(1)) if found else None
  if code:
    return os.strerror(code)
  first = (str(error).strip().splitlines() or [type(error).__name__])[0]
  return first if len(first) <= 160 else first[:157] + '...'


def _what_to_free(cause: str) -> str:
  if cause == os.strerror(errno.ENOSPC) or cause == os.strerror(errno.EDQUOT):
    return 'free space on that disk (or give --workdir on another)'
  if cause == os.strerror(errno.EACCES) or cause == os.strerror(errno.EROFS):
    return 'give this user write access to the run directory'
  return 'fix the cause'


def unreadable(directory: str) -> Optional[str]:
  """The first folder or file under `directory` this process may not read (or list), or None. Resume asks
  this before it restores a step, so that a permission problem is an error that moves nothing, never
  damage: Orbax and TensorStore report an unreadable file as many exception types, not PermissionError."""
  failed = []
  for root, _, files in os.walk(directory, onerror=lambda e: failed.append(e.filename or directory)):
    if failed:
      break
    if not os.access(root, os.R_OK | os.X_OK):
      return root
    for name in files:
      path = os.path.join(root, name)
      if not os.access(path, os.R_OK):
        return path
  return failed[0] if failed else None


def _refuse_unreadable(directory: str) -> None:
  path = unreadable(directory)
  if path is not None:
    raise CheckpointError(
      f'cannot read checkpoint {directory} ({path} is not readable by this user); nothing was moved; give this '
      'user read access to the run directory and run again'
    )


_open_runs: weakref.WeakSet = weakref.WeakSet()  # RunCheckpoints whose asynchronous saves may be under way


def finish_saves() -> None:
  """Waits for every checkpoint still being written in the background: a process stopping on a signal
  calls this before it exits, so that no save is cut off."""
  for run in list(_open_runs):
    run.wait()


class RunCheckpoints:
  """The latest checkpoints and the best one of a run directory."""

  def __init__(self, workdir: str, max_to_keep: int = 2):
    _open_runs.add(self)
    self.workdir = os.path.abspath(workdir)
    self.failed = False  # a save failed: closing does not raise the same failure again
    # Several processes: synchronous saves. Two managers saving the same step asynchronously (best, then
    # latest) deadlocked in Orbax's cross-process barriers now and then (seen with 2 CPU processes).
    async_ok = jax.process_count() == 1
    self.latest = ocp.CheckpointManager(
      os.path.join(self.workdir, 'checkpoints'),
      options=ocp.CheckpointManagerOptions(max_to_keep=max_to_keep, create=True, enable_async_checkpointing=async_ok),
    )
    self.best = ocp.CheckpointManager(
      os.path.join(self.workdir, 'best'),
      options=ocp.CheckpointManagerOptions(max_to_keep=1, create=True, enable_async_checkpointing=async_ok),
    )

  def save(self, step: int, state: train_step.TrainState, meta: dict, best: bool = False) -> None:
    """Saves `step`, replacing a step of that number already there (Orbax refuses to write over one), and
    waits until it is written: a save that fails (a full disk, a permission) ends the run at once with one
    CheckpointError line naming the cause and the last complete checkpoint, which is left as it was."""
    manager = self.best if best else self.latest
    meta = {**meta, 'checkpoint_format': CHECKPOINT_FORMAT}
    args = ocp.args.Composite(state=ocp.args.StandardSave(_to_saveable(state)), meta=ocp.args.JsonSave(meta))
    with guards.saving():  # a signal now waits: the save is not cut off
      try:
        with quiet_io(collect=False):
          if step in manager.all_steps():
            manager.wait_until_finished()
            manager.delete(step)
          manager.save(step, args=args, force=True)
          manager.wait_until_finished()
          manager.check_for_errors()
      except Exception as e:  # Orbax and TensorStore raise many types for one failed write
        self.failed = True
        where = os.path.join(self.workdir, 'best' if best else 'checkpoints')
        done = [s for s in self.latest.all_steps() if s != step] if not best else []
        last = f'step {max(done)}' if done else 'the newest complete one'
        cause = failure_cause(e)
        raise CheckpointError(
          f'could not save checkpoint step {step} under {where} ({cause}); training stopped, and the last '
          f'complete checkpoint ({last}) is untouched; {_what_to_free(cause)} and run the same command again '
          'to resume'
        ) from None

  def wait(self) -> None:
    self.latest.wait_until_finished()
    self.best.wait_until_finished()

  def latest_step(self) -> Optional[int]:
    return self.latest.latest_step()

  def restore(
    self, like: train_step.TrainState, step: Optional[int] = None, best: bool = False
  ) -> tuple[train_step.TrainState, dict]:
    """Restores into the structure and shardings of `like` (a freshly initialised state, placed where
    it will train): for resuming, on any number of devices."""
    manager = self.best if best else self.latest
    step = manager.latest_step() if step is None else step
    abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, _to_saveable(like))
    out = manager.restore(
      step, args=ocp.args.Composite(state=ocp.args.StandardRestore(abstract), meta=ocp.args.JsonRestore())
    )
    return _from_saved(out.state), out.meta

  def resume(self, like: train_step.TrainState) -> Optional[tuple[train_step.TrainState, dict, int]]:
    """(state, meta, step) of the newest latest-checkpoint that restores, or None when there is none.

    A damaged step is moved to <workdir>/damaged/ and the next older one tried, with one line printed
    that begins as `analyze`'s message for such files; a file that cannot be read for lack of permission
    is an error (CheckpointError), not damage, and nothing is moved. With no intact latest checkpoint
    (checkpoints/ deleted, or every step damaged) the newest best checkpoint that restores is resumed
    from (a damaged best step is moved aside as well), and only without one does training start from
    step 0. Intact best steps newer than the restored one are deleted: the resumed run recomputes them,
    bitwise the same, and could not save them over the old ones otherwise.
    """
    out, damaged = None, []
    for step in sorted(self.latest.all_steps(), reverse=True):
      check_format(os.path.join(self.workdir, 'checkpoints'), step, like)
      _refuse_unreadable(os.path.join(self.workdir, 'checkpoints', str(step)))
      try:
        with quiet_io():  # a damaged step makes Orbax's threads print tracebacks: the one line below says it
          state, meta = self.restore(like, step)
      except PermissionError as e:
        raise CheckpointError(
          f'cannot read checkpoint {self.workdir}/checkpoints/{step} ({e.strerror}: {e.filename}); nothing was '
          'moved; give this user read access to the run directory and run again'
        ) from None
      except Exception as e:  # orbax raises many types for damaged files
        damaged.append((step, type(e).__name__))
        continue
      out = (state, meta, step)
      break
    damaged_best = []
    if out is None:  # resume from best/ rather than lose it
      for step in sorted(self.best.all_steps(), reverse=True):
        check_format(os.path.join(self.workdir, 'best'), step, like)
        _refuse_unreadable(os.path.join(self.workdir, 'best', str(step)))
        try:
          with quiet_io():
            state, meta = self.restore(like, step, best=True)
        except PermissionError as e:
          raise CheckpointError(
            f'cannot read checkpoint {self.workdir}/best/{step} ({e.strerror}: {e.filename}); nothing was moved; '
            'give this user read access to the run directory and run again'
          ) from None
        except Exception as e:  # orbax raises many types for damaged files; an older one may restore
          damaged_best.append((step, type(e).__name__))
          continue
        out = (state, meta, step)
        print(f'no intact checkpoint in {self.workdir}/checkpoints: resuming from best/{step}', flush=True)
        break
    for sub, step, error in [('checkpoints', *d) for d in damaged] + [('best', *d) for d in damaged_best]:
      aside = os.path.join(self.workdir, 'damaged', f'{sub}-{step}-{time.strftime("%Y%m%d-%H%M%S")}')
      os.makedirs(os.path.dirname(aside), exist_ok=True)
      os.rename(os.path.join(self.workdir, sub, str(step)), aside)
      print(
        f'checkpoint {self.workdir}/{sub}/{step} is corrupted or unreadable ({error}); moved it to '
        f'{aside} and '
        + (
          f'resuming from step {out[2]}, the newest intact one'
          if out
          else 'starting from step 0: no older checkpoint is intact, and best/ holds no intact one'
        ),
        flush=True,
      )
    if damaged:
      self.latest.reload()
    if damaged_best:
      self.best.reload()
    restored = out[2] if out else 0
    newer = [s for s in self.best.all_steps() if s > restored]
    for step in newer:
      self.best.delete(step)
    if newer:
      self.best.reload()
    return out

  def close(self) -> None:
    _open_runs.discard(self)
    with quiet_io():  # after a failed save, closing reports the same failure again from Orbax's threads
      try:
        self.wait()
      except Exception:
        if not self.failed:
          raise
      self.latest.close()
      self.best.close()


def _leaf_shapes(tree) -> dict:
  """{path of names: shape} of every leaf: a saved state's metadata and a live state compare equal when their
  parts do (dict keys, attribute names and sequence indices all become names)."""

  def name(key):
    for attr in ('key', 'name', 'idx'):
      if hasattr(key, attr):
        return str(getattr(key, attr))
    return str(key)

  leaves = jax.tree_util.tree_flatten_with_path(tree)[0]
  return {tuple(name(k) for k in path): tuple(getattr(leaf, 'shape', ())) for path, leaf in leaves}


def check_format(directory: str, step: int, like: Optional[train_step.TrainState] = None) -> None:
  """Raises CheckpointError (nothing moved) for a checkpoint that reads cleanly but is of another format: a
  newer `checkpoint_format` in its meta, or a state whose parts or shapes differ from `like`'s. A
  checkpoint whose meta or state metadata cannot be read is not judged here: restoring it decides whether
  it is damaged."""
  path = os.path.join(directory, str(step))
  try:
    with open(os.path.join(path, 'meta', 'metadata')) as f:
      version = json.load(f).get('checkpoint_format', 1)
  except (OSError, ValueError, AttributeError):
    return
  if not isinstance(version, int) or version > CHECKPOINT_FORMAT:
    raise CheckpointError(
      f'checkpoint {path} has format {version!r}, this attnmt reads up to {CHECKPOINT_FORMAT}; nothing was moved; '
      'use the attnmt version that wrote it'
    )
  if like is None:
    return
  try:
    with quiet_io(collect=False):  # damaged metadata: Orbax's reads fail in its threads, with tracebacks
      saved = _leaf_shapes(ocp.StandardCheckpointHandler().metadata(epath.Path(path) / 'state'))
  except Exception:  # unreadable metadata: damage, if the restore fails too
    return
  wanted = _leaf_shapes(_to_saveable(like))
  if saved != wanted:
    extra, missing = sorted(set(saved) - set(wanted)), sorted(set(wanted) - set(saved))
    shaped = sorted(k for k in set(saved) & set(wanted) if saved[k] != wanted[k])
    first = (
      'has ' + '/'.join(extra[0])
      if extra
      else 'lacks ' + '/'.join(missing[0])
      if missing
      else f'holds {"/".join(shaped[0])} as {saved[shaped[0]]}, not {wanted[shaped[0]]}'
    )
    users = _user_components_of_run(os.path.dirname(os.path.abspath(directory)))
    if users:  # the run selects a user's own class: its code, not attnmt, is the likely change
      key = _first_difference(saved, wanted, prefer='params')
      raise CheckpointError(
        f'checkpoint {path} does not match {_blame(users, key)} ({_difference_phrase(saved, wanted, key)}): that '
        'code changed since the run was trained; nothing was moved; restore that code as it was, or train a new '
        'run in another --workdir'
      )
    raise CheckpointError(
      f'checkpoint {path} is of another format than this attnmt trains (its state {first}); nothing was moved; '
      'use the attnmt version that wrote it, or another --workdir'
    )


def user_components(fields) -> list[tuple[str, str]]:
  """(setting, selection) of every user's own class (one not registered with attnmt: selected by import path) a
  model config (a mapping or an object with the fields) selects, in model.config.COMPONENTS order."""
  get = fields.get if hasattr(fields, 'get') else lambda k, d=None: getattr(fields, k, d)
  return [(k, str(get(k))) for k, registry in COMPONENTS.items() if get(k) and not registry.is_builtin(str(get(k)))]


def _user_components_of_run(workdir: str) -> list[tuple[str, str]]:
  """user_components of the run saved in `workdir`; none when its config cannot be read."""
  try:
    fields = load_model_fields(workdir)
    return user_components(fields if fields is not None else load_config(workdir).model.to_dict())
  except Exception:  # no readable config.json: nothing to blame on user code
    return []


def _blame(users: list[tuple[str, str]], key: tuple) -> str:
  """The user's classes likely behind a difference at `key`: those of the attention for a parameter of the
  attention, the decoder form's otherwise (all of them when that leaves none)."""
  in_attention = 'attention' in key
  named = [u for u in users if (u[0] != 'query_timing') == in_attention] or users
  return 'user code ' + ' or '.join(f"model.{k} '{v}'" for k, v in named)


def _first_difference(saved: dict, wanted: dict, prefer: str = '') -> tuple:
  """The first path whose presence or shape differs between two _leaf_shapes, one under `prefer` if any."""
  keys = sorted(k for k in set(saved) | set(wanted) if saved.get(k) != wanted.get(k))
  return next((k for k in keys if k[:1] == (prefer,)), keys[0])


def _difference_phrase(saved: dict, wanted: dict, key: tuple) -> str:
  """`key`'s difference in words: the saved run against what the code declares now."""
  name = '/'.join(key)
  if key not in wanted:
    return f'the run has {name}, which the code no longer declares'
  if key not in saved:
    return f'the code declares {name}, which the run lacks'
  return f'the run holds {name} as {saved[key]}, the code declares {wanted[key]}'


def check_user_params(workdir: str, fields, params, wanted) -> None:
  """Raises CheckpointError when parameters restored from `workdir` (stacked over seeds) do not fit those a
  model whose config `fields` selects a user's own class declares now (`wanted`, shapes suffice): the user's
  code changed since the run was trained, which would otherwise fail deep inside Flax when they are applied."""
  users = user_components(fields)
  if not users:
    return
  want = _leaf_shapes(wanted)
  saved = {k: v[1:] for k, v in _leaf_shapes(params).items()}  # less the seed axis
  if saved != want:
    key = _first_difference(saved, want)
    raise CheckpointError(
      f'{_blame(users, key)} no longer matches the parameters run {workdir} was trained with '
      f'({_difference_phrase(saved, want, key)}); restore that code as it was when the run was trained, or train '
      'a new run with it'
    )


def _abstract_state(directory: str, step: int, sharding: jax.sharding.Sharding):
  """The saved state's shapes and dtypes, to be restored onto `sharding` rather than onto the devices it
  was saved from: a checkpoint written on 4 devices restores on 1, 2 or 8."""
  tree = ocp.StandardCheckpointHandler().metadata(epath.Path(directory) / str(step) / 'state')
  return jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=sharding), tree)


def restore_params(
  workdir: str, which: str = 'best', mesh: Optional[jax.sharding.Mesh] = None
) -> tuple[Any, dict, int]:
  """Parameters (stacked over seeds), checkpoint metadata and step, from `best` or `latest`.

  Falls back to the latest checkpoint when the run never evaluated (no best yet). The parameters land
  replicated over `mesh`, or on this process's first device; the device count that saved them does
  not matter.
  """
  load_config(workdir)  # refuses directories that are not runs, with a clear message
  workdir = os.path.abspath(workdir)  # Orbax requires absolute paths
  for kind in (which, 'latest') if which == 'best' else (which,):
    directory = os.path.join(workdir, 'best' if kind == 'best' else 'checkpoints')
    if not os.path.isdir(directory):
      continue
    manager = ocp.CheckpointManager(directory)
    try:  # closed on every path: a manager left open dumps asyncio tracebacks at interpreter exit
      step = manager.latest_step()
      if step is None:
        continue
      check_format(directory, step)
      sharding = (
        jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
        if mesh is not None
        else jax.sharding.SingleDeviceSharding(jax.local_devices()[0])
      )
      with quiet_io():  # a damaged step: Orbax's threads print tracebacks; the one line below says it
        out = manager.restore(
          step,
          args=ocp.args.Composite(
            state=ocp.args.StandardRestore(_abstract_state(directory, step, sharding)), meta=ocp.args.JsonRestore()
          ),
        )
    except CheckpointError:
      raise
    except Exception as e:  # orbax raises many types for damaged files
      raise CheckpointError(
        f'checkpoint {directory}/{step} is corrupted or unreadable ({type(e).__name__}); '
        'delete that step directory to fall back to an earlier one'
      ) from e
    finally:
      with quiet_io():
        manager.close()
    return out.state['params'], out.meta, step
  raise CheckpointError(
    f'{workdir} holds no checkpoint yet; train longer than train.checkpoint_every steps or pass another run directory'
  )
