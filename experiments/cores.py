"""One sweep over several CPU cores: one training process per core, each single-threaded and pinned.

On a CPU, the training step of attnmt's models is a chain of small products that one XLA thread pool
cannot spread over cores well: two single-threaded processes, one per core, train 1.39x the target
tokens per second of one process using both cores (benchmarks/README.md, "Cores"). So a sweep with
several unfinished variants runs as that many processes (at most one per core), which share the
variants through `sweep.shard=auto` (each variant's training lock), and the parent then writes the
tables and the analysis. Each child's lines reach the terminal prefixed with its core.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
import warnings

import jax

# XLA flags that keep a process on one thread: Eigen's pool and the intra-op pool.
ONE_THREAD = '--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1'
CHILD_ENV = 'ATTNMT_SWEEP_PROCESS'  # set in each child: 'i/n'


# `train.seeds=auto` in a sweep (the main job): on an accelerator K vmapped seeds cost little more than one, so
# the variants are ranked with five; on a CPU K seeds cost about K times one, so two seeds: the fewest that
# measure the seeds' spread, enough to rank attention over `none` (docs/results/main.md).
ACCELERATOR_SEEDS = '0,1,2,3,4'
CPU_SEEDS = '0,1'


def auto_seeds(backend: str) -> str:
  """The seeds `train.seeds=auto` stands for on `backend` ('cpu', 'gpu', 'tpu')."""
  return CPU_SEEDS if backend == 'cpu' else ACCELERATOR_SEEDS


def usable_cores() -> list[int]:
  """The cores this process may run on (its affinity mask), in order."""
  return sorted(os.sched_getaffinity(0))


def plan(setting, unfinished: int) -> int:
  """How many training processes: `setting` is 'auto' or a positive integer (`sweep.processes`).

  'auto' is one per core, up to the number of unfinished variants, on the CPU backend of a single
  host; on an accelerator, in a multi-host run or inside a child, one."""
  text = str(setting).strip().lower()
  if text != 'auto':
    try:
      n = int(text)
    except ValueError:
      n = 0
    if n < 1:
      raise ValueError(
        f"sweep.processes '{setting}' is neither auto nor a positive integer; e.g. --config.sweep.processes=2"
      )
    return min(n, max(unfinished, 1))
  if os.environ.get(CHILD_ENV) or jax.process_count() > 1 or jax.default_backend() != 'cpu':
    return 1
  return max(1, min(len(usable_cores()), unfinished))


def _child_setup(core: int) -> None:
  """In the child before exec: its own process group (a Ctrl-C reaches it once, through the parent),
  pinned to `core`, and SIGTERM when the parent dies (Linux prctl PR_SET_PDEATHSIG), so no child trains on
  orphaned."""
  os.setpgid(0, 0)
  os.sched_setaffinity(0, {core})
  try:
    ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM))
  except (OSError, AttributeError):
    pass


def _pump(stream, prefix: str, out) -> None:
  for line in iter(stream.readline, ''):
    out.write(prefix + line)
    out.flush()
  stream.close()


@contextlib.contextmanager
def fork_quietly():
  """Starting a child process from a process that imported JAX makes JAX warn that os.fork() and threads do
  not mix; the child only execs a new Python, which is safe, so the warning is dropped here."""
  with warnings.catch_warnings():
    warnings.filterwarnings('ignore', message=r'os\.fork\(\) was called', category=RuntimeWarning)
    yield


def run_children(extra_args: list[str], n: int, while_waiting=None) -> list[tuple[int, int]]:
  """Runs this sweep command n times, child i pinned to core i (mod the usable cores), single-threaded,
  with `extra_args` appended (the shard and process settings). Returns the (core, exit status) of each child
  that failed (a signal's status as 128 + its number), empty when all succeeded; SIGTERM and SIGINT are
  passed on to the children, which stop as a single run does. `while_waiting(running)`: called once, pinned to
  the core of the first child that finished, while others still run (their last runs end minutes apart);
  `running()` says whether any still does. An error in it is one line, and the waiting goes on."""
  cores = usable_cores()
  command = [sys.executable, '-m', 'experiments.sweep', *sys.argv[1:], *extra_args]
  children, pumps = [], []
  for i in range(n):
    core = cores[i % len(cores)]
    env = {
      **os.environ,
      'XLA_FLAGS': (os.environ.get('XLA_FLAGS', '') + ' ' + ONE_THREAD).strip(),
      CHILD_ENV: f'{i}/{n}',
      'PYTHONUNBUFFERED': '1',
    }
    with fork_quietly():
      child = subprocess.Popen(
        command,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        bufsize=1,
        preexec_fn=lambda core=core: _child_setup(core),
      )
    children.append((core, child))
    for stream, out in ((child.stdout, sys.stdout), (child.stderr, sys.stderr)):
      pump = threading.Thread(target=_pump, args=(stream, f'[core {core}] ', out), daemon=True)
      pump.start()
      pumps.append(pump)

  def forward(signum, frame):
    del frame
    for _, child in children:
      if child.poll() is None:
        child.send_signal(signum)

  previous = {s: signal.signal(s, forward) for s in (signal.SIGTERM, signal.SIGINT)}
  try:
    if while_waiting is not None:
      _on_idle_core(children, while_waiting)
    statuses = [(core, child.wait()) for core, child in children]
  finally:
    for s, handler in previous.items():
      signal.signal(s, handler)
    for pump in pumps:
      pump.join()
  return [(core, status if status > 0 else 128 - status) for core, status in statuses if status != 0]


def _on_idle_core(children: list, work, poll_s: float = 0.5) -> None:
  """`work(running)` on the core of the first child to exit while another still runs, if one does (`running()`:
  whether one still does); then this process's cores are as before. Affinity is the calling thread's: threads
  started meanwhile (a thread pool's first workers) keep that one core."""
  while True:
    running = [core for core, child in children if child.poll() is None]
    if not running:
      return
    idle = [core for core, child in children if child.returncode is not None and core not in running]
    if idle:
      break
    time.sleep(poll_s)
  before = os.sched_getaffinity(0)
  os.sched_setaffinity(0, {idle[0]})
  try:
    work(lambda: any(child.poll() is None for _, child in children))
  except Exception as e:  # the analysis after training does the same work again and says what fails
    print(
      f'sweep: work while the last runs trained failed ({type(e).__name__}: {e}); it is done after them',
      file=sys.stderr,
    )
  finally:
    os.sched_setaffinity(0, before)


def stopped(failed: list[tuple[int, int]]) -> bool:
  """Whether every failed child ended by SIGINT or SIGTERM (the user stopped the sweep)."""
  return bool(failed) and all(s in (128 + signal.SIGINT, 128 + signal.SIGTERM) for _, s in failed)


def failure_line(failed: list[tuple[int, int]], resume: bool) -> str:
  """The parent's one line on failed children: which core's process ended and how, and what follows: a
  resume (`resume`: variants are left, or the user stopped the sweep), or nothing when the other processes
  finished them (auto shards take over a variant whose process is gone, from its last checkpoint)."""
  core, status = failed[0]
  what = 'stopped by a signal' if stopped(failed) else f'the process on core {core} ended with status {status}'
  if resume:
    then = 'finished variants and checkpoints are kept: run the same command again to resume'
  else:
    then = 'the other process(es) finished its variant from its last checkpoint, so the sweep goes on'
  return f'sweep: {what} (its lines above start [core {core}]); {then}'
