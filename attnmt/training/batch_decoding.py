"""How evaluation decodes a batch: the compiled decoder of its settings (greedy, or beam search with the best
hypothesis's attention), every seed's in one vmapped program where they decode together, and the rows in blocks,
each on its own thread, where a CPU decodes faster so."""

import functools
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np

from attnmt.model import decoding, normalizers
from attnmt.model.config import ModelConfig
from attnmt.training import row_threads, shapes


@functools.lru_cache(maxsize=64)
def seeds_program(
  cfg: ModelConfig, beam_size: int, max_len: int, alpha: float, keep_attention: bool, beta: float, n_best: bool
):
  """`decode` vmapped over the seeds' parameters and jitted: one compiled program per batch shape (cached, so a
  later batch of the same shape traces nothing)."""

  def one(params, src, src_len):
    return decode(cfg, params, src, src_len, beam_size, max_len, alpha, keep_attention, beta, None, n_best)

  return jax.jit(jax.vmap(one, in_axes=(0, None, None)))


def decode(cfg, params, src, src_len, beam_size, max_len, alpha, keep_attention, beta, intervention, n_best):
  """One batch decoded by one seed's parameters (vmappable over seeds): greedy, or the best hypothesis of beam
  search; returns (decoded, every beam hypothesis without attention when `n_best`, else None).

  Beam search's attention is the best hypothesis's, recomputed by forced decoding: the beam's K attention
  histories, reordered at every step, grow with the square of the length (kept only for a recurrent
  normaliser, whose hard attention in decoding differs from its attention under teacher forcing)."""
  call = decode_call(cfg, beam_size, max_len, alpha, keep_attention, beta, intervention)
  d = shapes.run(call, params, src, src_len)  # compiled ahead during training, where it was
  if not beam_size:
    return d, None
  recurrent = normalizers.build(cfg).recurrent
  beams = d._replace(weights=None) if n_best else None
  d = decoding.Decoded(*(x[:, 0] for x in d))  # the best hypothesis
  if keep_attention and not recurrent:
    forced = decoding.forced_attention(cfg, params, src, src_len, d.tokens, intervention)
    kept = jnp.arange(forced.shape[1])[None, :, None] < d.lengths[:, None, None]  # 0 after EOS, as decoding keeps it
    d = d._replace(weights=jnp.where(kept, forced, 0.0))
  return d, beams


def decode_call(cfg, beam_size, max_len, alpha, keep_attention, beta, intervention) -> shapes.Call:
  """The jitted decoder `decode` runs for these settings, with its static arguments (one program per batch
  shape): greedy, or beam search (its attention kept only for a recurrent normaliser)."""
  if not beam_size:
    return shapes.Call.of(
      decoding.greedy, cfg, max_len=max_len, keep_attention=keep_attention, intervention=intervention
    )
  return shapes.Call.of(
    decoding.beam_search,
    cfg,
    beam_size=beam_size,
    max_len=max_len,
    alpha=alpha,
    keep_attention=keep_attention and normalizers.build(cfg).recurrent,
    beta=beta,
    intervention=intervention,
  )


def decode_blocks(rows: int, mesh: Optional[jax.sharding.Mesh] = None) -> int:
  """How many row blocks `evaluation.translate` decodes a batch of `rows` rows in, each on its own thread: one per
  core this process may use on a CPU with one device while blocks keep row_threads.MIN_ROWS rows and the rows
  divide (the programs compiled ahead take the blocks' shape); else 1. XLA:CPU runs a decoder's loop on one
  thread, and two programs called from two threads run at once (row_threads; benchmarks/README.md, "Rows on
  threads"). A CPU sweep's per-core children, pinned to one core, decode whole batches."""
  if mesh is not None and mesh.size > 1:
    return 1
  n = row_threads.resolve('auto', rows, jax.default_backend(), 1)
  while n > 1 and rows % n:
    n -= 1
  return n


def decode_in_blocks(decode_rows, src, src_len, blocks: int):
  """`decode_rows(src, src_len)` -> (Decoded, beams or None) on `blocks` equal blocks of the rows, each called on
  its own thread, the results joined along the rows as numpy arrays (what evaluation reads back). One block: the
  call itself."""
  if blocks <= 1:
    return decode_rows(src, src_len)
  src, src_len = np.asarray(src), np.asarray(src_len)
  size = src.shape[0] // blocks

  def run(i):
    return jax.device_get(decode_rows(src[i * size : (i + 1) * size], src_len[i * size : (i + 1) * size]))

  parts = row_threads.on_threads(run, blocks)

  def join(*xs):
    return None if xs[0] is None else np.concatenate(xs, axis=0)

  d = decoding.Decoded(*(join(*xs) for xs in zip(*(p[0] for p in parts))))
  beams = None if parts[0][1] is None else decoding.Decoded(*(join(*xs) for xs in zip(*(p[1] for p in parts))))
  return d, beams
