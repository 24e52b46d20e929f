"""Self-describing run directories, written with Orbax.

    <workdir>/config.json        the full config of the run (ml_collections ConfigDict as JSON)
    <workdir>/vocab/{source,target}/   the tokenizers
    <workdir>/checkpoints/<step>/      latest checkpoints, every `checkpoint_every` steps
    <workdir>/best/<step>/             the checkpoint with the best validation BLEU
    <workdir>/metrics.jsonl, <workdir>/tensorboard/   metrics

A checkpoint holds the train state (parameters, optimiser state, step, RNG key; with a leading seed
axis when seeds train vmapped) and, as JSON, the data iterators' positions and the run's history.
Restoring needs nothing but the directory (checkpoint_format.py: what it reads; checkpoint_io.py: failures in one line).
"""

from __future__ import annotations

import functools
import json
import os
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
from attnmt.training import checkpoint_format, checkpoint_io, guards, settings, train_step

CONFIG_FILE = 'config.json'
FORMAT_VERSION = 1


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

    def manager(sub: str, keep: int) -> ocp.CheckpointManager:
      options = ocp.CheckpointManagerOptions(max_to_keep=keep, create=True, enable_async_checkpointing=async_ok)
      return ocp.CheckpointManager(os.path.join(self.workdir, sub), options=options)

    self.latest, self.best = manager('checkpoints', max_to_keep), manager('best', 1)

  def save(self, step: int, state: train_step.TrainState, meta: dict, best: bool = False) -> None:
    """Saves `step`, replacing a step of that number already there (Orbax refuses to write over one), and
    waits until it is written: a save that fails (a full disk, a permission) ends the run at once with one
    CheckpointError line naming the cause and the last complete checkpoint, which is left as it was."""
    manager = self.best if best else self.latest
    meta = {**meta, 'checkpoint_format': checkpoint_format.CHECKPOINT_FORMAT}
    saveable = checkpoint_format.to_saveable(state)
    args = ocp.args.Composite(state=ocp.args.StandardSave(saveable), meta=ocp.args.JsonSave(meta))
    with guards.saving():  # a signal now waits: the save is not cut off
      try:
        with checkpoint_io.quiet_io(collect=False):
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
        cause = checkpoint_io.failure_cause(e)
        raise CheckpointError(
          f'could not save checkpoint step {step} under {where} ({cause}); training stopped, and the last '
          f'complete checkpoint ({last}) is untouched; {checkpoint_io.what_to_free(cause)} and run the same '
          'command again to resume'
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
    out = _restore(manager, step, jax.tree.map(ocp.utils.to_shape_dtype_struct, checkpoint_format.to_saveable(like)))
    return checkpoint_format.from_saved(out.state), out.meta

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
    out, damaged = self._newest_intact(like, best=False)
    damaged_best = []
    if out is None:  # resume from best/ rather than lose it
      out, damaged_best = self._newest_intact(like, best=True)
      if out is not None:
        print(f'no intact checkpoint in {self.workdir}/checkpoints: resuming from best/{out[2]}', flush=True)
    then = (
      f'resuming from step {out[2]}, the newest intact one'
      if out
      else 'starting from step 0: no older checkpoint is intact, and best/ holds no intact one'
    )
    for sub, step, error in damaged + damaged_best:
      aside = os.path.join(self.workdir, 'damaged', f'{sub}-{step}-{time.strftime("%Y%m%d-%H%M%S")}')
      os.makedirs(os.path.dirname(aside), exist_ok=True)
      os.rename(os.path.join(self.workdir, sub, str(step)), aside)
      where = f'{self.workdir}/{sub}/{step}'
      print(f'checkpoint {where} is corrupted or unreadable ({error}); moved it to {aside} and {then}', flush=True)
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

  def _newest_intact(self, like: train_step.TrainState, best: bool) -> tuple[Optional[tuple], list]:
    """(state, meta, step) of the newest step of best/ or checkpoints/ that restores (None when none does), and
    (folder, step, error) of every damaged step newer than it. A step of another format or one this user may not
    read raises CheckpointError."""
    sub = 'best' if best else 'checkpoints'
    users = functools.partial(_user_components_of_run, self.workdir)
    damaged = []
    for step in sorted((self.best if best else self.latest).all_steps(), reverse=True):
      directory = os.path.join(self.workdir, sub, str(step))
      checkpoint_format.check_format(os.path.join(self.workdir, sub), step, like, users)
      checkpoint_io.refuse_unreadable(directory)
      try:
        with checkpoint_io.quiet_io():  # a damaged step makes Orbax's threads print tracebacks: one line says it
          state, meta = self.restore(like, step, best=best)
      except PermissionError as e:
        raise checkpoint_io.cannot_read(directory, f'{e.strerror}: {e.filename}') from None
      except Exception as e:  # orbax raises many types for damaged files; an older one may restore
        damaged.append((sub, step, type(e).__name__))
        continue
      return (state, meta, step), damaged
    return None, damaged

  def close(self) -> None:
    _open_runs.discard(self)
    with checkpoint_io.quiet_io():  # after a failed save, closing reports the same failure again from Orbax's threads
      try:
        self.wait()
      except Exception:
        if not self.failed:
          raise
      self.latest.close()
      self.best.close()


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


def check_user_params(workdir: str, fields, params, wanted) -> None:
  """Raises CheckpointError when parameters restored from `workdir` (stacked over seeds) do not fit those a
  model whose config `fields` selects a user's own class declares now (`wanted`, shapes suffice): the user's
  code changed since the run was trained, which would otherwise fail deep inside Flax when they are applied."""
  users = user_components(fields)
  if not users:
    return
  want = checkpoint_format.leaf_shapes(wanted)
  saved = {k: v[1:] for k, v in checkpoint_format.leaf_shapes(params).items()}  # less the seed axis
  if saved != want:
    key = checkpoint_format.first_difference(saved, want)
    what = checkpoint_format.difference_phrase(saved, want, key)
    raise CheckpointError(
      f'{checkpoint_format.blame(users, key)} no longer matches the parameters run {workdir} was trained with '
      f'({what}); restore that code as it was when the run was trained, or train a new run with it'
    )


def _abstract_state(directory: str, step: int, sharding: jax.sharding.Sharding):
  """The saved state's shapes and dtypes, to be restored onto `sharding` rather than onto the devices it
  was saved from: a checkpoint written on 4 devices restores on 1, 2 or 8."""
  tree = ocp.StandardCheckpointHandler().metadata(epath.Path(directory) / str(step) / 'state')
  return jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=sharding), tree)


def _restore(manager: ocp.CheckpointManager, step: int, abstract):
  """Step `step`'s state, restored into `abstract` (shapes, dtypes and shardings), and its meta."""
  return manager.restore(
    step, args=ocp.args.Composite(state=ocp.args.StandardRestore(abstract), meta=ocp.args.JsonRestore())
  )


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
      checkpoint_format.check_format(directory, step)
      sharding = (
        jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
        if mesh is not None
        else jax.sharding.SingleDeviceSharding(jax.local_devices()[0])
      )
      with checkpoint_io.quiet_io():  # a damaged step: Orbax's threads print tracebacks; the one line below says it
        out = _restore(manager, step, _abstract_state(directory, step, sharding))
    except CheckpointError:
      raise
    except Exception as e:  # orbax raises many types for damaged files
      raise CheckpointError(
        f'checkpoint {directory}/{step} is corrupted or unreadable ({type(e).__name__}); '
        'delete that step directory to fall back to an earlier one'
      ) from e
    finally:
      with checkpoint_io.quiet_io():
        manager.close()
    return out.state['params'], out.meta, step
  raise CheckpointError(
    f'{workdir} holds no checkpoint yet; train longer than train.checkpoint_every steps or pass another run directory'
  )
