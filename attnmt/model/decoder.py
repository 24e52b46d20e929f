"""The attentional decoder, teacher-forced or one step at a time, around a decoder form (attnmt/model/forms.py).

The form (`model.query_timing`: `bahdanau`, `luong` or an import path) says what one step does around the
attention and what the output layer reads:

bahdanau: query s_{t-1}; s_t = RNN(s_{t-1}, [E y_{t-1} ; c_t]); p(y_t) = softmax(W_o tanh(W_g [s_t ; c_t ; E y_{t-1}]))
luong:    s_t = RNN(s_{t-1}, [E y_{t-1} ; h~_{t-1}]); query s_t; h~_t = tanh(W_c [c_t ; s_t]); p(y_t) = softmax(W_s h~_t)

The decoder owns the rest: embeddings, RNN layers, attention, dropout, the vocabulary projection (W_out, b_out)
and the loss through it. Teacher forcing and step-by-step decoding share `_step`, so their logits are equal.
Work that does not depend on the previous step stays outside the scan as one large matrix product: the
embedding part of the first RNN layer's input projection, the attention keys (`Memory.keys`) and the
output layer. The step is an ordinary function of the parameters; `deferred_scan.deferred_weight_scan`
runs the teacher-forced scan so that every product by a parameter (or by the annotations) has its weight
gradient formed after the backward scan, one product over all steps, instead of a thin product and an
update per step.
Letters: B batch, T target positions, S source positions, H annotation size, D decoder size, V vocab.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import flax.linen as nn

from attnmt.model import attention, deferred_scan, forms, fused_loss, interventions, normalizers, rnn
from attnmt.model.config import ModelConfig
from attnmt.model.registry import check_output


class Memory(NamedTuple):
  """What the decoder reads from the encoder, computed once per sentence."""

  annotations: jax.Array  # B x S x H
  keys: jax.Array  # B x S x K, the score's per-sentence half (e.g. U h_i)
  length: jax.Array  # B, source lengths
  sentence_keys: jax.Array | None = None  # B x 2 key data of a random intervention (interventions.py), else None


class State(NamedTuple):
  """The decoder's recurrent state between steps."""

  rnn: tuple  # one carry per layer
  feed: jax.Array  # B x F, what the form hands to the next step (Luong's input feeding: h~_{t-1}; B x 0: none)
  t: jax.Array  # scalar int32, the 0-based target position of the next step
  attention: dict  # the attention's own recurrent state, B x S arrays by name (attention.initial_state)


_embed_init = nn.initializers.variance_scaling(1.0, 'fan_in', 'normal', out_axis=0)


