"""The measures every test of attnmt/faithfulness shares, each written once: stepping the decoder along a given
output as greedy search does (`greedy_path`, `decode_step`, `given_step`: a step whose context reads given
weights), the decision of a step (`most_probable`), the divergences (`jsd`, `kl`, `tvd`; `divergence` sums them over
positions), zeroing weights and renormalising the rest (`zero_and_renormalise`), deleting a source token
(`erase`) and the gradient x input of the source embeddings at every output position (`gradient_x_input`).

Conventions (every module of the package): along a given output `tokens_BxT` (EOS included, PAD after;
`tgt_len_B` its lengths with EOS), normally the model's own greedy output, the decoder is fed BOS, y_1, ...,
y_{T-1}, so a step's decision, its most probable token (PAD and BOS excluded, as greedy search chooses), is the
token the model produced there. A counterfactual "at step t only" changes the weights the context c_t reads at step
t, from the state s_{t-1} the model's own attention led to; the counterfactual step's state is dropped. Divergences
use the natural log (the JSD lies in [0, ln 2], as in Jain & Wallace's and Wiegreffe & Pinter's figures);
TVD(p, q) = 1/2 sum_i |p_i - q_i|. Positions at and after `tgt_len_B` carry False, 0 or NaN. Letters: B batch,
T target positions, S source positions, V target vocabulary, E embedding, K candidates or removals, N seeds.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from attnmt.model.config import ModelConfig
from attnmt.model.decoder import Memory
from attnmt.model.interventions import Intervention
from attnmt.model.seq2seq import BOS, PAD, Seq2Seq


class _Given(Intervention):
  """The weights the caller hands in through `Memory.sentence_keys` (B x S, this step's) in place of the model's:
  the context reads them and nothing else changes, by the route every intervention takes."""

  name = 'given'

  def apply(self, weights_BxS, length_B, t, keys_Bx2=None):
    return keys_Bx2.astype(jnp.float32)


_GIVEN = _Given()


def scipy_stats():
  """scipy.stats, imported at the first rank correlation: training, translation and the analysis without the
  explanation tests load this package without computing one."""
  import scipy.stats

  return scipy.stats


def most_probable(logits_xV: jax.Array) -> jax.Array:
  """The most probable token, PAD and BOS excluded (greedy search's choice; ties go to the lower id)."""
  vocab_V = jnp.arange(logits_xV.shape[-1])
  return jnp.argmax(jnp.where((vocab_V != PAD) & (vocab_V != BOS), logits_xV, -jnp.inf), axis=-1)


KL_FLOOR = 1e-10  # Wiegreffe & Pinter's modelUtils.kld adds 1e-10 inside the logs


def kl(p: jax.Array, q: jax.Array, axis: int = -1) -> jax.Array:
  """KL(p || q) in nats, 0 log 0 = 0 (torch's kl_div drops the terms where p is 0, as here); q floored at KL_FLOOR,
  so a q of 0 (sparse normalisers) costs a large finite amount, not infinity. Safe to differentiate."""
  log_p = jnp.log(jnp.where(p > 0, p, 1.0))
  return jnp.sum(jnp.where(p > 0, p * (log_p - jnp.log(jnp.maximum(q, KL_FLOOR))), 0.0), axis=axis)


def jsd(p: jax.Array, q: jax.Array, axis: int = -1) -> jax.Array:
  """Jensen-Shannon divergence in nats (in [0, ln 2]): (KL(p || m) + KL(q || m)) / 2 with m = (p + q) / 2, which is
  positive wherever p or q is (KL_FLOOR touches only terms below 1e-10); 0 log 0 = 0; safe to differentiate where p
  or q is 0."""
  m = 0.5 * (p + q)
  return jnp.maximum(0.5 * (kl(p, m, axis) + kl(q, m, axis)), 0.0)


def tvd(p: jax.Array, q: jax.Array, axis: int = -1) -> jax.Array:
  """Total variation distance 1/2 sum |p - q|."""
  return 0.5 * jnp.sum(jnp.abs(p - q), axis=axis)


def teacher_inputs(tokens_BxT: jax.Array) -> jax.Array:
  """Teacher-forced decoder inputs: BOS, y_1, ..., y_{T-1}."""
  return jnp.concatenate([jnp.full_like(tokens_BxT[:, :1], BOS), tokens_BxT[:, :-1]], axis=1)


def step_mask(tokens_BxT, tgt_len_B) -> np.ndarray:
  return np.arange(np.shape(tokens_BxT)[1])[None, :] < np.asarray(tgt_len_B)[:, None]


def encode(cfg: ModelConfig, params, src_BxS, src_len_B, src_offset_BxSxE=None):
  return Seq2Seq(cfg).apply({'params': params}, src_BxS, src_len_B, False, src_offset_BxSxE, method=Seq2Seq.encode)


def decode_step(cfg: ModelConfig, params, memory: Memory, state, token_B, intervention: Intervention | None = None):
  """One greedy-search step: (state, logits B x V, weights B x S)."""
  model = Seq2Seq(cfg, intervention)
  return model.apply({'params': params}, memory, state, token_B, method=Seq2Seq.decode_step)


def given_step(cfg: ModelConfig, params, memory: Memory, state, token_B, weights_BxS):
  """One step whose context reads `weights_BxS` instead of the model's weights: (state, logits B x V)."""
  state, logits_BxV, _ = decode_step(cfg, params, memory._replace(sentence_keys=weights_BxS), state, token_B, _GIVEN)
  return state, logits_BxV


def keyed(memory: Memory, intervention: Intervention | None, src_BxS) -> Memory:
  """The memory a random intervention reads its per-sentence keys from (`Seq2Seq.encode` does the same)."""
  if intervention is not None and intervention.random:
    return memory._replace(sentence_keys=intervention.sentence_keys(src_BxS))
  return memory


@functools.partial(jax.jit, static_argnames=('cfg', 'intervention'))
def greedy_path(cfg: ModelConfig, params, src_BxS, src_len_B, tokens_BxT, given_BxTxS=None, intervention=None):
  """Logits (B x T x V) and weights (B x T x S) along `tokens_BxT`, stepping as greedy search does. `given_BxTxS`:
  the weights every step's context reads (the state follows them); `intervention`: a counterfactual at every step."""
  memory, state = encode(cfg, params, src_BxS, src_len_B)
  memory = keyed(memory, intervention, src_BxS)
  inputs_TxB = teacher_inputs(tokens_BxT).T
  if given_BxTxS is None:

    def body(st, token_B):
      st, logits_BxV, weights_BxS = decode_step(cfg, params, memory, st, token_B, intervention)
      return st, (logits_BxV, weights_BxS)

    _, (logits_TxBxV, weights_TxBxS) = jax.lax.scan(body, state, inputs_TxB)
  else:

    def body(st, xs):
      token_B, weights_BxS = xs
      st, logits_BxV = given_step(cfg, params, memory, st, token_B, weights_BxS)
      return st, (logits_BxV, weights_BxS)

    xs = (inputs_TxB, jnp.swapaxes(given_BxTxS, 0, 1).astype(jnp.float32))
    _, (logits_TxBxV, weights_TxBxS) = jax.lax.scan(body, state, xs)
  return jnp.swapaxes(logits_TxBxV, 0, 1), jnp.swapaxes(weights_TxBxS, 0, 1)


def share(kept, total) -> float:
  return float(kept) / total if total else float('nan')


def zero_and_renormalise(w_BxS, rank_BxS, valid_BxS):
  """For k = 1..S, the weights with the k first-ranked valid positions zeroed and the rest renormalised (all 0 when
  nothing is left): K x B x S."""
  ks_K = jnp.arange(1, w_BxS.shape[1] + 1)
  removed_KxBxS = valid_BxS[None] & (rank_BxS[None] < ks_K[:, None, None])
  kept_KxBxS = jnp.where(removed_KxBxS | ~valid_BxS[None], 0.0, w_BxS[None])
  total_KxBx1 = jnp.sum(kept_KxBxS, -1, keepdims=True)
  return jnp.where(total_KxBx1 > 0, kept_KxBxS / jnp.where(total_KxBx1 > 0, total_KxBx1, 1.0), 0.0)


def divergence(logits_a: np.ndarray, logits_b: np.ndarray, mask: np.ndarray) -> dict:
  """Sums over the positions where `mask` holds (any leading shape; last axis the vocabulary) of the
  Jensen-Shannon divergence in bits, the total variation distance and whether the arg-max differs."""
  p, q = jax.nn.softmax(logits_a, -1), jax.nn.softmax(logits_b, -1)
  bits = jnp.clip(jsd(p, q) / jnp.log(2.0), 0.0, 1.0)
  distance = tvd(p, q)
  changed = jnp.argmax(logits_a, -1) != jnp.argmax(logits_b, -1)
  mask = jnp.asarray(mask, bool)
  return {
    'jsd': jnp.sum(jnp.where(mask, bits, 0.0)),
    'tvd': jnp.sum(jnp.where(mask, distance, 0.0)),
    'argmax_changed': jnp.sum(mask & changed),
    'positions': jnp.sum(mask),
  }


def erase(src_BxS: np.ndarray, src_len_B: np.ndarray, position_B: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  """Each row's source with the token at `position_B` deleted (later tokens move left, a pad at the end)."""
  src, out = np.asarray(src_BxS), np.zeros_like(np.asarray(src_BxS))
  for b, (n, i) in enumerate(zip(np.asarray(src_len_B), np.asarray(position_B))):
    row = np.delete(src[b, :n], i)
    out[b, : n - 1] = row
  return out, np.asarray(src_len_B) - 1


def gradient_x_input(values, embed_BxSxE, has_aux: bool = False):
  """|sum_e x_ie d v_t / d x_ie| for every output position t of `values(offset_BxSxE)` (B x T values of the source
  embeddings plus the offset; with `has_aux`, (values, aux)): one backward pass per position, all rows at once (rows
  are independent), memory T x B x S x E. Returns B x T x S (and aux)."""
  out = jax.vjp(values, jnp.zeros_like(embed_BxSxE), has_aux=has_aux)
  v_BxT, pullback = out[0], out[1]
  eye_TxT = jnp.eye(v_BxT.shape[1], dtype=v_BxT.dtype)
  grads_TxBxSxE = jax.vmap(lambda row_T: pullback(jnp.broadcast_to(row_T, v_BxT.shape))[0])(eye_TxT)
  attribution_BxTxS = jnp.abs(jnp.einsum('tbse,bse->bts', grads_TxBxSxE, embed_BxSxE))
  return (attribution_BxTxS, out[2]) if has_aux else attribution_BxTxS
