"""Is a checkpoint one this attnmt (and the user's code) reads? The stored form of a train state, the checkpoint
format it is marked with, and the one line that names what differs when its parts or shapes are not the code's."""

import json
import os
from typing import Optional

import jax
import orbax.checkpoint as ocp
from etils import epath

from attnmt.errors import CheckpointError
from attnmt.training import checkpoint_io, train_step

# The layout of a checkpoint's state and meta, stored in its meta as 'checkpoint_format' (absent: 1). A
# checkpoint of a newer format, or whose state has other parts than this attnmt's, is an error, not damage.
CHECKPOINT_FORMAT = 1


def to_saveable(state: train_step.TrainState) -> train_step.TrainState:
  """Typed PRNG keys are stored as their raw uint32 data."""
  return state.replace(rng=jax.random.key_data(state.rng))


def from_saved(state: train_step.TrainState) -> train_step.TrainState:
  return state.replace(rng=jax.random.wrap_key_data(state.rng))


def leaf_shapes(tree) -> dict:
  """{path of names: shape} of every leaf: a saved state's metadata and a live state compare equal when their
  parts do (dict keys, attribute names and sequence indices all become names)."""

  def name(key):
    for attr in ('key', 'name', 'idx'):
      if hasattr(key, attr):
        return str(getattr(key, attr))
    return str(key)

  leaves = jax.tree_util.tree_flatten_with_path(tree)[0]
  return {tuple(name(k) for k in path): tuple(getattr(leaf, 'shape', ())) for path, leaf in leaves}


def check_format(directory: str, step: int, like: Optional[train_step.TrainState] = None, users_of_run=list) -> None:
  """Raises CheckpointError (nothing moved) for a checkpoint that reads cleanly but is of another format: a
  newer `checkpoint_format` in its meta, or a state whose parts or shapes differ from `like`'s (blamed on the
  user's own classes where `users_of_run()`, asked only then, names any). A checkpoint whose meta or state metadata
  cannot be read is not judged here: restoring it decides whether it is damaged."""
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
    with checkpoint_io.quiet_io(collect=False):  # damaged metadata: Orbax's reads fail in its threads, with tracebacks
      saved = leaf_shapes(ocp.StandardCheckpointHandler().metadata(epath.Path(path) / 'state'))
  except Exception:  # unreadable metadata: damage, if the restore fails too
    return
  wanted = leaf_shapes(to_saveable(like))
  if saved == wanted:
    return
  if users := users_of_run():  # the run selects a user's own class: its code, not attnmt, is the likely change
    key = first_difference(saved, wanted, prefer='params')
    raise CheckpointError(
      f'checkpoint {path} does not match {blame(users, key)} ({difference_phrase(saved, wanted, key)}): that '
      'code changed since the run was trained; nothing was moved; restore that code as it was, or train a new '
      'run in another --workdir'
    )
  extra, missing = sorted(set(saved) - set(wanted)), sorted(set(wanted) - set(saved))
  shaped = sorted(k for k in set(saved) & set(wanted) if saved[k] != wanted[k])
  first = (
    'has ' + '/'.join(extra[0])
    if extra
    else 'lacks ' + '/'.join(missing[0])
    if missing
    else f'holds {"/".join(shaped[0])} as {saved[shaped[0]]}, not {wanted[shaped[0]]}'
  )
  raise CheckpointError(
    f'checkpoint {path} is of another format than this attnmt trains (its state {first}); nothing was moved; '
    'use the attnmt version that wrote it, or another --workdir'
  )


def blame(users: list[tuple[str, str]], key: tuple) -> str:
  """The user's classes likely behind a difference at `key`: those of the attention for a parameter of the
  attention, the decoder form's otherwise (all of them when that leaves none)."""
  in_attention = 'attention' in key
  named = [u for u in users if (u[0] != 'query_timing') == in_attention] or users
  return 'user code ' + ' or '.join(f"model.{k} '{v}'" for k, v in named)


def first_difference(saved: dict, wanted: dict, prefer: str = '') -> tuple:
  """The first path whose presence or shape differs between two leaf_shapes, one under `prefer` if any."""
  keys = sorted(k for k in set(saved) | set(wanted) if saved.get(k) != wanted.get(k))
  return next((k for k in keys if k[:1] == (prefer,)), keys[0])


def difference_phrase(saved: dict, wanted: dict, key: tuple) -> str:
  """`key`'s difference in words: the saved run against what the code declares now."""
  name = '/'.join(key)
  if key not in wanted:
    return f'the run has {name}, which the code no longer declares'
  if key not in saved:
    return f'the code declares {name}, which the run lacks'
  return f'the run holds {name} as {saved[key]}, the code declares {wanted[key]}'
