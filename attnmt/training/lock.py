"""One run per workdir: a lock file naming the process that holds it.

    with lock.hold(workdir, 'train'):     # or 'sweep'
      ...

The lock is `<workdir>/.lock-<kind>`, created exclusively (O_EXCL) and holding JSON {pid, host, kind}.
A second process asking for it is refused with LockHeld, one line naming the holder's PID and host. A
lock left by a process that died (SIGKILL, power loss) on this host is taken over, and the takeover is
printed. A lock from another host cannot be checked from here: it is refused, and the message says to
delete the file if that process is gone. Readers (analysis, translation) take no lock.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket

KINDS = ('train', 'sweep')


class LockHeld(RuntimeError):
  """Another live process holds the workdir; the message names it and the fix."""


class WorkdirUnusable(ValueError):
  """The workdir is a file, or cannot be created or written."""


def lock_path(workdir: str, kind: str) -> str:
  return os.path.join(workdir, f'.lock-{kind}')


def _alive(pid: int) -> bool:
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except PermissionError:  # it exists, owned by someone else
    return True
  return True


def _read(path: str) -> dict:
  try:
    with open(path) as f:
      holder = json.load(f)
    return holder if isinstance(holder, dict) else {}
  except (OSError, ValueError):
    return {}  # half-written by a process killed while creating it, or garbled: no live holder named


def acquire(workdir: str, kind: str = 'train') -> str:
  """Creates the lock file of `kind` in `workdir` (made if missing); returns its path. Raises LockHeld
  when a live process holds it; takes over (and says so) a lock whose process is gone."""
  if kind not in KINDS:
    raise ValueError(f'unknown lock kind {kind!r}; valid: {", ".join(KINDS)}')
  if os.path.exists(workdir) and not os.path.isdir(workdir):
    raise WorkdirUnusable(f'workdir {workdir} is a file, not a directory; pass a directory (it is created if missing)')
  path, host = lock_path(workdir, kind), socket.gethostname()
  payload = json.dumps({'pid': os.getpid(), 'host': host, 'kind': kind}).encode()
  for _ in range(3):
    try:
      os.makedirs(workdir, exist_ok=True)
      fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
      holder = _read(path)
      pid, their_host = holder.get('pid'), holder.get('host')
      if isinstance(pid, int) and their_host == host and pid != os.getpid() and _alive(pid):
        raise LockHeld(
          f'{workdir} is in use: a {kind} run holds it (PID {pid} on host {host}); wait for it '
          f'to end or stop it, or use another --workdir'
        ) from None
      if isinstance(pid, int) and their_host and their_host != host:
        raise LockHeld(
          f'{workdir} is in use: a {kind} run holds it (PID {pid} on host {their_host}); if that '
          f'process is gone, delete {path}'
        ) from None
      try:
        os.remove(path)
      except FileNotFoundError:
        pass
      who = f'PID {pid} on host {their_host}' if isinstance(pid, int) else 'an unreadable lock file'
      print(f'Took over the stale {kind} lock of {workdir} ({who}; that process is gone)', flush=True)
      continue
    except OSError as e:
      raise WorkdirUnusable(
        f'cannot write to workdir {workdir} ({e.strerror}); pass a directory you can write to'
      ) from None
    with os.fdopen(fd, 'wb') as f:
      f.write(payload)
    return path
  raise LockHeld(f'could not take the {kind} lock {path}: another process keeps creating it')


def release(path: str) -> None:
  """Removes the lock file if it is still this process's."""
  if _read(path).get('pid') == os.getpid():
    with contextlib.suppress(FileNotFoundError):
      os.remove(path)


@contextlib.contextmanager
def hold(workdir: str, kind: str = 'train', enabled: bool = True):
  """Holds the `kind` lock of `workdir` for the `with` block (a no-op when not `enabled`, e.g. on
  processes other than the first of a multi-host run). A workdir this call created is removed again
  if it is empty at the end."""
  if not enabled:
    yield None
    return
  created = not os.path.exists(workdir)
  path = acquire(workdir, kind)
  try:
    yield path
  finally:
    release(path)
    if created:  # a run that wrote nothing leaves no empty directory behind
      with contextlib.suppress(OSError):
        os.rmdir(workdir)
