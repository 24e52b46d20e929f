"""Is attention an explanation? Four papers' tests, each under its paper's name, for the RNN encoder-decoder.

Where a paper has a text classifier's single decision, here every decoder step is one decision. The tests run
along a given output `tokens_BxT` (EOS included, PAD after; `tgt_len_B` its lengths with EOS), normally the
model's own greedy output: the decoder is fed BOS, y_1, ..., y_{T-1} and steps with `Seq2Seq.decode_step` as
greedy search does, so the step's decision, its most probable token (PAD and BOS excluded, as greedy search
chooses), is the token the model produced there. A counterfactual "at step t only" changes the weights the context
c_t reads at step t, from the state s_{t-1} the model's own attention led to; the counterfactual step's state is
dropped. Divergences use the natural log (the JSD lies in [0, ln 2], as in Jain & Wallace's and Wiegreffe &
Pinter's figures); TVD(p, q) = 1/2 sum_i |p_i - q_i|. Positions at and after `tgt_len_B` carry False, 0 or NaN.

- Moradi, Kambhatla & Sarkar 2019, "Interrogating the Explanatory Power of Attention in Neural Machine
  Translation" (`moradi_one_step`): at each step, a counterfactual attention (Uniform, ZeroOutMax, RandomPermute)
  at that step only; is the most probable token unchanged? Shares of preserved tokens, function and content words
  apart, per counterfactual and for "any of them".
- Serrano & Smith 2019, "Is Attention Interpretable?" (`serrano_smith_flip`): at each step, the attention weights
  zeroed one at a time in a ranking's order (attention, random, gradient, gradient x attention), the rest
  renormalised, until the decision flips; the fraction of weights removed at the first flip.
- Jain & Wallace 2019, "Attention is not Explanation": Kendall's tau between attention and an importance measure
  (`kendall_tau`, `kendall_taus`), leave-one-out importance (`leave_one_out`), gradient importance
  (`gradient_importance`) and the adversarial attention search (`adversarial_attention`): the largest JSD from the
  model's attention of an attention whose output stays within epsilon (TVD) of the model's.
- Wiegreffe & Pinter 2019, "Attention is not not Explanation": the uniform-weights baseline
  (`uniform_baseline`), the variance of attention over seeds (`seed_variance`) and the diagnostic with another
  model's attention frozen into a decoder (`frozen_attention`). Their adversarially trained model (Sec. 4) is out
  of scope here: it needs a training run whose loss rewards distance from a base model's attention.

Every function is pure: arrays in, arrays and dicts out (NumPy); counts are sums per batch, so pooling is exact.
Letters: B batch, T target positions, S source positions, V target vocabulary, K candidates or removals, N seeds.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import optax
import scipy.stats

from attnmt.errors import ConfigError, InputError
from attnmt.model import interventions
from attnmt.model.config import ModelConfig
from attnmt.model.decoder import Memory
from attnmt.model.interventions import Intervention
from attnmt.model.seq2seq import BOS, PAD, Seq2Seq

ORDERS = ('attention', 'random', 'gradient', 'gradient_x_attention')  # Serrano & Smith's rankings


class _Given(Intervention):
  """The weights the caller hands in through `Memory.sentence_keys` (B x S, this step's) in place of the model's:
  the context reads them and nothing else changes, by the route every intervention takes."""

  name = 'given'

  def apply(self, weights_BxS, length_B, t, keys_Bx2=None):
    return keys_Bx2.astype(jnp.float32)


_GIVEN = _Given()


# Shared pieces ------------------------------------------------------------------------------------------------


def most_probable(logits_xV: jax.Array) -> jax.Array:
  """The most probable token, PAD and BOS excluded (greedy search's choice; ties go to the lower id)."""
  vocab_V = jnp.arange(logits_xV.shape[-1])
  return jnp.argmax(jnp.where((vocab_V != PAD) & (vocab_V != BOS), logits_xV, -jnp.inf), axis=-1)


def jsd(p: jax.Array, q: jax.Array, axis: int = -1) -> jax.Array:
  """Jensen-Shannon divergence in nats (in [0, ln 2]), 0 log 0 = 0; safe to differentiate where p or q is 0."""
  m = 0.5 * (p + q)
  log_m = jnp.log(jnp.where(m > 0, m, 1.0))

  def kl(x):
    return jnp.sum(jnp.where(x > 0, x * (jnp.log(jnp.where(x > 0, x, 1.0)) - log_m), 0.0), axis=axis)

  return jnp.maximum(0.5 * (kl(p) + kl(q)), 0.0)


def tvd(p: jax.Array, q: jax.Array, axis: int = -1) -> jax.Array:
  """Total variation distance 1/2 sum |p - q|."""
  return 0.5 * jnp.sum(jnp.abs(p - q), axis=axis)


def _inputs(tokens_BxT: jax.Array) -> jax.Array:
  """Teacher-forced decoder inputs: BOS, y_1, ..., y_{T-1}."""
  return jnp.concatenate([jnp.full_like(tokens_BxT[:, :1], BOS), tokens_BxT[:, :-1]], axis=1)


def _mask(tokens_BxT, tgt_len_B) -> np.ndarray:
  return np.arange(np.shape(tokens_BxT)[1])[None, :] < np.asarray(tgt_len_B)[:, None]


def _encode(cfg: ModelConfig, params, src_BxS, src_len_B, src_offset_BxSxE=None):
  return Seq2Seq(cfg).apply({'params': params}, src_BxS, src_len_B, False, src_offset_BxSxE, method=Seq2Seq.encode)


def _step(cfg: ModelConfig, params, memory: Memory, state, token_B, intervention: Intervention | None = None):
  """One greedy-search step: (state, logits B x V, weights B x S)."""
  model = Seq2Seq(cfg, intervention)
  return model.apply({'params': params}, memory, state, token_B, method=Seq2Seq.decode_step)


def _given_step(cfg: ModelConfig, params, memory: Memory, state, token_B, weights_BxS):
  """One step whose context reads `weights_BxS` instead of the model's weights: (state, logits B x V)."""
  state, logits_BxV, _ = _step(cfg, params, memory._replace(sentence_keys=weights_BxS), state, token_B, _GIVEN)
  return state, logits_BxV


def _keyed(memory: Memory, intervention: Intervention | None, src_BxS) -> Memory:
  """The memory a random intervention reads its per-sentence keys from (`Seq2Seq.encode` does the same)."""
  if intervention is not None and intervention.random:
    return memory._replace(sentence_keys=intervention.sentence_keys(src_BxS))
  return memory


@functools.partial(jax.jit, static_argnames=('cfg', 'intervention'))
def _path(cfg: ModelConfig, params, src_BxS, src_len_B, tokens_BxT, given_BxTxS=None, intervention=None):
  """Logits (B x T x V) and weights (B x T x S) along `tokens_BxT`, stepping as greedy search does. `given_BxTxS`:
  the weights every step's context reads (the state follows them); `intervention`: a counterfactual at every step."""
  memory, state = _encode(cfg, params, src_BxS, src_len_B)
  memory = _keyed(memory, intervention, src_BxS)
  inputs_TxB = _inputs(tokens_BxT).T
  if given_BxTxS is None:

    def body(st, token_B):
      st, logits_BxV, weights_BxS = _step(cfg, params, memory, st, token_B, intervention)
      return st, (logits_BxV, weights_BxS)

    _, (logits_TxBxV, weights_TxBxS) = jax.lax.scan(body, state, inputs_TxB)
  else:

    def body(st, xs):
      token_B, weights_BxS = xs
      st, logits_BxV = _given_step(cfg, params, memory, st, token_B, weights_BxS)
      return st, (logits_BxV, weights_BxS)

    xs = (inputs_TxB, jnp.swapaxes(given_BxTxS, 0, 1).astype(jnp.float32))
    _, (logits_TxBxV, weights_TxBxS) = jax.lax.scan(body, state, xs)
  return jnp.swapaxes(logits_TxBxV, 0, 1), jnp.swapaxes(weights_TxBxS, 0, 1)


def _share(kept, total) -> float:
  return float(kept) / total if total else float('nan')


# Moradi, Kambhatla & Sarkar 2019 ------------------------------------------------------------------------------


@functools.partial(jax.jit, static_argnames=('cfg', 'chosen'))
def _moradi(cfg: ModelConfig, params, src_BxS, src_len_B, tokens_BxT, chosen: tuple):
  memory, state = _encode(cfg, params, src_BxS, src_len_B)
  keyed = [_keyed(memory, iv, src_BxS) for iv in chosen]

  def body(st, token_B):
    new, logits_BxV, _ = _step(cfg, params, memory, st, token_B)
    best_B = most_probable(logits_BxV)
    same = [most_probable(_step(cfg, params, m, st, token_B, iv)[1]) == best_B for iv, m in zip(chosen, keyed)]
    return new, (best_B, jnp.stack(same))

  _, (best_TxB, same_TxIxB) = jax.lax.scan(body, state, _inputs(tokens_BxT).T)
  return best_TxB.T, jnp.transpose(same_TxIxB, (1, 2, 0))


def moradi_one_step(
  cfg: ModelConfig,
  params,
  src_BxS,
  src_len_B,
  tokens_BxT,
  tgt_len_B,
  intervention: Intervention | Sequence[Intervention],
  function_words: Iterable[int] | None = None,
) -> dict:
  """Moradi, Kambhatla & Sarkar 2019, "Interrogating the Explanatory Power of Attention in Neural Machine
  Translation": does the model produce the same token when, at that step only, its attention is replaced
  by a counterfactual? At every step t < tgt_len of `tokens_BxT` the original step and the counterfactual step run
  from the same state s_{t-1} (the state the model's own attention led to); the token is preserved when the
  counterfactual step's most probable token is the original step's. As in the paper, tokens are counted by the
  original step's most probable token (the model's own output along its greedy path), split into function words
  (`function_words`: a set of target token ids; their list is a word list) and content words (the rest).

  `intervention`: one counterfactual or several (attnmt/model/interventions.py; the paper's Uniform, ZeroOutMax and
  RandomPermute are 'uniform', 'zero_max' and 'permute'); with several, 'any' counts a token preserved by at least
  one of them, as their code counts for the abstract's figures (68 % of function words and 21 % of content words
  preserved, German-English).
  Differences: the paper's RandomPermute draws a new order at every step and redraws (up to 10 times) until the
  largest weight moves; 'permute' here keeps one order per sentence and may leave the largest weight in place.

  Returns {'mask': B x T, 'original': B x T most probable tokens, 'same': {label: B x T}, 'counts': {label:
  {'kept', 'tokens'[, 'function_kept', 'function_tokens', 'content_kept', 'content_tokens']}}}: sums over the
  batch. Cost per sentence: (1 + number of interventions) decoder steps per target position."""
  chosen = tuple(intervention) if isinstance(intervention, (tuple, list)) else (intervention,)
  labels = [iv.label for iv in chosen]
  if len(set(labels)) < len(labels) or 'any' in labels:
    raise ConfigError(f'interventions {labels}: give each a different label (one per name and options)')
  best_BxT, same_IxBxT = (np.asarray(x) for x in _moradi(cfg, params, src_BxS, src_len_B, tokens_BxT, chosen))
  mask = _mask(tokens_BxT, tgt_len_B)
  same = {label: same_IxBxT[i] & mask for i, label in enumerate(labels)}
  if len(chosen) > 1:
    same['any'] = same_IxBxT.any(0) & mask
  function = None if function_words is None else np.isin(best_BxT, np.fromiter(function_words, np.int64))
  counts = {}
  for label, s in same.items():
    c = {'kept': int(s.sum()), 'tokens': int(mask.sum())}
    if function is not None:
      c.update(
        function_kept=int((s & function).sum()),
        function_tokens=int((mask & function).sum()),
        content_kept=int((s & ~function).sum()),
        content_tokens=int((mask & ~function).sum()),
      )
    counts[label] = c
  return {'mask': mask, 'original': np.where(mask, best_BxT, PAD), 'same': same, 'counts': counts}


def moradi_shares(counts: dict) -> dict:
  """The shares of preserved tokens (and function and content words) from `moradi_one_step`'s counts, pooled
  counts included: {label: {'tokens': share[, 'function': share, 'content': share]}} (NaN where nothing counted)."""
  out = {}
  for label, c in counts.items():
    out[label] = {'tokens': _share(c['kept'], c['tokens'])}
    if 'function_tokens' in c:
      out[label]['function'] = _share(c['function_kept'], c['function_tokens'])
      out[label]['content'] = _share(c['content_kept'], c['content_tokens'])
  return out


# Serrano & Smith 2019 -----------------------------------------------------------------------------------------


def _renormalised_removals(w_BxS, rank_BxS, valid_BxS):
  """For k = 1..S, the weights with the k first-ranked valid positions zeroed and the rest renormalised (all 0 when
  nothing is left): K x B x S."""
  ks_K = jnp.arange(1, w_BxS.shape[1] + 1)
  removed_KxBxS = valid_BxS[None] & (rank_BxS[None] < ks_K[:, None, None])
  kept_KxBxS = jnp.where(removed_KxBxS | ~valid_BxS[None], 0.0, w_BxS[None])
  total_KxBx1 = jnp.sum(kept_KxBxS, -1, keepdims=True)
  return jnp.where(total_KxBx1 > 0, kept_KxBxS / jnp.where(total_KxBx1 > 0, total_KxBx1, 1.0), 0.0)


@functools.partial(jax.jit, static_argnames=('cfg', 'orders'))
def _flips(cfg: ModelConfig, params, src_BxS, src_len_B, tokens_BxT, orders: tuple, key):
  memory, state = _encode(cfg, params, src_BxS, src_len_B)
  positions = src_BxS.shape[1]
  valid_BxS = jnp.arange(positions)[None, :] < src_len_B[:, None]
  ks_K = jnp.arange(1, positions + 1)

  def body(st, xs):
    token_B, t = xs
    new, logits_BxV, w_BxS = _step(cfg, params, memory, st, token_B)
    w_BxS = jnp.where(valid_BxS, w_BxS, 0.0)
    best_B = most_probable(logits_BxV)

    def p_best(weights_BxS):  # rows are independent: the gradient of the sum is each row's own
      probs_BxV = jax.nn.softmax(_given_step(cfg, params, memory, st, token_B, weights_BxS)[1], -1)
      return jnp.sum(jnp.take_along_axis(probs_BxV, best_B[:, None], 1))

    grad_BxS = jax.grad(p_best)(w_BxS)
    ranking = {
      'attention': w_BxS,
      'random': jax.random.uniform(jax.random.fold_in(key, t), w_BxS.shape),
      'gradient': grad_BxS,
      'gradient_x_attention': grad_BxS * w_BxS,
    }
    out = []
    for name in orders:
      score_BxS = jnp.where(valid_BxS, ranking[name], -jnp.inf)
      rank_BxS = jnp.argsort(jnp.argsort(-score_BxS, axis=-1, stable=True), axis=-1, stable=True)
      removals_KxBxS = _renormalised_removals(w_BxS, rank_BxS, valid_BxS)
      logits_KxBxV = jax.vmap(lambda wk: _given_step(cfg, params, memory, st, token_B, wk)[1])(removals_KxBxS)
      flip_KxB = (most_probable(logits_KxBxV) != best_B[None]) & (ks_K[:, None] <= src_len_B[None])
      flipped_B = jnp.any(flip_KxB, 0)
      removed_B = jnp.where(flipped_B, jnp.argmax(flip_KxB, 0) + 1, 0)
      mass_B = jnp.sum(jnp.where(valid_BxS & (rank_BxS < removed_B[:, None]), w_BxS, 0.0), -1)
      out.append((flipped_B, removed_B, mass_B))
    return new, out

  xs = (_inputs(tokens_BxT).T, jnp.arange(tokens_BxT.shape[1]))
  _, out = jax.lax.scan(body, state, xs)
  return [tuple(x.T for x in o) for o in out]


def serrano_smith_flip(
  cfg: ModelConfig,
  params,
  src_BxS,
  src_len_B,
  tokens_BxT,
  tgt_len_B,
  orders: Sequence[str] = ORDERS,
  seed: int = 0,
) -> dict:
  """Serrano & Smith 2019, "Is Attention Interpretable?", the decision-flip test on sets of weights: at
  every step t < tgt_len, the attention weights are zeroed one at a time in a ranking's order, the remaining
  weights renormalised to sum 1 (all 0 once nothing is left, as their code's L1 normalisation gives), until the
  decision (the most probable token) differs from the original step's. Every removal is a counterfactual at step t
  only, from the original state s_{t-1}. The rankings (`orders`), each computed once from the original step:

    attention             the weights, largest first
    random                a uniformly random order (drawn from `seed`, the step and the batch row)
    gradient              d p(decision) / d a_i, largest (signed) first: the gradient of the decided token's
                          probability with respect to the weight the context reads, the rest of the step fixed
    gradient_x_attention  that gradient times the weight, largest first

  Differences: their decision is a document classifier's label; here each decoder step's token is one decision.
  Returns {'mask': B x T, order: {'flipped': B x T, 'removed': weights removed at the first flip (0: never),
  'fraction': removed / source length (NaN: never flips), 'mass': attention removed at the first flip}} and, per
  order, 'counts': {'flipped', 'steps', 'fraction_sum'} (the mean fraction over the steps that flip is
  fraction_sum / flipped). Cost per sentence and target position: one gradient and S decoder steps per order."""
  unknown = sorted(set(orders) - set(ORDERS))
  if unknown or not orders:
    raise ConfigError(f'Serrano & Smith orders {list(orders)}: valid are {", ".join(ORDERS)}')
  orders = tuple(orders)
  out = _flips(cfg, params, src_BxS, src_len_B, tokens_BxT, orders, jax.random.key(seed))
  mask = _mask(tokens_BxT, tgt_len_B)
  length_Bx1 = np.asarray(src_len_B)[:, None].astype(np.float64)
  result = {'mask': mask}
  for name, (flipped, removed, mass) in zip(orders, out):
    flipped, removed, mass = np.asarray(flipped) & mask, np.where(mask, np.asarray(removed), 0), np.asarray(mass)
    fraction = np.where(flipped, removed / length_Bx1, np.nan)
    result[name] = {
      'flipped': flipped,
      'removed': removed,
      'fraction': fraction,
      'mass': np.where(flipped, mass, np.nan),
      'counts': {
        'flipped': int(flipped.sum()),
        'steps': int(mask.sum()),
        'fraction_sum': float(np.nansum(fraction)),
      },
    }
  return result


# Jain & Wallace 2019 ------------------------------------------------------------------------------------------


def kendall_tau(attention_S, importance_S) -> tuple[float, float]:
  """Jain & Wallace 2019, "Attention is not Explanation" (Sec. 4.1): Kendall's tau (tau-b, scipy) between
  the attention weights and an importance measure over the given positions, and its p-value (their "Sig. Frac."
  is the share of decisions with p < 0.05). Rank correlation over all positions, as their tables report (their
  code has a top-k variant they do not tabulate). (NaN, NaN) for fewer than 2 positions or a constant side."""
  a, b = np.asarray(attention_S, np.float64), np.asarray(importance_S, np.float64)
  if a.size < 2 or np.ptp(a) == 0 or np.ptp(b) == 0:
    return float('nan'), float('nan')
  result = scipy.stats.kendalltau(a, b)
  return float(result.statistic), float(result.pvalue)


def kendall_taus(attention_BxTxS, importance_BxTxS, src_len_B, tgt_len_B, exclude_eos: bool = True) -> dict:
  """`kendall_tau` at every step t < tgt_len over the valid source positions; `exclude_eos` leaves out the last
  one (the source's EOS), as Jain & Wallace leave out their sequences' start and end markers. Returns {'tau': B x
  T, 'p': B x T} (NaN where undefined or masked)."""
  a, b = np.asarray(attention_BxTxS), np.asarray(importance_BxTxS)
  tau, p = np.full(a.shape[:2], np.nan), np.full(a.shape[:2], np.nan)
  for row, (n, m) in enumerate(zip(np.asarray(src_len_B), np.asarray(tgt_len_B))):
    upto = int(n) - 1 if exclude_eos else int(n)
    for t in range(int(m)):
      tau[row, t], p[row, t] = kendall_tau(a[row, t, :upto], b[row, t, :upto])
  return {'tau': tau, 'p': p}


@functools.partial(jax.jit, static_argnames=('cfg',))
def _probs(cfg: ModelConfig, params, src_BxS, src_len_B, tokens_BxT):
  return jax.nn.softmax(_path(cfg, params, src_BxS, src_len_B, tokens_BxT)[0], -1)


def leave_one_out(cfg: ModelConfig, params, src_BxS, src_len_B, tokens_BxT, tgt_len_B) -> np.ndarray:
  """Jain & Wallace 2019, "Attention is not Explanation" (Sec. 4.1, Algorithm 1): the importance of source token i
  for the decision at step t is TVD(p_t(x), p_t(x without token i)), the change of the output distribution when
  the token is deleted from the input (later tokens move left). Here p_t is the next-token distribution at step t
  along `tokens_BxT`, teacher-forced with the same prefix in both runs. The source's final EOS is not deleted (they
  leave out their start and end markers). Returns B x T x S (NaN at EOS, padding and t >= tgt_len). Cost: one
  teacher-forced pass of the batch per source position."""
  src, src_len = np.asarray(src_BxS), np.asarray(src_len_B)
  base = _probs(cfg, params, src, src_len, tokens_BxT)
  out = np.full(np.shape(tokens_BxT) + (src.shape[1],), np.nan)
  for i in range(src.shape[1]):
    rows = i < src_len - 1
    if not rows.any():
      continue
    erased = np.concatenate([np.delete(src, i, axis=1), np.full_like(src[:, :1], PAD)], 1)
    erased_len = np.where(rows, src_len - 1, src_len)
    change = np.asarray(tvd(base, _probs(cfg, params, erased, erased_len, tokens_BxT)))
    out[rows, :, i] = change[rows]
  out[~_mask(tokens_BxT, tgt_len_B)] = np.nan
  return out


@functools.partial(jax.jit, static_argnames=('cfg',))
def gradient_importance(cfg: ModelConfig, params, src_BxS, src_len_B, tokens_BxT) -> jax.Array:
  """Jain & Wallace 2019, "Attention is not Explanation" (Sec. 4.1, Algorithm 1): the importance of source token i
  for the decision at step t is |sum_w 1[x_iw = 1] d y / d x_iw|, the gradient with respect to the one-hot input at
  the token's own entry, which is the gradient x input of its embedding, |sum_e x_ie d y / d x_ie|, with the
  attention module cut from the graph (the weights are held at their values; gradients flow through the
  annotations the context averages and the rest of the model). Here y is the probability of the token
  `tokens_BxT` has at step t (their y is the predicted class's probability), teacher-forced along `tokens_BxT`.
  Returns B x T x S (positions past a sentence's length are 0; mask t >= tgt_len). Cost: one backward pass per
  target position, memory T x B x S x E."""
  embed_BxSxE = jnp.take(params['encoder']['embed'], src_BxS, axis=0)
  _, weights_BxTxS = _path(cfg, params, src_BxS, src_len_B, tokens_BxT)
  weights_TxBxS = jax.lax.stop_gradient(jnp.swapaxes(weights_BxTxS, 0, 1))

  def probs(offset_BxSxE):
    memory, state = _encode(cfg, params, src_BxS, src_len_B, offset_BxSxE)

    def body(st, xs):
      token_B, w_BxS = xs
      return _given_step(cfg, params, memory, st, token_B, w_BxS)

    _, logits_TxBxV = jax.lax.scan(body, state, (_inputs(tokens_BxT).T, weights_TxBxS))
    p_TxB = jnp.take_along_axis(jax.nn.softmax(logits_TxBxV, -1), tokens_BxT.T[..., None], -1)[..., 0]
    return p_TxB.T

  p_BxT, pullback = jax.vjp(probs, jnp.zeros_like(embed_BxSxE))
  eye_TxT = jnp.eye(tokens_BxT.shape[1], dtype=p_BxT.dtype)
  grads_TxBxSxE = jax.vmap(lambda row_T: pullback(jnp.broadcast_to(row_T, p_BxT.shape))[0])(eye_TxT)
  return jnp.abs(jnp.einsum('tbse,bse->bts', grads_TxBxSxE, embed_BxSxE))


@functools.partial(jax.jit, static_argnames=('cfg', 'steps', 'candidates'))
def _adversary(cfg, params, src_BxS, src_len_B, tokens_BxT, key, epsilon, steps, candidates, learning_rate, penalty):
  memory, state = _encode(cfg, params, src_BxS, src_len_B)
  valid_BxS = jnp.arange(src_BxS.shape[1])[None, :] < src_len_B[:, None]
  optimizer = optax.amsgrad(learning_rate)

  def attention(z_KxBxS):
    return jax.nn.softmax(jnp.where(valid_BxS[None], z_KxBxS, -jnp.inf), -1)

  def body(st, xs):
    token_B, t = xs
    new, logits_BxV, w_BxS = _step(cfg, params, memory, st, token_B)
    p_BxV = jax.nn.softmax(logits_BxV, -1)

    def outputs(a_KxBxS):
      return jax.vmap(lambda a: jax.nn.softmax(_given_step(cfg, params, memory, st, token_B, a)[1], -1))(a_KxBxS)

    def loss(z_KxBxS):
      a_KxBxS = attention(z_KxBxS)
      apart_KxB = jsd(a_KxBxS, w_BxS[None])
      over_KxB = jax.nn.relu(tvd(outputs(a_KxBxS), p_BxV[None]) - epsilon)
      cross_KxKxB = jsd(a_KxBxS[:, None], a_KxBxS[None, :])
      return jnp.sum(-apart_KxB + penalty * over_KxB) - jnp.sum(jnp.mean(cross_KxKxB, (0, 1)))

    uniform_BxS = -jnp.log(jnp.maximum(src_len_B, 1).astype(jnp.float32))[:, None]
    z0 = uniform_BxS[None] + 3.0 * jax.random.normal(jax.random.fold_in(key, t), (candidates,) + w_BxS.shape)

    def update(carry, _):
      z, opt_state = carry
      grads = jax.grad(loss)(z)
      change, opt_state = optimizer.update(grads, opt_state, z)
      return (optax.apply_updates(z, change), opt_state), None

    (z, _), _ = jax.lax.scan(update, (z0, optimizer.init(z0)), None, length=steps)
    a_KxBxS = attention(z)
    apart_KxB = jsd(a_KxBxS, w_BxS[None])
    distance_KxB = tvd(outputs(a_KxBxS), p_BxV[None])
    within_KxB = distance_KxB <= epsilon
    pick_B = jnp.argmax(jnp.where(within_KxB, apart_KxB, -jnp.inf), 0)
    held_B = jnp.any(within_KxB, 0)

    def chosen(x_KxB_):
      return jnp.take_along_axis(x_KxB_, pick_B.reshape((1, -1) + (1,) * (x_KxB_.ndim - 2)), 0)[0]

    return new, (
      jnp.where(held_B, chosen(apart_KxB), 0.0),
      held_B,
      jnp.where(held_B, chosen(distance_KxB), 0.0),
      jnp.where(held_B[:, None], chosen(a_KxBxS), w_BxS),
    )

  xs = (_inputs(tokens_BxT).T, jnp.arange(tokens_BxT.shape[1]))
  _, (jsd_TxB, held_TxB, tvd_TxB, weights_TxBxS) = jax.lax.scan(body, state, xs)
  return jsd_TxB.T, held_TxB.T, tvd_TxB.T, jnp.swapaxes(weights_TxBxS, 0, 1)


def adversarial_attention(
  cfg: ModelConfig,
  params,
  src_BxS,
  src_len_B,
  tokens_BxT,
  tgt_len_B,
  epsilon: float = 0.01,
  steps: int = 500,
  candidates: int = 5,
  learning_rate: float = 0.01,
  penalty: float = 500.0,
  seed: int = 0,
) -> dict:
  """Jain & Wallace 2019, "Attention is not Explanation" (Sec. 4.2.2, "Adversarial attention"): at every step
  t < tgt_len, at that step only, attention distributions a' as far as possible from the model's a (JSD) whose
  output distribution stays within `epsilon` of the model's, TVD(p(a'), p(a)) <= epsilon. As in their code,
  `candidates` (5) distributions are optimised together in logit space, each started at uniform logits plus
  Gaussian noise of sd 3, by Adam (AMSGrad, learning rate 0.01) for `steps` (500) steps on the relaxed objective

      - sum_k JSD(a'_k, a) + penalty * sum_k max(0, TVD(p(a'_k), p(a)) - epsilon) - mean_{k,l} JSD(a'_k, a'_l)

  (penalty 500; the last term spreads the candidates apart), and the reported one is the farthest candidate that
  holds the constraint. epsilon = 0.01 is the margin their code penalises (for its figures their code keeps the
  candidates within 0.05). Differences: their output is one
  classifier's label distribution; here it is the next-token distribution over the target vocabulary.

  Returns {'mask': B x T, 'jsd': the attained JSD (nats; 0 where no candidate holds the constraint, the model's
  own attention then being the only one known to), 'held': whether some candidate holds it, 'tvd': the chosen
  candidate's output TVD, 'weights': B x T x S, the chosen candidate (the model's weights where none holds)}.
  Cost per sentence and target position: `steps` x `candidates` decoder steps, forward and backward."""
  jsd_BxT, held_BxT, tvd_BxT, weights_BxTxS = (
    np.asarray(x)
    for x in _adversary(
      cfg,
      params,
      src_BxS,
      src_len_B,
      tokens_BxT,
      jax.random.key(seed),
      jnp.float32(epsilon),
      int(steps),
      int(candidates),
      jnp.float32(learning_rate),
      jnp.float32(penalty),
    )
  )
  mask = _mask(tokens_BxT, tgt_len_B)
  return {
    'mask': mask,
    'jsd': np.where(mask, jsd_BxT, np.nan),
    'held': held_BxT & mask,
    'tvd': np.where(mask, tvd_BxT, np.nan),
    'weights': weights_BxTxS,
  }


# Wiegreffe & Pinter 2019 --------------------------------------------------------------------------------------


def uniform_baseline(
  cfg: ModelConfig,
  params,
  src_BxS,
  src_len_B,
  reference_BxT,
  ref_len_B,
  trained_uniform: tuple[ModelConfig, dict] | None = None,
) -> dict:
  """Wiegreffe & Pinter 2019, "Attention is not not Explanation" (Sec. 3.1, Table 2): is attention needed at all?
  Their baseline is a model trained with its attention frozen to uniform weights, compared with the attention
  model on the task's score (F1). Here the score is token accuracy on the reference, teacher-forced: at each step
  t < ref_len, whether the most probable token is the reference's. Reported for the model with its own attention
  ('own'), the same model with uniform weights at every step ('uniform': the state follows them; no retraining)
  and, where `trained_uniform` = (cfg, params) of a model trained with uniform weights is given (score 'none'
  gives equal weights), that model ('trained_uniform', their baseline proper). 'agreement': whether 'uniform'
  chooses the token 'own' chooses. Returns {'mask', 'correct': {name: B x T}, 'agreement': B x T, 'counts':
  {name: correct tokens, 'agreement': ..., 'tokens': ...}}. BLEU of uniform-attention decoding is
  attnmt.training.evaluation.translate with intervention 'uniform'."""
  uniform = interventions.build('uniform')
  ref = jnp.asarray(reference_BxT)
  mask = _mask(reference_BxT, ref_len_B)
  chosen = {
    'own': most_probable(_path(cfg, params, src_BxS, src_len_B, ref)[0]),
    'uniform': most_probable(_path(cfg, params, src_BxS, src_len_B, ref, intervention=uniform)[0]),
  }
  if trained_uniform is not None:
    cfg_u, params_u = trained_uniform
    chosen['trained_uniform'] = most_probable(_path(cfg_u, params_u, src_BxS, src_len_B, ref)[0])
  correct = {name: (np.asarray(c) == np.asarray(ref)) & mask for name, c in chosen.items()}
  agreement = (np.asarray(chosen['uniform']) == np.asarray(chosen['own'])) & mask
  counts = {name: int(c.sum()) for name, c in correct.items()}
  counts.update(agreement=int(agreement.sum()), tokens=int(mask.sum()))
  return {'mask': mask, 'correct': correct, 'agreement': agreement, 'counts': counts}


def seed_variance(weights_NxBxTxS, mask_BxT, logits_NxBxTxV=None, base: int = 0) -> dict:
  """Wiegreffe & Pinter 2019, "Attention is not not Explanation" (Sec. 3.2, Figure 3): how much attention varies
  between models trained from different seeds, the yardstick for an adversary's JSD. For each decision, the JSD
  of every other seed's attention from the base model's (`base`), its median over those seeds, against the base
  model's largest weight; with `logits_NxBxTxV`, the mean over those seeds of the output distributions' TVD from
  the base model's (their output difference). Here each decision is a step t where `mask_BxT` holds, every seed
  teacher-forced with the same target prefix (the weights of decoding.forced_attention for each seed on one set
  of outputs), and the JSD runs over all source positions (they drop their start and end markers).
  Returns {'jsd_median': B x T, 'max_attention': B x T, 'tvd_mean': B x T (with logits)}, NaN where masked."""
  w = np.asarray(weights_NxBxTxS, np.float64)
  if w.shape[0] < 2:
    raise InputError(f'seed_variance needs the attention of 2 or more seeds; got {w.shape[0]}')
  mask = np.asarray(mask_BxT, bool)
  others = np.delete(w, base, axis=0)
  out = {
    'jsd_median': np.where(mask, np.median(np.asarray(jsd(others, w[base][None])), 0), np.nan),
    'max_attention': np.where(mask, w[base].max(-1), np.nan),
  }
  if logits_NxBxTxV is not None:
    probs = np.asarray(jax.nn.softmax(jnp.asarray(logits_NxBxTxV, jnp.float32), -1), np.float64)
    rest = np.delete(probs, base, axis=0)
    out['tvd_mean'] = np.where(mask, np.asarray(tvd(rest, probs[base][None])).mean(0), np.nan)
  return out


def frozen_attention(
  cfg_a: ModelConfig, params_a, cfg_b: ModelConfig, params_b, src_BxS, src_len_B, tokens_BxT, tgt_len_B
) -> dict:
  """Wiegreffe & Pinter 2019, "Attention is not not Explanation" (Sec. 3.3, "Diagnosing attention distributions by
  guiding simpler models"): do model A's attention weights carry information a decoder can use? Model B's
  decoder reads A's weights at every step (the state follows them) along B's own output `tokens_BxT`; A's weights
  are A's attention teacher-forced along the same tokens. Reported: whether B, so guided, chooses its own token
  ('agrees'), and the same with uniform weights ('agrees_uniform', their uniform row). Differences: their B is a
  non-contextual MLP trained with A's weights frozen in; here B is a trained encoder-decoder (any model over the
  same source vocabulary; its sizes may differ from A's) and nothing is retrained. With A = B, 'agrees' is all
  True. Returns {'mask', 'agrees': B x T, 'agrees_uniform': B x T, 'counts': {'agrees', 'agrees_uniform',
  'tokens'}}."""
  tokens = jnp.asarray(tokens_BxT)
  _, weights_a = _path(cfg_a, params_a, src_BxS, src_len_B, tokens)
  guided = most_probable(_path(cfg_b, params_b, src_BxS, src_len_B, tokens, given_BxTxS=weights_a)[0])
  uniform = interventions.build('uniform')
  flat = most_probable(_path(cfg_b, params_b, src_BxS, src_len_B, tokens, intervention=uniform)[0])
  mask = _mask(tokens_BxT, tgt_len_B)
  agrees = (np.asarray(guided) == np.asarray(tokens)) & mask
  agrees_uniform = (np.asarray(flat) == np.asarray(tokens)) & mask
  counts = {'agrees': int(agrees.sum()), 'agrees_uniform': int(agrees_uniform.sum()), 'tokens': int(mask.sum())}
  return {'mask': mask, 'agrees': agrees, 'agrees_uniform': agrees_uniform, 'counts': counts}
