"""One timing run of one framework, in a process of its own: what benchmarks/peer.py starts for each side of a pair.

    python -m benchmarks.peer_worker attnmt|torch|torch_compile FOLDER RESULT.json

FOLDER holds the job (`job.json`, `batch.npz`; peer.make_job). The process loads only its own framework's side
(peer_attnmt or torch_peer), which compiles and prepares the programs the job names; each is then called `warmup`
times untimed and `steps` times timed, one after the other, and the times go to RESULT.json with what the side
records (parameters, loss, greedy tokens, threads). The first attnmt run writes its initial parameters to
FOLDER/params.npz; a PyTorch run starts from them when they are there.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import numpy as np


def timed(call, steps: int, warmup: int) -> list[float]:
  """Seconds of each of `steps` calls after `warmup` untimed ones; a call returns when its work is done."""
  for _ in range(warmup):
    call()
  seconds = []
  for _ in range(steps):
    start = time.perf_counter()
    call()
    seconds.append(time.perf_counter() - start)
  return seconds


def malloc() -> str:
  with open('/proc/self/maps') as f:
    return 'tcmalloc' if 'libtcmalloc' in f.read() else 'system malloc'


def work(framework: str, folder: Path, result: Path) -> None:
  job = json.loads((folder / 'job.json').read_text())
  batch = dict(np.load(folder / 'batch.npz'))
  params = folder / 'params.npz'
  if framework == 'attnmt':
    from benchmarks import peer_attnmt

    calls, info = peer_attnmt.prepare(job, batch, None if params.exists() else str(params))
  else:
    try:
      from benchmarks import torch_peer
    except ImportError:
      from benchmarks.peer import MISSING_TORCH

      print(f'error: {MISSING_TORCH}', file=sys.stderr)
      sys.exit(2)
    start = dict(np.load(params)) if params.exists() else None
    calls, info = torch_peer.prepare(job, batch, start, compiled=framework == 'torch_compile')
    info['from_attnmt_parameters'] = start is not None
  times = {what: timed(calls[what], job['steps'], job['warmup']) for what in job['what']}
  record = {'framework': framework, 'times_s': times, 'cpus': sorted(os.sched_getaffinity(0)), 'malloc': malloc()}
  result.write_text(json.dumps({**record, **info}))


if __name__ == '__main__':
  work(sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]))
