"""The training step on a CPU as blocks of the batch's rows, one per thread, added up in one update.

XLA:CPU runs a scan's body on one thread: the recurrences of a training step, most of its time, leave the
other cores idle, and two independent scans in one program still run one after the other. Two programs
called from two threads do run at once. So with `train.step_threads` = n > 1 the step is n + 1 programs:
`train_step.shard_gradients` on each of n equal blocks of the rows, each called on its own thread, then
`train_step.apply_gradients`, which adds their gradients and makes the update. The blocks' gradients add up
to the whole batch's (every mean's denominator is the whole batch's count), so this is the same update up to
rounding, with the same metrics; only the dropout masks differ (each block draws its own: train_step).
What it gains, measured: benchmarks/README.md, "Rows on threads".

`resolve` turns the setting into a thread count: 'auto' is one block per core this process may use, on a
CPU with one device, while each block keeps at least MIN_ROWS rows; anywhere else one (the plain step). A
CPU sweep's per-core children are pinned to one core each, so they train with the plain step.

The step keeps the plain step's interface: `step(state, batch)`, and `step.lower(state_spec, batch_spec)`
whose `.compile()` gives a program with the same call, so shapes.Ahead compiles it ahead like the plain one.
"""

from __future__ import annotations

import concurrent.futures
import functools
import os

import jax
import jax.numpy as jnp

MIN_ROWS = 32  # 'auto' never cuts a block below this many rows (measured: 64 rows in 2 blocks, benchmarks/README.md)


def usable_cores() -> int:
  """The cores this process may use (its affinity mask: one in a CPU sweep's per-core child)."""
  try:
    return max(1, len(os.sched_getaffinity(0)))
  except AttributeError:  # not on Linux
    return max(1, os.cpu_count() or 1)


def resolve(setting, rows: int, backend: str, devices: int, cores: int | None = None) -> int:
  """The number of row blocks (threads) for train.step_threads = `setting` ('auto' or a positive integer) and
  batches of about `rows` rows per seed. 'auto' is one block per core this process may use, as long as each
  keeps at least MIN_ROWS rows, on a CPU with one device; anywhere else 1. An integer is taken as it is (rows
  that do not divide leave empty rows in the last block)."""
  text = str(setting).strip().lower()
  if text != 'auto':
    return int(text)
  if backend != 'cpu' or devices != 1:
    return 1
  cores = usable_cores() if cores is None else cores
  return max(1, min(cores, rows // MIN_ROWS))


def rows_per_batch(d) -> int:
  """About how many rows a training batch of data config `d` has: data.batch_size, or with data.batch_tokens the
  fewest a batch of the longest sentences holds."""
  if d.batch_tokens:
    return max(1, d.batch_tokens // max(d.max_source_length, d.max_target_length, 1))
  return d.batch_size


def check_setting(setting) -> None:
  """train.step_threads is 'auto' or a positive integer; anything else is one ConfigError-worthy line."""
  text = str(setting).strip().lower()
  if text == 'auto':
    return
  try:
    ok = int(text) >= 1
  except ValueError:
    ok = False
  if not ok:
    raise ValueError(f"train.step_threads must be 'auto' or a positive integer, got '{setting}'; e.g. 2")


@functools.cache
def _pool(workers: int) -> concurrent.futures.ThreadPoolExecutor:
  return concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix='rows')


def on_threads(fn, n: int) -> list:
  """[fn(0), ..., fn(n - 1)], fn(0) on this thread and the others at once on a pool of n - 1 threads (one pool
  per size, shared by the training step and decoding, which never run at the same time)."""
  others = [_pool(n - 1).submit(fn, i) for i in range(1, n)] if n > 1 else []
  return [fn(0)] + [f.result() for f in others]


class _Program:
  """The blocks' program and the update program (jitted or compiled), called as one step."""

  def __init__(self, shard, apply, shards: int):
    self._shard, self._apply, self._shards = shard, apply, shards

  def __call__(self, state, batch):
    params, rng = state.params, state.rng
    grads, sums = zip(
      *on_threads(lambda i: jax.block_until_ready(self._shard(params, batch, rng, jnp.int32(i))), self._shards)
    )
    return self._apply(state, grads, sums)


class _Lowered:
  def __init__(self, shard, apply, shards: int):
    self._shard, self._apply, self._shards = shard, apply, shards

  def compile(self):
    return _Program(self._shard.compile(), self._apply.compile(), self._shards)


class RowThreadedStep:
  """step(state, batch) for K stacked seeds (state and batch with a leading seed axis), as `shards` row blocks
  on as many threads (this one and a pool of shards - 1: on_threads), then one update. `shard` and `apply` are the jitted
  programs: shard(params, batch, rng, index) -> (grads, sums); apply(state, grads, sums) -> (state, metrics),
  the state donated."""

  def __init__(self, shard, apply, shards: int):
    if shards < 2:
      raise ValueError(f'a row-threaded step needs at least 2 blocks, got {shards}: use the plain step')
    self.shard, self.apply, self.shards = shard, apply, shards
    self._call = _Program(shard, apply, shards)  # jit's own programs, for a shape not compiled ahead

  def lower(self, state_spec, batch_spec):
    index = jax.ShapeDtypeStruct((), jnp.int32)
    shard = self.shard.lower(state_spec.params, batch_spec, state_spec.rng, index)
    grads, sums = jax.eval_shape(self.shard, state_spec.params, batch_spec, state_spec.rng, index)
    apply = self.apply.lower(state_spec, (grads,) * self.shards, (sums,) * self.shards)
    return _Lowered(shard, apply, self.shards)

  def __call__(self, state, batch):
    return self._call(state, batch)
