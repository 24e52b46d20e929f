"""The encoder: embeddings, then 1..N (bi)directional LSTM or GRU layers with dropout between them.

The annotation of position i is h_i = [fwd_i ; bwd_i] (Bahdanau Sec. 3.2). Each direction runs per
sentence and respects its length, so a padded sentence gets exactly the annotations of the same
sentence unpadded (padding does not leak into the backward direction); annotations at padding are 0.
Letters: B batch, S source positions, E embedding size, H annotation size.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import flax.linen as nn

from attnmt.model import rnn
from attnmt.model.config import ModelConfig


class Encoder(nn.Module):
  cfg: ModelConfig
  # (cell, p, carry, x W_ih + b, valid_B) -> carry in place of rnn.cell_update: the fused kernels' step, which
  # Seq2Seq passes with model.kernels='pallas' (attnmt/model/kernels/wiring.py); None: the readable path
  cell_step: Callable | None = None

  @nn.compact
  def __call__(
    self, src_BxS: jax.Array, src_len_B: jax.Array, train: bool = False, src_offset_BxSxE: jax.Array | None = None
  ) -> tuple[jax.Array, rnn.Carry]:
    """Returns the annotations (B x S x H) and the top layer's final carry, each part [fwd ; bwd].
    `src_offset_BxSxE` is added to the source embeddings: at zero, its gradient is the gradient with respect to
    them (an attribution's gradient x input, attnmt/faithfulness/measures.py)."""
    cfg = self.cfg
    dtype = jnp.dtype(cfg.dtype)
    embed_VxE = self.param(
      'embed',
      nn.initializers.variance_scaling(1.0, 'fan_in', 'normal', out_axis=0),
      (cfg.source_vocab_size, cfg.embed_size),
      jnp.float32,
    )
    x_BxSxI = jnp.take(embed_VxE, src_BxS, axis=0).astype(dtype)
    if src_offset_BxSxE is not None:
      x_BxSxI = x_BxSxI + src_offset_BxSxE.astype(dtype)
    x_BxSxI = nn.Dropout(cfg.dropout, deterministic=not train)(x_BxSxI)
    directions = (False, True) if cfg.bidirectional else (False,)
    final = None
    for layer in range(cfg.encoder_layers):
      params = tuple(
        rnn.RNNLayerParams(
          cfg.cell, x_BxSxI.shape[-1], cfg.encoder_hidden_size, name=f'layer{layer}_{"bwd" if reverse else "fwd"}'
        )()
        for reverse in directions
      )
      outputs, finals = rnn.run_directions(cfg.cell, params, directions, x_BxSxI, src_len_B, self.cell_step)
      x_BxSxI = jnp.concatenate(outputs, axis=-1)
      final = tuple(jnp.concatenate(parts, axis=-1) for parts in zip(*finals))
      if layer + 1 < cfg.encoder_layers:
        x_BxSxI = nn.Dropout(cfg.dropout, deterministic=not train)(x_BxSxI)
    return x_BxSxI, final
