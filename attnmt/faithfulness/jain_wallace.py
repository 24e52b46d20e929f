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
import scipy.stats

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
)


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


@functools.partial(jax.jit, static_argnames=('cfg', 'steps', 'candidates'))
def _adversary(cfg, params, src_BxS, src_len_B, tokens_BxT, key, epsilon, steps, candidates, learning_rate, penalty):
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

  xs = (teacher_inputs(tokens_BxT).T, jnp.arange(tokens_BxT.shape[1]))
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
  mask = step_mask(tokens_BxT, tgt_len_B)
  return {
    'mask': mask,
    'jsd': np.where(mask, jsd_BxT, np.nan),
    'held': held_BxT & mask,
    'tvd': np.where(mask, tvd_BxT, np.nan),
    'weights': weights_BxTxS,
  }
