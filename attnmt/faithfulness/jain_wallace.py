"""Jain & Wallace 2019, "Attention is not Explanation": Kendall's tau between attention and an importance measure
(`kendall_tau`, `kendall_taus`), leave-one-out importance (`leave_one_out`), gradient importance
(`gradient_importance`) and the adversarial attention search (`adversarial_attention`): the largest JSD from the
model's attention of an attention whose output stays within epsilon (TVD) of the model's.
Conventions: attnmt/faithfulness/measures.py.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax

from attnmt.errors import ConfigError
from attnmt.model.config import ModelConfig

from attnmt.faithfulness.measures import (
  erase,
  gradient_x_input,
  jsd,
  tvd,
  teacher_inputs,
  step_mask,
  encode,
  decode_step,
  given_step,
  greedy_path,
  most_probable,
  scipy_stats,
)


def kendall_tau(attention_S, importance_S) -> tuple[float, float]:
  """Jain & Wallace 2019, "Attention is not Explanation" (Sec. 4.1): Kendall's tau (tau-b, scipy) between
  the attention weights and an importance measure over the given positions, and its p-value (their "Sig. Frac."
  is the share of decisions with p < 0.05). Rank correlation over all positions, as their tables report (their
  code has a top-k variant they do not tabulate). (NaN, NaN) for fewer than 2 positions or a constant side."""
  a, b = np.asarray(attention_S, np.float64), np.asarray(importance_S, np.float64)
  if a.size < 2 or np.ptp(a) == 0 or np.ptp(b) == 0:
    return float('nan'), float('nan')
  result = scipy_stats().kendalltau(a, b)
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
  return jax.nn.softmax(greedy_path(cfg, params, src_BxS, src_len_B, tokens_BxT)[0], -1)


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
    erased, erased_len = erase(src, src_len, np.where(rows, i, 0))  # the other rows' output is not read
    erased_len = np.where(rows, erased_len, src_len)
    change = np.asarray(tvd(base, _probs(cfg, params, erased, erased_len, tokens_BxT)))
    out[rows, :, i] = change[rows]
  out[~step_mask(tokens_BxT, tgt_len_B)] = np.nan
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
  _, weights_BxTxS = greedy_path(cfg, params, src_BxS, src_len_B, tokens_BxT)
  weights_TxBxS = jax.lax.stop_gradient(jnp.swapaxes(weights_BxTxS, 0, 1))

  def probs(offset_BxSxE):
    memory, state = encode(cfg, params, src_BxS, src_len_B, offset_BxSxE)

    def body(st, xs):
      token_B, w_BxS = xs
      return given_step(cfg, params, memory, st, token_B, w_BxS)

    _, logits_TxBxV = jax.lax.scan(body, state, (teacher_inputs(tokens_BxT).T, weights_TxBxS))
    p_TxB = jnp.take_along_axis(jax.nn.softmax(logits_TxBxV, -1), tokens_BxT.T[..., None], -1)[..., 0]
    return p_TxB.T

  return gradient_x_input(probs, embed_BxSxE)


PERMUTATIONS = 100  # their permute_attn(num_perm=100)


@functools.partial(jax.jit, static_argnames=('cfg', 'permutations', 'keep'))
def _permuted(cfg: ModelConfig, params, src_BxS, src_len_B, tokens_BxT, key, permutations: int, keep: bool):
  memory, state = encode(cfg, params, src_BxS, src_len_B)
  positions_S = jnp.arange(src_BxS.shape[1])
  words_BxS = positions_S[None, :] < (src_len_B - 1)[:, None]  # every position but the final EOS (and padding)

  def body(st, xs):
    token_B, t = xs
    new, logits_BxV, w_BxS = decode_step(cfg, params, memory, st, token_B)
    p_BxV = jax.nn.softmax(logits_BxV, -1)
    u_PxBxS = jax.random.uniform(jax.random.fold_in(key, t), (permutations,) + w_BxS.shape)
    order_PxBxS = jnp.argsort(jnp.where(words_BxS[None], u_PxBxS, 2.0 + positions_S), axis=-1)  # EOS, pads stay
    permuted_PxBxS = jnp.take_along_axis(jnp.broadcast_to(w_BxS, order_PxBxS.shape), order_PxBxS, -1)
    logits_PxBxV = jax.vmap(lambda w: given_step(cfg, params, memory, st, token_B, w)[1])(permuted_PxBxS)
    difference_PxB = tvd(jax.nn.softmax(logits_PxBxV, -1), p_BxV[None])
    flipped_PxB = most_probable(logits_PxBxV) != most_probable(logits_BxV)[None]
    max_B = jnp.max(jnp.where(words_BxS, w_BxS, 0.0), -1)
    kept = (permuted_PxBxS,) if keep else ()
    return new, (jnp.median(difference_PxB, 0), jnp.mean(flipped_PxB, 0), max_B, *kept)

  xs = (teacher_inputs(tokens_BxT).T, jnp.arange(tokens_BxT.shape[1]))
  _, out = jax.lax.scan(body, state, xs)
  return tuple(x.T for x in out[:3]) + tuple(jnp.transpose(x, (1, 2, 0, 3)) for x in out[3:])


def permutation_test(
  cfg: ModelConfig,
  params,
  src_BxS,
  src_len_B,
  tokens_BxT,
  tgt_len_B,
  permutations: int = PERMUTATIONS,
  seed: int = 0,
  keep: bool = False,
) -> dict:
  """Jain & Wallace 2019, "Attention is not Explanation" (Sec. 4.2.1, "Attention permutation"; their
  model/Binary_Classification.py permute_attn and Trainers/PlottingBC.py plot_permutations): at every step
  t < tgt_len, at that step only, the attention weights are permuted at random `permutations` times (their 100;
  the weights of the words move, the final EOS keeps its own, as their generate_permutation keeps the start and
  end markers) and the output difference of each permutation from the model's output is taken; the step's
  figure is the median over the permutations, against the largest weight over the words (their calc_max_attn).
  Differences: their output difference is |y_perm - y| of one sigmoid output (mean over outputs); here it is the
  TVD of the next-token distributions (for two classes the same number). Also reported: the share of the
  permutations whose decision (most probable token) differs. Steps whose source has fewer than two words have
  nothing to permute and are left out of the mask. Returns {'mask': B x T, 'median_difference', 'flipped_share',
  'max_attention': B x T (NaN where masked)} and, with `keep`, 'permuted': the permuted weights, P x B x T x S. Cost per sentence and target position: `permutations` decoder steps."""
  if int(permutations) < 1:
    raise ConfigError(f'Jain & Wallace permutations={permutations}: give at least 1 (theirs: 100)')
  got = _permuted(cfg, params, src_BxS, src_len_B, tokens_BxT, jax.random.key(seed), int(permutations), keep)
  median_BxT, flipped_BxT, max_BxT = (np.asarray(x) for x in got[:3])
  mask = step_mask(tokens_BxT, tgt_len_B) & (np.asarray(src_len_B) - 1 >= 2)[:, None]
  out = {
    'mask': mask,
    'median_difference': np.where(mask, median_BxT, np.nan),
    'flipped_share': np.where(mask, flipped_BxT, np.nan),
    'max_attention': np.where(mask, max_BxT, np.nan),
  }
  if keep:
    out['permuted'] = np.asarray(got[3])
  return out


@functools.partial(jax.jit, static_argnames=('cfg', 'steps', 'candidates'))
def _adversary(
  cfg, params, src_BxS, src_len_B, tokens_BxT, key, epsilon, select, steps, candidates, learning_rate, penalty
):
  memory, state = encode(cfg, params, src_BxS, src_len_B)
  valid_BxS = jnp.arange(src_BxS.shape[1])[None, :] < src_len_B[:, None]
  optimizer = optax.amsgrad(learning_rate)

  def attention(z_KxBxS):
    return jax.nn.softmax(jnp.where(valid_BxS[None], z_KxBxS, -jnp.inf), -1)

  def body(st, xs):
    token_B, t = xs
    new, logits_BxV, w_BxS = decode_step(cfg, params, memory, st, token_B)
    p_BxV = jax.nn.softmax(logits_BxV, -1)

    def outputs(a_KxBxS):
      return jax.vmap(lambda a: jax.nn.softmax(given_step(cfg, params, memory, st, token_B, a)[1], -1))(a_KxBxS)

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
    distance_KxB = tvd(outputs(a_KxBxS), p_BxV[None])
    words_BxS = jnp.arange(src_BxS.shape[1])[None, :] < (src_len_B - 1)[:, None]
    picks = []
    for bound, apart_KxB in (  # theirs: within `select`, the JSD over the words; attnmt's: within epsilon, all
      (select, jsd(jnp.where(words_BxS[None], a_KxBxS, 0.0), jnp.where(words_BxS, w_BxS, 0.0)[None])),
      (epsilon, jsd(a_KxBxS, w_BxS[None])),
    ):
      within_KxB = distance_KxB <= bound
      pick_B = jnp.argmax(jnp.where(within_KxB, apart_KxB, -jnp.inf), 0)
      held_B = jnp.any(within_KxB, 0)

      def chosen(x_KxB_, pick_B=pick_B):
        return jnp.take_along_axis(x_KxB_, pick_B.reshape((1, -1) + (1,) * (x_KxB_.ndim - 2)), 0)[0]

      picks.append(
        (
          jnp.where(held_B, chosen(apart_KxB), 0.0),
          held_B,
          jnp.where(held_B, chosen(distance_KxB), 0.0),
          jnp.where(held_B[:, None], chosen(a_KxBxS), w_BxS),
        )
      )
    return new, picks

  xs = (teacher_inputs(tokens_BxT).T, jnp.arange(tokens_BxT.shape[1]))
  _, picks = jax.lax.scan(body, state, xs)
  return [(j.T, h.T, d.T, jnp.swapaxes(w, 0, 1)) for j, h, d, w in picks]


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
  select: float = 0.05,
) -> dict:
  """Jain & Wallace 2019, "Attention is not Explanation" (Sec. 4.2.2, "Adversarial attention"; their
  model/Binary_Classification.py adversarial_multi and Trainers/PlottingBC.py plot_multi_adversarial): at every step
  t < tgt_len, at that step only, attention distributions a' as far as possible from the model's a (JSD) whose
  output distribution stays close to the model's. As in their code, `candidates` (5) distributions are optimised
  together in logit space, each started at uniform logits plus Gaussian noise of sd 3, by Adam (AMSGrad, learning
  rate 0.01) for `steps` (500) steps on the relaxed objective

      - sum_k JSD(a'_k, a) + penalty * sum_k max(0, TVD(p(a'_k), p(a)) - epsilon) - mean_{k,l} JSD(a'_k, a'_l)

  (penalty 500, epsilon 0.01; the last term spreads the candidates apart). The reported candidate is chosen as
  their plot_multi_adversarial chooses it: among the candidates and the model's own attention, the one farthest
  (JSD over the words: every position but the final EOS, the slices not renormalised, as their jsd(attn[1:L-1],
  ...)) whose output difference is at most `select` (their 5e-2). Beside it ('strict'), the choice within `epsilon`
  with the JSD over every position. Differences: their output is one sigmoid, its difference |y' - y|; here it is
  the next-token distribution and the difference its TVD (for two classes the same number).

  Returns {'mask': B x T, 'jsd': the attained JSD (nats; 0 where no candidate holds the bound, the model's own
  attention then being the farthest that does), 'held': whether some candidate holds it, 'tvd': the chosen
  candidate's output TVD, 'weights': B x T x S, the chosen candidate (the model's weights where none holds),
  'strict': the same four for the `epsilon` choice}. Cost per sentence and target position: `steps` x `candidates`
  decoder steps, forward and backward."""
  picks = _adversary(
    cfg,
    params,
    src_BxS,
    src_len_B,
    tokens_BxT,
    jax.random.key(seed),
    jnp.float32(epsilon),
    jnp.float32(select),
    int(steps),
    int(candidates),
    jnp.float32(learning_rate),
    jnp.float32(penalty),
  )
  mask = step_mask(tokens_BxT, tgt_len_B)

  def arrays(pick):
    jsd_BxT, held_BxT, tvd_BxT, weights_BxTxS = (np.asarray(x) for x in pick)
    return {
      'jsd': np.where(mask, jsd_BxT, np.nan),
      'held': held_BxT & mask,
      'tvd': np.where(mask, tvd_BxT, np.nan),
      'weights': weights_BxTxS,
    }

  return {'mask': mask, **arrays(picks[0]), 'strict': arrays(picks[1])}