class Decoder(nn.Module):
  cfg: ModelConfig
  intervention: interventions.Intervention | None = None  # counterfactual weights for the context (analysis)
  # The fused kernels' steps in place of the readable cell update and attention (model.kernels='pallas'): a
  # kernels.FastPath, which Seq2Seq passes (attnmt/model/kernels/wiring.py); None: the readable path
  fast: Any = None

  def setup(self):
    cfg, d, h, e = self.cfg, self.cfg.decoder_hidden_size, self.cfg.annotation_size, self.cfg.embed_size
    self.form = forms.build(cfg)

    def declare(name, shape, init=nn.initializers.lecun_normal()):
      return self.param(name, init, shape)

    self.embed = self.param('embed', _embed_init, (cfg.target_vocab_size, e), jnp.float32)
    self.attention = attention.AttentionParams(cfg)
    self.layers = [
      rnn.RNNLayerParams(cfg.cell, e + self.form.input_size() if i == 0 else d, d, name=f'layer{i}')
      for i in range(cfg.decoder_layers)
    ]
    if cfg.init_state == 'bridge':
      declare('W_bridge', (h, d * cfg.decoder_layers))
      declare('b_bridge', (d * cfg.decoder_layers,), nn.initializers.zeros)
    # The declaration order fixes each parameter's initial draw: the form's parameters, then W_out and b_out.
    self.form.params(declare)
    declare('W_out', (self.form.output_size(), cfg.target_vocab_size))
    declare('b_out', (cfg.target_vocab_size,), nn.initializers.zeros)

  def _params(self) -> dict[str, Any]:
    """All parameters as one pytree in the compute dtype, gathered outside any scan: this module's own
    (`self.param` in `setup`, by name), the attention's and one dict per RNN layer."""
    own = {k: v for k, v in self.variables['params'].items() if not isinstance(v, Mapping)}
    p = {**own, 'attention': self.attention(), 'layers': [l() for l in self.layers]}
    dtype = jnp.dtype(self.cfg.dtype)
    return jax.tree.map(lambda x: x.astype(dtype), p)

  def memory(self, annotations_BxSxH: jax.Array, src_len_B: jax.Array) -> Memory:
    """Precomputes the keys once per sentence."""
    p_att = self._params()['attention']
    keys = jax.vmap(functools.partial(attention.precompute_keys, self.cfg, p_att))(annotations_BxSxH)
    return Memory(annotations_BxSxH, keys, src_len_B)

  def initial_state(self, memory: Memory, encoder_final: rnn.Carry) -> State:
    cfg, p = self.cfg, self._params()
    batch, d = memory.length.shape[0], cfg.decoder_hidden_size
    dtype = memory.annotations.dtype
    if cfg.init_state == 'bridge':  # tanh(W mean_i h_i) over the valid positions
      count = jnp.maximum(memory.length, 1)[:, None].astype(dtype)
      mean_BxH = jnp.sum(memory.annotations, axis=1) / count
      h_BxLD = jnp.tanh(mean_BxH @ p['W_bridge'] + p['b_bridge'])
      carries = tuple(rnn.carry_from_hidden(cfg.cell, h) for h in jnp.split(h_BxLD, cfg.decoder_layers, -1))
    elif cfg.init_state == 'last':
      carries = (tuple(x.astype(dtype) for x in encoder_final),) * cfg.decoder_layers
    else:
      carries = (rnn.zero_carry(cfg.cell, (batch,), d, dtype),) * cfg.decoder_layers
    feed_size = self.form.feed_size()
    attention_state = attention.initial_state(cfg, memory.length, memory.annotations.shape[1])
    return State(carries, jnp.zeros((batch, feed_size), dtype), jnp.zeros((), jnp.int32), attention_state)

  def _dropout(self, x, train: bool):
    if not train or self.cfg.dropout == 0:
      return x
    keep = jax.random.bernoulli(self.make_rng('dropout'), 1.0 - self.cfg.dropout, x.shape)
    return jnp.where(keep, x / (1.0 - self.cfg.dropout), 0).astype(x.dtype)

  def _embed_projection(self, p, emb_xE):
    """The embedding half of layer 0's input product, E y W_ih[:E]: hoisted out of the teacher-forced scan.

    The bias is left to the step, where adding it fuses with the gate arithmetic; added here it
    would be a pass of its own over all steps' gates.
    """
    return emb_xE @ p['layers'][0]['W_ih'][: self.cfg.embed_size]

  def _step(self, p, memory: Memory, state: State, emb_proj_BxG, drop_masks=None, decoding=False, noise_BxS=None):
    """One decoder step: the form's step (`forms.DecoderForm.step`) with the decoder's layers and attention.
    Returns the new state and (the form's per-step outputs, the attention weights B x S).
    `emb_proj_BxG` is E y_{t-1} W_ih[:E] (`_embed_projection`); layer 0's input product is
    [E y_{t-1} ; x] W_ih + b = emb_proj + x W_ih[E:] + b, for the form's x (c_t, h~_{t-1} or none).
    `decoding`: greedy or beam search; `noise_BxS`: standard normal draws for a normaliser's training
    noise (None otherwise). With `fast` (model.kernels 'pallas') its cell and attention steps run in place of
    the readable ones.
    """
    cfg = self.cfg
    cell_step = self.fast and self.fast.cell
    attend_step = self.fast and self.fast.attend

    def layers(carries, x):
      new = []
      for i, (lp, carry) in enumerate(zip(p['layers'], carries)):
        if i == 0:
          x_BxG = emb_proj_BxG + lp['b']
          if x is not None:
            x_BxG = x_BxG + x @ lp['W_ih'][cfg.embed_size :]
        else:
          x_BxG = (x if drop_masks is None else x * drop_masks[i - 1]) @ lp['W_ih'] + lp['b']
        if cell_step:
          new.append(cell_step(cfg.cell, lp, carry, x_BxG, None))
        else:
          new.append(rnn.cell_update(cfg.cell, lp, carry, x_BxG, carry[0] @ lp['W_hh']))
        x = new[-1][0]
      return tuple(new), x

    def attend(query_BxD):
      if attend_step:
        return attend_step(
          cfg, p['attention'], query_BxD, memory.keys, memory.annotations, memory.length, state.attention
        )
      weights_BxS, attention_state = attention.attention_step(
        cfg, p['attention'], query_BxD, memory.keys, memory.length, state.t, state.attention, decoding, noise_BxS
      )
      if self.intervention is not None:  # the context reads counterfactual weights; the attention's state does not
        weights_BxS = self.intervention.apply(weights_BxS, memory.length, state.t, memory.sentence_keys)
      return attention.context(weights_BxS, memory.annotations), weights_BxS, attention_state

    out = self.form.step(p, state, forms.Tools(attend, layers))
    batch, positions = memory.length.shape[0], memory.annotations.shape[1]
    check_output(
      'decoder form', self.form, 'as Step.feed', out.feed, (batch, self.form.feed_size()), '(batch, feed_size())'
    )
    check_output('decoder form', self.form, 'as Step.weights', out.weights, (batch, positions), '(batch, source_len)')
    return State(out.rnn, out.feed, state.t + 1, out.attention), (out.out, out.weights)

  def _output_features(self, p, step_out: dict, emb_xE, train: bool):
    """The output layer's hidden vector, before the vocabulary projection; any leading shape."""
    hidden = self.form.hidden(p, step_out, emb_xE)
    check_output(
      'decoder form',
      self.form,
      'from hidden()',
      hidden,
      emb_xE.shape[:-1] + (self.form.output_size(),),
      '(..., output_size())',
    )
    return self._dropout(hidden, train)

  def _output_layer(self, p, step_out: dict, emb_xE, train: bool):
    """Logits from the per-step outputs; any leading shape, so it runs once over all steps."""
    return (self._output_features(p, step_out, emb_xE, train) @ p['W_out'] + p['b_out']).astype(jnp.float32)

  def token_nll(self, hidden_NxO: jax.Array, labels_N: jax.Array, label_smoothing: float = 0.0) -> jax.Array:
    """-log p(label) of each row of output-layer hidden vectors (`features=True`), through the vocabulary
    projection (with label smoothing: the smoothed cross-entropy). The projection runs inside
    `fused_loss.projected_nll`, whose gradient avoids extra passes over the N x V logits."""
    own = self.variables['params']
    return fused_loss.projected_nll(hidden_NxO, own['W_out'], own['b_out'], labels_N, label_smoothing)

  def __call__(self, memory: Memory, state: State, tgt_in_BxT: jax.Array, train: bool = False, features: bool = False):
    """Teacher forcing: logits (B x T x V) and attention weights (B x T x S) for inputs y_{<t}.

    With `features`, the output layer's hidden vectors (B x T x O) instead of the logits, for a loss
    that applies the vocabulary projection itself (`fused_loss`).
    """
    cfg, p = self.cfg, self._params()
    emb_BxTxE = self._dropout(jnp.take(p['embed'], tgt_in_BxT, axis=0), train)
    emb_proj_TxBxG = self._embed_projection(p, jnp.swapaxes(emb_BxTxE, 0, 1))
    steps, batch = emb_proj_TxBxG.shape[:2]
    masks = None
    if train and cfg.dropout > 0 and cfg.decoder_layers > 1:  # inter-layer dropout, drawn outside the scan
      keep = jax.random.bernoulli(
        self.make_rng('dropout'), 1.0 - cfg.dropout, (steps, cfg.decoder_layers - 1, batch, cfg.decoder_hidden_size)
      )
      masks = keep.astype(emb_BxTxE.dtype) / (1.0 - cfg.dropout)
    noise = None
    if train and normalizers.build(cfg).noise_std > 0:  # the normaliser's training noise, drawn outside the scan
      noise = jax.random.normal(self.make_rng('dropout'), (steps, batch, memory.annotations.shape[1]), jnp.float32)

    def step(invariants, st, xs):
      p, mem = invariants
      emb_proj_BxG, step_masks, step_noise = xs
      return self._step(p, mem, st, emb_proj_BxG, step_masks, noise_BxS=step_noise)

    xs = (emb_proj_TxBxG, masks, noise)
    _, (outs, weights_TxBxS) = deferred_scan.deferred_weight_scan(step, (p, memory), state, xs)
    outs = jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), outs)
    weights_BxTxS = jnp.swapaxes(weights_TxBxS, 0, 1)
    if features:
      return self._output_features(p, outs, emb_BxTxE, train), weights_BxTxS
    return self._output_layer(p, outs, emb_BxTxE, train), weights_BxTxS

  def step(self, memory: Memory, state: State, token_B: jax.Array, decoding: bool = True):
    """One step of decoding from token y_{t-1}: new state, logits (B x V), weights (B x S). With
    `decoding=False` the attention is the teacher-forced one (monotonic: expected, not hard)."""
    p = self._params()
    emb_BxE = jnp.take(p['embed'], token_B, axis=0)
    state, (out, weights_BxS) = self._step(p, memory, state, self._embed_projection(p, emb_BxE), decoding=decoding)
    return state, self._output_layer(p, out, emb_BxE, False), weights_BxS
