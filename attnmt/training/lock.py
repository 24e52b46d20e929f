"""One run per workdir: a lock file held by the live process that runs there.

    with lock.hold(workdir, 'train'):     # or 'sweep'
      ...

The lock is an exclusive `flock` on `<workdir>/.lock-<kind>`, held for as long as the process runs: the kernel
releases it when the process ends in any way (SIGKILL and power loss included), and it is seen by every process
that opens the file, in any PID namespace (containers sharing a disk) and, on a filesystem that supports it
(NFS, Lustre), on any host. The file holds JSON {pid, host, kind} for the messages only: a second process
is refused with LockHeld, one line naming the holder's PID and host. A file whose lock no one holds is left
by a process that is gone: on this host it is taken over, and the takeover printed. One written on another
host is refused, the message saying to delete the file if that process is gone (a filesystem without
shared locks cannot tell). Readers (analysis, translation) take no lock.
"""

from __future__ import annotations

import contextlib
import fcntl
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


_held: dict[str, int] = {}  # path -> the open descriptor whose flock this process holds


def _read(fd: int) -> dict:
  try:
    holder = json.loads(os.pread(fd, 4096, 0) or b'{}')
    return holder if isinstance(holder, dict) else {}
  except (OSError, ValueError):
    return {}  # half-written by a process killed while writing it, or garbled: no holder named


def _who(holder: dict) -> str:
  pid, host = holder.get('pid'), holder.get('host')
  return f'PID {pid} on host {host}' if isinstance(pid, int) else 'a process that is starting'


def acquire(workdir: str, kind: str = 'train') -> str:
  """Takes the `kind` lock of `workdir` (made if missing); returns its path. Raises LockHeld when another
  process holds it; takes over (and says so) a lock left by a process that is gone."""
  if kind not in KINDS:
    raise ValueError(f'unknown lock kind {kind!r}; valid: {", ".join(KINDS)}')
  if os.path.exists(workdir) and not os.path.isdir(workdir):
    raise WorkdirUnusable(f'workdir {workdir} is a file, not a directory; pass a directory (it is created if missing)')
  path, host = lock_path(workdir, kind), socket.gethostname()
  if path in _held:
    raise LockHeld(f'{workdir} is in use: this process already holds its {kind} lock')
  for _ in range(10):
    try:
      os.makedirs(workdir, exist_ok=True)
      fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)
    except OSError as e:
      raise WorkdirUnusable(
        f'cannot write to workdir {workdir} ({e.strerror}); pass a directory you can write to'
      ) from None
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
      holder = _read(fd)
      os.close(fd)
      raise LockHeld(
        f'{workdir} is in use: a {kind} run holds it ({_who(holder)}); wait for it to end or stop it, or use '
        'another --workdir'
      ) from None
    try:
      same_file = os.fstat(fd).st_ino == os.stat(path).st_ino
    except FileNotFoundError:  # its holder removed it as it let go: take the new one
      same_file = False
    if not same_file:
      os.close(fd)
      continue
    holder = _read(fd)
    pid, their_host = holder.get('pid'), holder.get('host')
    if isinstance(pid, int) and their_host and their_host != host:
      os.close(fd)
      raise LockHeld(
        f'{workdir} is in use: a {kind} run holds it (PID {pid} on host {their_host}); if that '
        f'process is gone, delete {path}'
      ) from None
    if os.pread(fd, 1, 0):
      who = f'PID {pid} on host {their_host}' if isinstance(pid, int) else 'an unreadable lock file'
      print(f'Took over the stale {kind} lock of {workdir} ({who}; that process is gone)', flush=True)
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps({'pid': os.getpid(), 'host': host, 'kind': kind}).encode(), 0)
    _held[path] = fd
    return path
  raise LockHeld(f'could not take the {kind} lock {path}: other processes keep replacing it')


def release(path: str) -> None:
  """Removes the lock file and lets go of its lock, if this process holds it."""
  fd = _held.pop(path, None)
  if fd is None:
    return
  with contextlib.suppress(FileNotFoundError):
    os.remove(path)  # while still held: a process that opened the old file sees it replaced and retries
  os.close(fd)


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
