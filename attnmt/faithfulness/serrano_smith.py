"""Serrano & Smith 2019, "Is Attention Interpretable?": at each step, the attention weights zeroed one at a time
in a ranking's order (attention, random, gradient, gradient x attention), the rest renormalised, until the decision
flips; the fraction of weights removed at the first flip. Conventions: attnmt/faithfulness/measures.py.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from attnmt.errors import ConfigError
from attnmt.model.config import ModelConfig

from attnmt.faithfulness.measures import (
  most_probable,
  teacher_inputs,
  step_mask,
  encode,
  decode_step,
  given_step,
  zero_and_renormalise,
)


ORDERS = ('attention', 'random', 'gradient', 'gradient_x_attention')  # Serrano & Smith's rankings
RANDOM_DRAWS = 5  # their test_model.py: num_rand_samples_to_take = 5


@functools.partial(jax.jit, static_argnames=('cfg', 'orders', 'draws'))
def _flips(cfg: ModelConfig, params, src_BxS, src_len_B, tokens_BxT, orders: tuple, key, draws: int):
  memory, state = encode(cfg, params, src_BxS, src_len_B)
  positions = src_BxS.shape[1]
  valid_BxS = jnp.arange(positions)[None, :] < src_len_B[:, None]
  ks_K = jnp.arange(1, positions + 1)

  def body(st, xs):
    token_B, t = xs
    new, logits_BxV, w_BxS = decode_step(cfg, params, memory, st, token_B)
    w_BxS = jnp.where(valid_BxS, w_BxS, 0.0)
    best_B = most_probable(logits_BxV)

    def p_best(weights_BxS):  # rows are independent: the gradient of the sum is each row's own
      probs_BxV = jax.nn.softmax(given_step(cfg, params, memory, st, token_B, weights_BxS)[1], -1)
      return jnp.sum(jnp.take_along_axis(probs_BxV, best_B[:, None], 1))

    grad_BxS = jax.grad(p_best)(w_BxS)
    ranking = {'attention': w_BxS, 'gradient': grad_BxS, 'gradient_x_attention': grad_BxS * w_BxS}
    for d in range(draws):  # their random order: 5 draws, each its own shuffle of the step's positions
      ranking[f'random/{d}'] = jax.random.uniform(jax.random.fold_in(jax.random.fold_in(key, t), d), w_BxS.shape)
    out = []
    for name in _expanded(orders, draws):
      score_BxS = jnp.where(valid_BxS, ranking[name], -jnp.inf)
      rank_BxS = jnp.argsort(jnp.argsort(-score_BxS, axis=-1, stable=True), axis=-1, stable=True)
      removals_KxBxS = zero_and_renormalise(w_BxS, rank_BxS, valid_BxS)
      logits_KxBxV = jax.vmap(lambda wk: given_step(cfg, params, memory, st, token_B, wk)[1])(removals_KxBxS)
      flip_KxB = (most_probable(logits_KxBxV) != best_B[None]) & (ks_K[:, None] <= src_len_B[None])
      flipped_B = jnp.any(flip_KxB, 0)
      removed_B = jnp.where(flipped_B, jnp.argmax(flip_KxB, 0) + 1, 0)
      mass_B = jnp.sum(jnp.where(valid_BxS & (rank_BxS < removed_B[:, None]), w_BxS, 0.0), -1)
      out.append((flipped_B, removed_B, mass_B))
    return new, out

  xs = (teacher_inputs(tokens_BxT).T, jnp.arange(tokens_BxT.shape[1]))
  _, out = jax.lax.scan(body, state, xs)
  return [tuple(x.T for x in o) for o in out]


def _expanded(orders: tuple, draws: int) -> list[str]:
  """The rankings `_flips` runs: every order, 'random' as its `draws` draws."""
  return [n for o in orders for n in ([f'random/{d}' for d in range(draws)] if o == 'random' else [o])]


def serrano_smith_flip(
  cfg: ModelConfig,
  params,
  src_BxS,
  src_len_B,
  tokens_BxT,
  tgt_len_B,
  orders: Sequence[str] = ORDERS,
  seed: int = 0,
  random_draws: int = RANDOM_DRAWS,
) -> dict:
  """Serrano & Smith 2019, "Is Attention Interpretable?", the decision-flip test on sets of weights: at
  every step t < tgt_len, the attention weights are zeroed one at a time in a ranking's order, the remaining
  weights renormalised to sum 1 (all 0 once nothing is left, as their code's L1 normalisation gives), until the
  decision (the most probable token) differs from the original step's. Every removal is a counterfactual at step t
  only, from the original state s_{t-1}. The rankings (`orders`), each computed once from the original step:

    attention             the weights, largest first
    random                a uniformly random order, `random_draws` of them (their 5; drawn from `seed`, the step,
                          the draw and the batch row)
    gradient              d p(decision) / d a_i, largest (signed) first: the gradient of the decided token's
                          probability with respect to the weight the context reads, the rest of the step fixed
    gradient_x_attention  that gradient times the weight, largest first

  Differences: their decision is a document classifier's label; here each decoder step's token is one decision.
  Returns {'mask': B x T, order: {'flipped': B x T, 'removed': weights removed at the first flip (0: never),
  'fraction': removed / source length (NaN: never flips), 'mass': attention removed at the first flip}} (for
  random, each with a leading axis of the draws) and, per order, 'counts': {'flipped', 'steps', 'fraction_sum'}
  summed over the draws (the mean fraction over the steps that flip is fraction_sum / flipped, all draws pooled as
  their 'avg_random' pools them); 'no_order_flips': the steps at which no order (no draw) flips, of all steps. Cost per sentence and target position: one gradient and S decoder steps per order."""
  unknown = sorted(set(orders) - set(ORDERS))
  if unknown or not orders:
    raise ConfigError(f'Serrano & Smith orders {list(orders)}: valid are {", ".join(ORDERS)}')
  orders = tuple(orders)
  if random_draws < 1:
    raise ConfigError(f'Serrano & Smith random_draws={random_draws}: give at least 1 (theirs: 5)')
  out = _flips(cfg, params, src_BxS, src_len_B, tokens_BxT, orders, jax.random.key(seed), random_draws)
  mask = step_mask(tokens_BxT, tgt_len_B)
  length_Bx1 = np.asarray(src_len_B)[:, None].astype(np.float64)
  by_name = dict(zip(_expanded(orders, random_draws), out))
  result, any_flip = {'mask': mask}, np.zeros(mask.shape, bool)
  for name in orders:
    draws = [by_name[f'random/{d}'] for d in range(random_draws)] if name == 'random' else [by_name[name]]
    flipped = np.stack([np.asarray(f) & mask for f, _, _ in draws])  # D x B x T (D = 1 but for random)
    removed = np.stack([np.where(mask, np.asarray(r), 0) for _, r, _ in draws])
    mass = np.stack([np.asarray(m) for _, _, m in draws])
    fraction = np.where(flipped, removed / length_Bx1, np.nan)
    any_flip |= flipped.any(0)
    arrays = {'flipped': flipped, 'removed': removed, 'fraction': fraction, 'mass': np.where(flipped, mass, np.nan)}
    result[name] = {k: v if name == 'random' else v[0] for k, v in arrays.items()}  # one draw: B x T
    result[name]['counts'] = {  # over every draw: 'steps' is steps x draws for random, as their avg_random pools
      'flipped': int(flipped.sum()),
      'steps': int(mask.sum()) * len(draws),
      'fraction_sum': float(np.nansum(fraction)),
    }
  result['no_order_flips'] = {'steps': int((mask & ~any_flip).sum()), 'of': int(mask.sum())}
  return result
