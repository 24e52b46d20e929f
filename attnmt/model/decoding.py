"""Greedy and beam search, entirely under `jit`, returning the attention of every output token.

Both loops are `lax.while_loop`s that stop as soon as every hypothesis has ended (or `max_len`).
Beam search follows the alive/finished scheme of the Flax WMT example, and carries each hypothesis's
attention history through the beam reordering. Scores use the GNMT length penalty
lp(len) = ((5 + len) / 6) ** alpha (Wu et al. 2016), len counting the EOS token, and optionally its
coverage penalty cp = beta * sum_i log(min(sum_t a_ti, 1)) over the valid source positions (Wu et al.
2016, Eq. 14; the minimum is floored at COVERAGE_FLOOR so that a position no step attends, which the
sparse normalisers allow, costs log(1e-6) instead of -inf).
Letters: B batch, K beam, T output positions, S source positions, V vocabulary.

The attention history (B x T x S floats, K times that in beam search) is the only buffer that grows
with the square of the sentence length: with `keep_attention=False` it is not kept (`weights` comes back
with T = 0), so decoding memory grows linearly with the source length.
"""

from __future__ import annotations

import functools

from typing import NamedTuple

import jax
import jax.numpy as jnp

from attnmt.model.config import ModelConfig
from attnmt.model.interventions import Intervention
from attnmt.model.seq2seq import BOS, EOS, PAD, Seq2Seq

NEG_INF = -1.0e9
COVERAGE_FLOOR = 1e-6


class Decoded(NamedTuple):
  tokens: jax.Array  # B x T (greedy) or B x K x T (beam), EOS included, PAD after
  lengths: jax.Array  # B or B x K, tokens up to and including EOS
  weights: jax.Array  # B x T x S or B x K x T x S, attention of each output token (0 after EOS);
  #                      T is 0 without keep_attention
  scores: jax.Array  # B or B x K: log-probability / length penalty (greedy: alpha = 0)


def finite_or_eos(logits_xV: jax.Array) -> jax.Array:
  """The logits, with every row holding a NaN or an infinity replaced by one that ends the hypothesis:
  EOS at 0, the rest at NEG_INF. The arg-max of a NaN row is no token at all (greedy would emit the id V,
  outside the vocabulary); a broken model's output ends instead of crashing what reads it."""
  finite_x1 = jnp.all(jnp.isfinite(logits_xV), axis=-1, keepdims=True)
  eos_only_V = jnp.where(jnp.arange(logits_xV.shape[-1]) == EOS, 0.0, NEG_INF).astype(logits_xV.dtype)
  return jnp.where(finite_x1, logits_xV, eos_only_V)


def _choosable_log_probs(logits_xV: jax.Array) -> jax.Array:
  """Log-probabilities over the full vocabulary, with PAD and BOS made unchoosable."""
  return jax.nn.log_softmax(finite_or_eos(logits_xV)).at[..., jnp.array([PAD, BOS])].set(NEG_INF)


def _greedy_choice(logits_BxV: jax.Array) -> tuple[jax.Array, jax.Array]:
  """The most probable choosable token and its log-probability: argmax and value of
  `_choosable_log_probs`, computed as a max, a masked min and a log-sum-exp, passes that vectorise,
  instead of a log-softmax copy and a variadic arg-max reduction. A non-finite row chooses EOS
  (`finite_or_eos`)."""
  logits_BxV = finite_or_eos(logits_BxV)
  vocab_V = jnp.arange(logits_BxV.shape[-1])
  choosable_V = (vocab_V != PAD) & (vocab_V != BOS)
  best_B = jnp.max(jnp.where(choosable_V, logits_BxV, -jnp.inf), axis=-1)
  is_best_BxV = choosable_V & (logits_BxV == best_B[:, None])
  token_B = jnp.min(jnp.where(is_best_BxV, vocab_V, logits_BxV.shape[-1]), axis=-1).astype(jnp.int32)
  return token_B, best_B - jax.nn.logsumexp(logits_BxV, axis=-1)


def length_penalty(length, alpha: float):
  return ((5.0 + length) / 6.0) ** alpha


def coverage_penalty(coverage_xS: jax.Array, valid_xS: jax.Array, beta: float) -> jax.Array:
  """beta * sum_i log(min(c_i, 1)) over the valid positions, c_i the attention position i received."""
  capped = jnp.maximum(jnp.minimum(coverage_xS, 1.0), COVERAGE_FLOOR)
  return beta * jnp.sum(jnp.where(valid_xS, jnp.log(capped), 0.0), axis=-1)


