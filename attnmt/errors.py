"""The errors attnmt raises for what a user can fix, each with a one-line message: a setting that cannot work,
a run directory that cannot be read, input the API cannot use; and `out_problem`, why a file named on a command
line cannot be written, asked before the work whose result it would hold."""

import os
import tempfile


class ConfigError(ValueError):
  """A configuration value that cannot work; the message says which and how to fix it."""


class UnknownChoice(ConfigError):
  """A setting that names something that does not exist or cannot be loaded (an unknown score, window,
  normaliser or decoder form, an import path that fails, an option the component does not declare or a value it
  cannot take): a mistake in the config itself, never a
  combination a sweep may skip."""


class CheckpointError(RuntimeError):
  """A run directory that cannot be read; the message says what is wrong and what to do."""


class InputError(ValueError):
  """Input the API cannot use (an empty list, a seed the run lacks, a sentence longer than the model takes);
  the message says which and what to pass instead."""


def out_problem(path: str, example: str, label: str = '--out=') -> str | None:
  """Why no file can be written at `path`, the value of --out (or of what `label` names), as one line naming the fix (None: it can be).
  Checked before any work, so that a run never ends in a traceback after its timing: a folder, a file where a folder
  above it should be, or a folder that cannot be written (the folders missing above `path` are made when it is
  written). The nearest existing folder is probed with a file made and removed at once, as `os.access` says yes to
  root on a read-only file system; an existing file is opened for appending, which changes nothing in it. Shared by
  the --out of benchmarks.kernels, benchmarks.peer, tools.ab_step, tools.batch_shapes and tools.equal_outputs' save; `example`: a file name
  to suggest, such as 'kernels.json'."""
  if not path:
    return f'{label} names no file; pass a file path such as /tmp/{example}'
  if os.path.isdir(path):
    return f'{label}{path} is a folder; pass a file path such as {os.path.join(path, example)}'
  folder = os.path.dirname(os.path.abspath(path))
  while not os.path.exists(folder):
    folder = os.path.dirname(folder)
  if not os.path.isdir(folder):
    return f'{label}{path}: {folder} is a file, not a folder; pass a path whose folders are folders'
  try:
    if os.path.exists(path):
      open(path, 'a').close()
    else:
      descriptor, probe = tempfile.mkstemp(dir=folder, prefix='.attnmt-out-')
      os.close(descriptor)
      os.remove(probe)
  except OSError as e:
    where = path if os.path.exists(path) else folder
    return f'{label}{path}: cannot write {where} ({e.strerror}); pass a path you can write to'
  return None
