"""Data parallelism with jax.sharding: one `Mesh` over the devices, parameters replicated, batches split.

Every jitted program (training step, loss, greedy and beam decoding) is plain `jax.jit` over arrays
that carry a `NamedSharding`; XLA's SPMD partitioner inserts the gradient all-reduce. No `pmap`.

    mesh = parallel.make_mesh()                          # all devices of all processes, axis 'data'
    state = parallel.replicate(mesh, state)              # parameters and optimiser state on every device
    batch = parallel.shard_batch(mesh, numpy_batch)      # rows split over 'data'

Train batches carry a leading seed axis (K x B x ...), so their rows are axis 1; evaluation batches
(B x ...) split axis 0. Batches whose rows do not divide over the devices are padded with empty rows
(length 0), which count for nothing in the loss, the token counts or the translations.

Multi-host: call `initialize` first (flags or the JAX_COORDINATOR_ADDRESS / JAX_NUM_PROCESSES /
JAX_PROCESS_ID variables, or cluster auto-detection on TPU pods, SLURM and Open MPI). Every process
then runs the same program; each builds only the rows of a global batch that its own devices hold
(a contiguous block: the mesh orders devices by process) and `jax.make_array_from_process_local_data`
assembles the global array.
"""

from __future__ import annotations

import os
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

DATA_AXIS = 'data'


def initialize(coordinator_address: str = '', num_processes: int = 0, process_id: int = -1, auto: bool = False) -> bool:
  """Starts JAX's distributed runtime when asked to; returns whether it did.

  Explicit arguments win; otherwise JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES and JAX_PROCESS_ID are
  read. With none of them and `auto`, JAX detects the cluster itself (TPU pod slices, SLURM, Open MPI).
  Without any of these it is a single-process run and nothing happens.
  """
  address = coordinator_address or os.environ.get('JAX_COORDINATOR_ADDRESS', '')
  num = num_processes or int(os.environ.get('JAX_NUM_PROCESSES', '0') or 0)
  pid = process_id if process_id >= 0 else int(os.environ.get('JAX_PROCESS_ID', '-1') or -1)
  if not (address or auto):
    return False
  if address and (num <= 0 or pid < 0):
    raise ValueError(
      f'multi-host training at {address} needs the number of processes and this process id: '
      'pass --num_processes and --process_id (or set JAX_NUM_PROCESSES and JAX_PROCESS_ID)'
    )
  if address:
    jax.distributed.initialize(coordinator_address=address, num_processes=num, process_id=pid)
  else:
    jax.distributed.initialize()  # cluster auto-detection
  return True


def make_mesh(num_devices: int = 0) -> Mesh:
  """A 1-D mesh with axis 'data' over the first `num_devices` devices (0: all devices of all processes)."""
  # Ordered by process, so each process's devices hold one contiguous block of a batch's rows: the block
  # that the data iterator builds for it (BatchIterator's `shard`).
  devices = sorted(jax.devices(), key=lambda d: (d.process_index, d.id))
  if num_devices < 0 or num_devices > len(devices):
    raise ValueError(
      f'train.num_devices={num_devices}, but {len(devices)} device(s) are visible; '
      f'use 0 (all) or a number from 1 to {len(devices)}'
    )
  if num_devices and jax.process_count() > 1 and num_devices != len(devices):
    raise ValueError(
      f'train.num_devices={num_devices} with {jax.process_count()} processes: multi-host runs '
      'use every device; set train.num_devices=0'
    )
  return Mesh(np.asarray(devices[: num_devices or len(devices)]), (DATA_AXIS,))


def replicated(mesh: Mesh) -> NamedSharding:
  return NamedSharding(mesh, P())


def batch_sharding(mesh: Mesh, row_axis: int = 0) -> NamedSharding:
  """Rows (axis `row_axis`) split over the 'data' axis, everything else whole."""
  return NamedSharding(mesh, P(*([None] * row_axis), DATA_AXIS))


def num_shards(mesh: Mesh) -> int:
  return mesh.shape[DATA_AXIS]


def pad_rows(batch: dict, multiple: int, row_axis: int = 0) -> dict:
  """Pads every array's rows up to a multiple of `multiple` with zeros: empty sentences (length 0).

  A zero length masks the row out of the loss and token counts; an `index` of -1 marks the row as
  padding, so translations drop it. Returns the batch unchanged when it already divides.
  """
  rows = next(iter(batch.values())).shape[row_axis]
  extra = -rows % multiple
  if not extra:
    return batch

  def pad(k, x):
    widths = [(0, 0)] * np.ndim(x)
    widths[row_axis] = (0, extra)
    return np.pad(np.asarray(x), widths, constant_values=-1 if k == 'index' else 0)

  return {k: pad(k, v) for k, v in batch.items()}


def shard_batch(mesh: Mesh, batch: dict, row_axis: int = 0, local: bool = False) -> dict:
  """A numpy batch as global arrays split on their rows, padded with empty rows to divide.

  `local=False`: `batch` is the whole global batch (every process holds it; each sends its own rows).
  `local=True`: `batch` holds only this process's block of rows; rows are not padded then.
  """
  sharding = batch_sharding(mesh, row_axis)
  if local:
    return {k: jax.make_array_from_process_local_data(sharding, np.asarray(v)) for k, v in batch.items()}
  batch = pad_rows(batch, num_shards(mesh), row_axis)
  if jax.process_count() == 1:
    return {k: jax.device_put(np.asarray(v), sharding) for k, v in batch.items()}
  return {
    k: jax.make_array_from_callback(np.shape(v), sharding, lambda idx, v=v: np.asarray(v)[idx])
    for k, v in batch.items()
  }


def replicate(mesh: Mesh, tree: Any) -> Any:
  """Every leaf on every device of the mesh (parameters, optimiser state, PRNG keys).

  With several processes each passes the same value, which goes through the host: JAX moves a
  committed array onto devices of other processes only on some runtimes.
  """
  sharding = replicated(mesh)

  def put(x):
    if jnp.issubdtype(x.dtype, jax.dtypes.prng_key):
      return jax.random.wrap_key_data(put(jax.random.key_data(x)), impl=jax.random.key_impl(x))
    return jax.device_put(np.asarray(x) if jax.process_count() > 1 else x, sharding)

  return jax.tree.map(put, tree)


def to_numpy(x: jax.Array) -> np.ndarray:
  """The whole value of a (possibly multi-host, sharded) array on this host."""
  if isinstance(x, jax.Array) and not x.is_fully_addressable:
    if x.sharding.is_fully_replicated:
      return np.asarray(x.addressable_data(0))
    return np.asarray(multihost_utils.process_allgather(x, tiled=True))
  return np.asarray(x)


def barrier(name: str) -> None:
  """Waits until every process reaches the same barrier; nothing with one process."""
  if jax.process_count() > 1:
    multihost_utils.sync_global_devices(name)


def is_main_process() -> bool:
  """Only process 0 writes logs, tables and plots; every process takes part in checkpoints."""
  return jax.process_index() == 0


def describe(mesh: Optional[Mesh] = None) -> str:
  """One line on where the program runs, for the start of a training log."""
  devices = jax.devices()
  kinds = sorted({d.device_kind for d in devices})
  text = (
    f'{len(devices)} device(s) ({", ".join(kinds)}) in {jax.process_count()} process(es), '
    f'{jax.local_device_count()} local'
  )
  if mesh is not None:
    text += f'; data-parallel over {num_shards(mesh)}'
  return text