@functools.partial(jax.jit, static_argnames=('cfg', 'max_len', 'keep_attention', 'intervention'))
def greedy(
  cfg: ModelConfig,
  params,
  src_BxS: jax.Array,
  src_len_B: jax.Array,
  max_len: int,
  keep_attention: bool = True,
  intervention: Intervention | None = None,
) -> Decoded:
  """Picks the most probable token at every step until every sentence has produced EOS. `intervention`:
  counterfactual attention at every step (attnmt/model/interventions.py); `weights` are then the
  counterfactual ones the context read."""
  model, variables = Seq2Seq(cfg, intervention), {'params': params}
  memory, state = model.apply(variables, src_BxS, src_len_B, method=Seq2Seq.encode)
  batch, src_positions = src_BxS.shape
  init = dict(
    t=jnp.int32(0),
    state=state,
    prev=jnp.full((batch,), BOS, jnp.int32),
    done=jnp.zeros((batch,), bool),
    tokens=jnp.full((batch, max_len), PAD, jnp.int32),
    weights=jnp.zeros((batch, max_len if keep_attention else 0, src_positions), jnp.float32),
    logp=jnp.zeros((batch,), jnp.float32),
    lengths=jnp.zeros((batch,), jnp.int32),
  )

  def cond(c):
    return (c['t'] < max_len) & ~jnp.all(c['done'])

  def body(c):
    state, logits_BxV, w_BxS = model.apply(variables, memory, c['state'], c['prev'], method=Seq2Seq.decode_step)
    token_B, logp_B = _greedy_choice(logits_BxV)
    live = ~c['done']
    token_B = jnp.where(live, token_B, PAD)
    return dict(
      t=c['t'] + 1,
      state=state,
      prev=token_B,
      done=c['done'] | (token_B == EOS),
      tokens=c['tokens'].at[:, c['t']].set(token_B),
      weights=(
        c['weights'].at[:, c['t']].set(jnp.where(live[:, None], w_BxS, 0.0)) if keep_attention else c['weights']
      ),
      logp=c['logp'] + jnp.where(live, logp_B, 0.0),
      lengths=c['lengths'] + live,
    )

  c = jax.lax.while_loop(cond, body, init)
  return Decoded(c['tokens'], c['lengths'], c['weights'], c['logp'])


@functools.partial(jax.jit, static_argnames=('cfg', 'intervention'))
def forced_attention(
  cfg: ModelConfig,
  params,
  src_BxS: jax.Array,
  src_len_B: jax.Array,
  tokens_BxT: jax.Array,
  intervention: Intervention | None = None,
):
  """The attention (B x T x S) of given outputs, recomputed by teacher forcing them: equal to what decoding
  them step by step gave (tests/model/test_seq2seq.py), for one T x S matrix per output instead of the
  K histories beam search would carry and reorder at every step. Not for a recurrent normaliser
  (`monotonic`), whose hard attention in decoding differs from its expected attention under teacher forcing."""
  tgt_in_BxT = jnp.concatenate([jnp.full_like(tokens_BxT[:, :1], BOS), tokens_BxT[:, :-1]], axis=1)
  return Seq2Seq(cfg, intervention).apply({'params': params}, src_BxS, src_len_B, tgt_in_BxT)[1]


def _gather_beams(x, beam_idx_BxN):
  """Selects beams along axis 1 of x (B x K x ...) for each batch row: B x N x ..."""
  idx = beam_idx_BxN.reshape(beam_idx_BxN.shape + (1,) * (x.ndim - 2))
  return jnp.take_along_axis(x, idx, axis=1)


