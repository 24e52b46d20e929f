"""K seeds in one program: their batches stacked on a leading seed axis, their train states initialised and
updated by one jitted `vmap(train_step)` (data-parallel over a mesh's devices when one is given).

Every seed has its own initialisation, dropout stream and data order; a seed's result is the same whether it
trains alone or beside others, up to floating-point rounding (tests/training/test_parallel.py).
"""

from __future__ import annotations

import functools

import jax
import numpy as np
import optax

from attnmt import data
from attnmt.errors import ConfigError
from attnmt.model.config import ModelConfig
from attnmt.training import guards, parallel, row_threads, train_step

BATCH_KEYS = ('src', 'src_len', 'tgt_in', 'tgt_out', 'tgt_len')


def parse_seeds(seeds) -> list[int]:
  try:
    out = [int(s) for s in str(seeds).split(',') if s.strip()]
  except ValueError:
    hint = " ('auto' is resolved by a sweep: pass the seeds to a single run)" if str(seeds).strip() == 'auto' else ''
    raise ConfigError(f"train.seeds must be comma-separated integers like '0,1,2', got '{seeds}'{hint}") from None
  if not out or len(set(out)) != len(out):
    raise ConfigError(f"train.seeds must list distinct integers, got '{seeds}'")
  negative = [s for s in out if s < 0]
  if negative:  # a seed also offsets data.shuffle_seed, and a shuffle seed below 0 fails at the first batch
    raise ConfigError(f"train.seeds must be integers >= 0, got {negative[0]} in '{seeds}'; use seeds like '0,1,2'")
  big = [s for s in out if s >= 2**31]
  if big:
    raise ConfigError(f'train.seeds must be 32-bit integers (0 to 2147483647), got {big[0]}')
  return out


def training_batches(
  prepared, d, seeds, states=None, num_shards: int = 1, shard: tuple[int, int] = (0, 1), widths: tuple = ()
) -> list:
  """Each seed's training batches as training reads them: shuffled by `d.shuffle_seed + seed`, `states[i]`
  resuming seed i's iterator. Rows are padded to the full global batch (a multiple of `num_shards`, the
  data-parallel device count, for token-budget batches), so an epoch's smaller last batch keeps the compiled
  shape; `shard=(process_index, process_count)` yields this process's rows; `widths`: the only widths a batch
  may take (data.train_shapes, attnmt.training.shapes.choose_widths)."""
  row_multiple = num_shards if d.batch_tokens else d.batch_size
  states = states or [None] * len(seeds)
  return [
    data.batches(
      prepared, 'train', d, seed=d.shuffle_seed + s, state=st, row_multiple=row_multiple, shard=shard, widths=widths
    )
    for s, st in zip(seeds, states)
  ]


def stack_batches(batches: list[dict], keys: tuple[str, ...] = BATCH_KEYS) -> dict:
  """Pads the seeds' batches to common widths and stacks them on a leading seed axis (`keys` only; the
  gold `alignment`, B x T x S, pads to the target and source widths)."""
  widths = {k: max(b[k].shape[1] for b in batches) for k in ('src', 'tgt_in', 'tgt_out')}

  def pad(x, k):
    if k == 'alignment':
      return np.pad(x, ((0, 0), (0, widths['tgt_out'] - x.shape[1]), (0, widths['src'] - x.shape[2])))
    return np.pad(x, ((0, 0), (0, widths[k] - x.shape[1]))) if k in widths else x

  rows = max(len(b['src_len']) for b in batches)

  def pad_rows(x):  # an epoch's smaller last batch: extra rows have length 0 and count for nothing
    return np.pad(x, ((0, rows - len(x)),) + ((0, 0),) * (x.ndim - 1))

  return {k: np.stack([pad_rows(pad(b[k], k)) for b in batches]) for k in keys}


