"""How a checkpoint read or write fails: in one line. Orbax's, TensorStore's and asyncio's own output is kept off
stderr (quiet_io), and a failure's cause and remedy are put in words (failure_cause, what_to_free, cannot_read)."""

import contextlib
import errno
import gc
import io
import logging
import os
import re
import sys

from attnmt.errors import CheckpointError


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


def what_to_free(cause: str) -> str:
  """The remedy for a failed write of this `failure_cause`."""
  if cause == os.strerror(errno.ENOSPC) or cause == os.strerror(errno.EDQUOT):
    return 'free space on that disk (or give --workdir on another)'
  if cause == os.strerror(errno.EACCES) or cause == os.strerror(errno.EROFS):
    return 'give this user write access to the run directory'
  return 'fix the cause'


def cannot_read(directory: str, why: str) -> CheckpointError:
  """The error for a checkpoint this user may not read: never damage, so nothing is moved."""
  return CheckpointError(
    f'cannot read checkpoint {directory} ({why}); nothing was moved; give this user read access to the run '
    'directory and run again'
  )


def refuse_unreadable(directory: str) -> None:
  """Raises `cannot_read` for the first folder or file under `directory` this process may not read (or list).
  Resume asks this before it restores a step, so that a permission problem is an error that moves nothing, never
  damage: Orbax and TensorStore report an unreadable file as many exception types, not PermissionError."""
  failed = []
  for root, _, files in os.walk(directory, onerror=lambda e: failed.append(e.filename or directory)):
    if failed:
      break
    unreadable = [] if os.access(root, os.R_OK | os.X_OK) else [root]
    unreadable += [p for p in (os.path.join(root, name) for name in files) if not os.access(p, os.R_OK)]
    failed += unreadable[:1]
  if failed:
    raise cannot_read(directory, f'{failed[0]} is not readable by this user')