def _flat_state_gather(state, beam_idx_BxK, beam: int):
  """Reorders a decoder state whose leading axis is B*K by parent beam; scalars pass through."""

  def gather(x):
    if x.ndim == 0:
      return x
    return _gather_beams(x.reshape((x.shape[0] // beam, beam) + x.shape[1:]), beam_idx_BxK).reshape(x.shape)

  return jax.tree.map(gather, state)


@functools.partial(jax.jit, static_argnames=('cfg', 'beam_size', 'max_len', 'keep_attention', 'intervention'))
def beam_search(
  cfg: ModelConfig,
  params,
  src_BxS: jax.Array,
  src_len_B: jax.Array,
  beam_size: int,
  max_len: int,
  alpha: float = 0.6,
  keep_attention: bool = True,
  beta: float = 0.0,
  intervention: Intervention | None = None,
) -> Decoded:
  """Beam search; returns the K best hypotheses per sentence, best first. A finished hypothesis
  scores log p / lp(len) + cp (`coverage_penalty` with `beta`; 0 when beta is 0). The penalty is never
  positive, so the stopping bound on alive hypotheses stays valid."""
  model, variables, k = Seq2Seq(cfg, intervention), {'params': params}, beam_size
  batch, src_positions = src_BxS.shape
  tile = lambda x: x if x.ndim == 0 else jnp.repeat(x, k, axis=0)
  memory, state = jax.tree.map(tile, model.apply(variables, src_BxS, src_len_B, method=Seq2Seq.encode))
  seqs = jnp.full((batch, k, max_len), PAD, jnp.int32)
  attn = jnp.zeros((batch, k, max_len if keep_attention else 0, src_positions), jnp.float32)
  init = dict(
    t=jnp.int32(0),
    state=state,
    alive_seq=seqs,
    alive_attn=attn,
    alive_logp=jnp.tile(jnp.array([0.0] + [NEG_INF] * (k - 1)), (batch, 1)),
    fin_seq=seqs,
    fin_attn=attn,
    fin_score=jnp.full((batch, k), NEG_INF),
    fin_len=jnp.zeros((batch, k), jnp.int32),
    alive_cov=jnp.zeros((batch, k, src_positions), jnp.float32),
  )
  valid_Bx1xS = (jnp.arange(src_positions)[None, :] < src_len_B[:, None])[:, None, :]
  cond = functools.partial(_searching, max_len=max_len, best_possible_lp=length_penalty(max_len, alpha))

  def body(c):
    t = c['t']
    prev = jnp.where(t == 0, BOS, c['alive_seq'][:, :, jnp.maximum(t - 1, 0)]).reshape(-1)
    state, logits, w = model.apply(variables, memory, c['state'], prev, method=Seq2Seq.decode_step)
    vocab = logits.shape[-1]
    cand_BxKV = (c['alive_logp'][:, :, None] + _choosable_log_probs(logits).reshape(batch, k, vocab)).reshape(
      batch, k * vocab
    )
    top_logp, top_idx = jax.lax.top_k(cand_BxKV, 2 * k)  # 2K so K survive without EOS
    parent, token = top_idx // vocab, (top_idx % vocab).astype(jnp.int32)
    seq = _gather_beams(c['alive_seq'], parent).at[:, :, t].set(token)
    step_w = _gather_beams(w.reshape(batch, k, src_positions), parent)
    att = _gather_beams(c['alive_attn'], parent)
    att = att.at[:, :, t].set(step_w) if keep_attention else att
    cov = _gather_beams(c['alive_cov'], parent) + step_w  # attention each source position received
    ended = token == EOS
    # Alive: the K best candidates that did not end.
    alive_logp, keep = jax.lax.top_k(jnp.where(ended, NEG_INF, top_logp), k)
    new_state = _flat_state_gather(state, _gather_beams(parent, keep), k)
    # Finished: merge the candidates that ended with those already finished; keep the K best.
    fin_new = top_logp / length_penalty(t + 1, alpha) + coverage_penalty(cov, valid_Bx1xS, beta)
    fin_new = jnp.where(ended, fin_new, NEG_INF)
    fin_new = jnp.where(top_logp <= NEG_INF / 2, NEG_INF, fin_new)
    all_scores = jnp.concatenate([c['fin_score'], fin_new], 1)
    fin_score, pick = jax.lax.top_k(all_scores, k)
    merged = lambda old, new: _gather_beams(jnp.concatenate([old, new], 1), pick)
    return dict(
      t=t + 1,
      state=new_state,
      alive_seq=_gather_beams(seq, keep),
      alive_attn=_gather_beams(att, keep),
      alive_logp=alive_logp,
      fin_seq=merged(c['fin_seq'], seq),
      fin_attn=merged(c['fin_attn'], att),
      fin_score=fin_score,
      fin_len=merged(c['fin_len'], jnp.full((batch, 2 * k), t + 1, jnp.int32)),
      alive_cov=_gather_beams(cov, keep),
    )

  c = jax.lax.while_loop(cond, body, init)
  return _hypotheses(c, alpha, coverage_penalty(c['alive_cov'], valid_Bx1xS, beta))


def _searching(c: dict, max_len: int, best_possible_lp) -> jax.Array:
  """Whether beam search goes on: a step is left and an alive hypothesis can still beat the worst finished one
  (Flax WMT's criterion; log-probabilities only fall, so the best alive score is bounded by alive_logp /
  lp(max_len))."""
  bound_B = c['alive_logp'][:, 0] / best_possible_lp
  worst_finished_B = jnp.min(c['fin_score'], axis=1)
  worst_finished_B = jnp.where(worst_finished_B <= NEG_INF / 2, NEG_INF, worst_finished_B)
  done = jnp.all((worst_finished_B >= bound_B) | (c['alive_logp'][:, 0] <= NEG_INF / 2))
  return (c['t'] < max_len) & ~done


def _hypotheses(c: dict, alpha: float, alive_cp_BxK: jax.Array) -> Decoded:
  """The finished hypotheses of beam search's final carry `c`; a sentence none of whose hypotheses ended within
  max_len returns its alive ones, scored as if they ended there (`alive_cp_BxK`: their coverage penalty)."""
  none_finished = jnp.all(c['fin_score'] <= NEG_INF / 2, axis=1)
  pick = lambda fin, alive: jnp.where(none_finished.reshape((-1,) + (1,) * (fin.ndim - 1)), alive, fin)
  alive_len = jnp.full(c['fin_len'].shape, c['t'], jnp.int32)
  return Decoded(
    pick(c['fin_seq'], c['alive_seq']),
    pick(c['fin_len'], alive_len),
    pick(c['fin_attn'], c['alive_attn']),
    pick(c['fin_score'], c['alive_logp'] / length_penalty(c['t'], alpha) + alive_cp_BxK),
  )