def seed_functions(
  cfg: ModelConfig,
  optimizer: optax.GradientTransformation,
  label_smoothing: float = 0.0,
  skip_nonfinite: bool = False,
  coverage_loss_weight: float = 0.0,
  mesh: jax.sharding.Mesh | None = None,
  alignment_loss_weight: float = 0.0,
  threads: int = 1,
):
  """(init, step) for K seeds in one program: init(seeds) -> TrainState stacked over seeds; step(state, batch_K)
  -> (state, metrics), jitted, vmapped over the leading seed axis of state and batch, state donated.
  `alignment_loss_weight` > 0 trains attention towards the batches' gold `alignment` (train_step.loss_fn).

  With a `mesh`, the state is replicated over its devices and the batch (K x B x ...) is split on its
  rows B: jit's SPMD partitioner turns the gradient sums into all-reduces.

  With `threads` > 1 (one device), the step is row_threads.RowThreadedStep: that many blocks of the rows, each
  on its own thread, then one update.
  """
  init = functools.partial(train_step.init_train_states, cfg, optimizer)
  one = functools.partial(
    train_step.train_step,
    cfg,
    optimizer,
    label_smoothing=label_smoothing,
    coverage_loss_weight=coverage_loss_weight,
    alignment_loss_weight=alignment_loss_weight,
  )
  placed = init if mesh is None else (lambda seeds: parallel.replicate(mesh, init(seeds)))
  if threads > 1:
    return placed, _row_threaded(
      cfg, optimizer, label_smoothing, skip_nonfinite, coverage_loss_weight, alignment_loss_weight, mesh, threads
    )
  guarded = guards.guard_step(one, skip_nonfinite)
  vmapped = _over_seeds(guarded)
  if mesh is None:
    return placed, jax.jit(vmapped, donate_argnums=0)
  everywhere = parallel.replicated(mesh)
  step = jax.jit(
    vmapped,
    in_shardings=(everywhere, parallel.batch_sharding(mesh, row_axis=1)),
    out_shardings=(everywhere, everywhere),
    donate_argnums=0,
  )
  return lambda seeds: parallel.replicate(mesh, init(seeds)), step


def _row_threaded(cfg, optimizer, label_smoothing, skip_nonfinite, coverage, alignment, mesh, threads):
  """The step as `threads` row blocks on threads (row_threads), vmapped over seeds like the plain step."""
  shard = functools.partial(
    train_step.shard_gradients,
    cfg,
    shards=threads,
    label_smoothing=label_smoothing,
    coverage_loss_weight=coverage,
    alignment_loss_weight=alignment,
  )
  update = guards.guard_step(lambda state, parts: train_step.apply_gradients(optimizer, state, *parts), skip_nonfinite)
  shard_K = _seed_mapped(shard, (0, 0, 0, None))
  apply_K = _seed_mapped(lambda state, grads, sums: update(state, (grads, sums)), (0, 0, 0))
  if mesh is None:
    return row_threads.RowThreadedStep(jax.jit(shard_K), jax.jit(apply_K, donate_argnums=0), threads)
  everywhere = parallel.replicated(mesh)
  shard_jit = jax.jit(
    shard_K, in_shardings=(everywhere, parallel.batch_sharding(mesh, row_axis=1), everywhere, everywhere)
  )
  apply_jit = jax.jit(apply_K, out_shardings=(everywhere, everywhere), donate_argnums=0)
  return row_threads.RowThreadedStep(shard_jit, apply_jit, threads)


def _seed_mapped(fn, in_axes: tuple):
  """`fn` vmapped over the leading seed axis of the arguments whose in_axes entry is 0 (None: shared); with one
  seed, `fn` on the squeezed arrays and its outputs given the axis back (_over_seeds says why)."""
  vmapped = jax.vmap(fn, in_axes=in_axes)

  def mapped(*args):
    first = next(a for a, axis in zip(args, in_axes) if axis == 0)
    if jax.tree.leaves(first)[0].shape[0] != 1:
      return vmapped(*args)
    squeezed = [jax.tree.map(lambda x: x[0], a) if axis == 0 else a for a, axis in zip(args, in_axes)]
    return jax.tree.map(lambda x: x[None], fn(*squeezed))

  return mapped


def _over_seeds(step):
  """`step` mapped over the leading seed axis of state and batch. One seed runs the plain step on the
  squeezed arrays (vmap over an axis of 1 would turn every product into a batched one): at the main job's size
  it takes 0.93x the plain step's time (benchmarks/README.md, "Cores")."""
  return _seed_mapped(step, (0, 0))
