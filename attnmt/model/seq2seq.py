"""The encoder-decoder as one Flax Linen module tree with functional `init` / `apply`.

    model = Seq2Seq(ModelConfig(...))
    variables = model.init(rng, src, src_len, tgt_in)             # plain pytree of parameters
    logits, weights = model.apply(variables, src, src_len, tgt_in)  # teacher forcing
    memory, state = model.apply(variables, src, src_len, method=Seq2Seq.encode)
    state, logits, weights = model.apply(variables, memory, state, token, method=Seq2Seq.decode_step)

Token conventions (fixed for the project): 0 = PAD, 1 = BOS, 2 = EOS, 3 = UNK.
"""

from __future__ import annotations

import jax
import flax.linen as nn

from attnmt.model import kernels
from attnmt.model.config import ModelConfig
from attnmt.model.decoder import Decoder, Memory, State
from attnmt.model.encoder import Encoder
from attnmt.model.interventions import Intervention
import jax.numpy as jnp

PAD, BOS, EOS, UNK = 0, 1, 2, 3


class Seq2Seq(nn.Module):
  cfg: ModelConfig
  # Counterfactual attention at every decoder step (attnmt/model/interventions.py); the parameters are the same.
  intervention: Intervention | None = None

  def setup(self):
    fast = kernels.fast_path(self.cfg, self.intervention)  # model.kernels='pallas': the fused steps, or None
    self.encoder = Encoder(self.cfg, fast and fast.cell)
    self.decoder = Decoder(self.cfg, self.intervention, fast)

  def encode(
    self, src_BxS: jax.Array, src_len_B: jax.Array, train: bool = False, src_offset_BxSxE=None
  ) -> tuple[Memory, State]:
    """Annotations, precomputed keys and the decoder's initial state (`src_offset_BxSxE`: Encoder's)."""
    annotations, final = self.encoder(src_BxS, src_len_B, train, src_offset_BxSxE)
    memory = self.decoder.memory(annotations, src_len_B)
    if self.intervention is not None and self.intervention.random:
      memory = memory._replace(sentence_keys=self.intervention.sentence_keys(src_BxS))
    return memory, self.decoder.initial_state(memory, final)

  def __call__(self, src_BxS, src_len_B, tgt_in_BxT, train: bool = False, src_offset_BxSxE=None):
    """Teacher-forced logits (B x T x V, float32) and attention weights (B x T x S)."""
    memory, state = self.encode(src_BxS, src_len_B, train, src_offset_BxSxE)
    return self.decoder(memory, state, tgt_in_BxT, train)

  def features(self, src_BxS, src_len_B, tgt_in_BxT, train: bool = False):
    """Teacher-forced output-layer vectors before the vocabulary projection (B x T x O), and weights."""
    memory, state = self.encode(src_BxS, src_len_B, train)
    return self.decoder(memory, state, tgt_in_BxT, train, features=True)

  def token_nll(self, src_BxS, src_len_B, tgt_in_BxT, labels_BxT, train: bool = False, label_smoothing: float = 0.0):
    """-log p(y_t = label) at every target position (B x T, float32, padding included: mask it) and the
    teacher-forced attention weights (B x T x S); the decoder applies its own vocabulary projection
    (`Decoder.token_nll`), so no caller reaches into its parameters."""
    hidden_BxTxO, weights_BxTxS = self.features(src_BxS, src_len_B, tgt_in_BxT, train)
    nll_N = self.decoder.token_nll(
      hidden_BxTxO.reshape(-1, hidden_BxTxO.shape[-1]), labels_BxT.reshape(-1), label_smoothing
    )
    return nll_N.reshape(labels_BxT.shape), weights_BxTxS

  def decode_step(self, memory: Memory, state: State, token_B: jax.Array, decoding: bool = True):
    """Feeds y_{t-1} = token_B; returns (state, logits B x V, weights B x S). `decoding=False`: the
    teacher-forced attention (the same but for `monotonic`, whose decoding attention is hard)."""
    return self.decoder.step(memory, state, token_B, decoding)


def init_params(cfg: ModelConfig, rng: jax.Array, batch: int = 2, src_len: int = 8, tgt_len: int = 8):
  """Parameters of a fresh model (shapes do not depend on batch or lengths)."""

  src = jnp.full((batch, src_len), 4, jnp.int32)
  lengths = jnp.full((batch,), src_len, jnp.int32)
  tgt = jnp.full((batch, tgt_len), 4, jnp.int32)
  return Seq2Seq(cfg).init(rng, src, lengths, tgt)['params']
