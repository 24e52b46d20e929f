"""Serrano & Smith 2019, "Is Attention Interpretable?": at each step, the attention weights zeroed one at a time
in a ranking's order (attention, random, gradient, gradient x attention), the rest renormalised, until the decision
flips; the fraction of weights removed at the first flip (`serrano_smith_flip`), their single-weight test (the top
weight zeroed against a random other, `single_weight`) and their per-step comparison of two rankings (`paired`).
Reference code: serrano-s/attn-tests, test_model.py and process_test_outputs.py. Conventions:
attnmt/faithfulness/measures.py.
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
  jsd,
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
    p_BxV = jax.nn.softmax(logits_BxV, -1)
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
      got = {'flipped': flipped_B, 'removed': removed_B, 'mass': mass_B}
      if not name.startswith('random/'):  # the single-weight test: the top weight against a random other one
        u_B = jax.random.uniform(jax.random.fold_in(jax.random.fold_in(key, t), draws + len(out)), best_B.shape)
        other_B = 1 + jnp.floor(u_B * (src_len_B - 1)).astype(jnp.int32)  # a rank in 1..n-1, uniformly
        at_BxS = valid_BxS & (rank_BxS == other_B[:, None])
        other_BxS = jnp.where(at_BxS, 0.0, w_BxS)
        other_BxS = other_BxS / jnp.maximum(jnp.sum(other_BxS, -1, keepdims=True), 1e-30)
        logits_other_BxV = given_step(cfg, params, memory, st, token_B, other_BxS)[1]
        got.update(
          jsd_top=jsd(jax.nn.softmax(logits_KxBxV[0], -1), p_BxV),
          jsd_other=jsd(jax.nn.softmax(logits_other_BxV, -1), p_BxV),
          weight_top=jnp.sum(jnp.where(valid_BxS & (rank_BxS == 0), w_BxS, 0.0), -1),
          weight_other=jnp.sum(jnp.where(at_BxS, w_BxS, 0.0), -1),
          position_other=jnp.argmax(at_BxS, -1),
          flip_top=flip_KxB[0],
          flip_other=most_probable(logits_other_BxV) != best_B,
        )
      out.append(got)
    return new, out

  xs = (teacher_inputs(tokens_BxT).T, jnp.arange(tokens_BxT.shape[1]))
  _, out = jax.lax.scan(body, state, xs)
  return [{k: v.T for k, v in o.items()} for o in out]


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
  As their process_test_outputs.py, steps whose source has one position are left out (ATTN_SEQ_LEN > 1: counted in
  'filtered'); their avg_random further keeps only the instances where their from-bottom order flips, an order not
  run here, so random pools every step.
  Returns {'mask': B x T (the steps counted), 'filtered', order: {'flipped': B x T, 'removed': weights removed at
  the first flip (0: never), 'fraction': removed / source length (NaN: never flips), 'mass': attention removed at
  the first flip}} (for random, each with a leading axis of the draws) and, per order, 'counts': {'flipped',
  'steps', 'fraction_sum'} summed over the draws (the mean fraction over the steps that flip is fraction_sum /
  flipped, all draws pooled as their 'avg_random' pools them); per order but random, 'single' (`single_weight`:
  the top weight zeroed against one other, drawn from `seed`); 'paired': {'attention_vs_<order>': `paired`} for
  gradient and gradient x attention; 'no_order_flips': the steps at which no order (no draw) flips, of all steps.
  Cost per sentence and target position: one gradient and S + 1 decoder steps per order."""
  unknown = sorted(set(orders) - set(ORDERS))
  if unknown or not orders:
    raise ConfigError(f'Serrano & Smith orders {list(orders)}: valid are {", ".join(ORDERS)}')
  orders = tuple(orders)
  if random_draws < 1:
    raise ConfigError(f'Serrano & Smith random_draws={random_draws}: give at least 1 (theirs: 5)')
  out = _flips(cfg, params, src_BxS, src_len_B, tokens_BxT, orders, jax.random.key(seed), random_draws)
  src_len = np.asarray(src_len_B)
  steps = step_mask(tokens_BxT, tgt_len_B)
  mask = steps & (src_len > 1)[:, None]  # their instance filter: ATTN_SEQ_LEN > 1
  length_Bx1 = src_len[:, None].astype(np.float64)
  by_name = dict(zip(_expanded(orders, random_draws), out))
  result = {'mask': mask, 'filtered': int((steps & ~mask).sum())}
  any_flip = np.zeros(mask.shape, bool)
  for name in orders:
    draws = [by_name[f'random/{d}'] for d in range(random_draws)] if name == 'random' else [by_name[name]]
    flipped = np.stack([np.asarray(g['flipped']) & mask for g in draws])  # D x B x T (D = 1 but for random)
    removed = np.stack([np.where(mask, np.asarray(g['removed']), 0) for g in draws])
    mass = np.stack([np.asarray(g['mass']) for g in draws])
    fraction = np.where(flipped, removed / length_Bx1, np.nan)
    any_flip |= flipped.any(0)
    arrays = {'flipped': flipped, 'removed': removed, 'fraction': fraction, 'mass': np.where(flipped, mass, np.nan)}
    result[name] = {k: v if name == 'random' else v[0] for k, v in arrays.items()}  # one draw: B x T
    result[name]['counts'] = {  # over every draw: 'steps' is steps x draws for random, as their avg_random pools
      'flipped': int(flipped.sum()),
      'steps': int(mask.sum()) * len(draws),
      'fraction_sum': float(np.nansum(fraction)),
    }
    if name != 'random':
      result[name]['single'] = single_weight(draws[0], mask)
  result['no_order_flips'] = {'steps': int((mask & ~any_flip).sum()), 'of': int(mask.sum())}
  result['paired'] = {
    f'attention_vs_{o}': paired(result['attention']['removed'], result[o]['removed'], mask)
    for o in orders
    if 'attention' in orders and o not in ('attention', 'random')
  }
  return result


def single_weight(got: dict, mask: np.ndarray) -> dict:
  """Serrano & Smith's single-weight test (Sec. 4; test_model.py get_dec_flip_stats_for_rand_nontop, and
  process_test_outputs.py get_vsrand_2x2_decflip_jointdist): at each step, the ranking's top weight zeroed (the rest
  renormalised) against one other weight drawn uniformly from the rest ('position_other'); the JSD (nats) of each output distribution
  from the original's, their difference and the weights' difference (their Figure 2's axes), and whether each flips
  the decision (their 2 x 2 table). Returns B x T arrays (NaN / False where `mask` fails) and 'counts' summed over
  them: 'steps', 'jsd_diff_sum' (top minus other), 'jsd_top_larger' (steps where it is positive), 'weight_diff_sum',
  and the 2 x 2 counts 'both', 'only_top', 'only_other', 'neither'."""
  top, other = np.asarray(got['jsd_top'], np.float64), np.asarray(got['jsd_other'], np.float64)
  diff = np.where(mask, top - other, np.nan)
  weight_top = np.where(mask, np.asarray(got['weight_top'], np.float64), np.nan)
  weight_other = np.where(mask, np.asarray(got['weight_other'], np.float64), np.nan)
  weight_diff = weight_top - weight_other
  flip_top, flip_other = np.asarray(got['flip_top']) & mask, np.asarray(got['flip_other']) & mask
  return {
    'jsd_top': np.where(mask, top, np.nan),
    'jsd_other': np.where(mask, other, np.nan),
    'jsd_diff': diff,
    'weight_top': weight_top,
    'weight_other': weight_other,
    'weight_diff': weight_diff,
    'flip_top': flip_top,
    'flip_other': flip_other,
    'position_other': np.where(mask, np.asarray(got['position_other']), -1),
    'counts': {
      'steps': int(mask.sum()),
      'jsd_diff_sum': float(np.nansum(diff)),
      'jsd_top_larger': int(np.sum(diff > 0)),
      'weight_diff_sum': float(np.nansum(weight_diff)),
      'both': int((flip_top & flip_other).sum()),
      'only_top': int((flip_top & ~flip_other).sum()),
      'only_other': int((~flip_top & flip_other & mask).sum()),
      'neither': int((mask & ~flip_top & ~flip_other).sum()),
    },
  }


def paired(removed_a: np.ndarray, removed_b: np.ndarray, mask: np.ndarray) -> dict:
  """Serrano & Smith's per-instance comparison of two rankings (process_test_outputs.py
  print_per_instance_removal_efficiency_comparison): over the steps where `mask` holds and at least one of the two
  flips (`removed`: weights removed at the first flip, 0 where it never flips), whether ranking a needs fewer
  removals ('a_sooner': fewer, or a flips and b never does), b fewer ('b_sooner') or as many ('same'); 'of' the
  steps compared, 'neither' those where neither flips (left out, as theirs). Counts."""
  a, b = np.asarray(removed_a), np.asarray(removed_b)
  a_flips, b_flips = mask & (a > 0), mask & (b > 0)
  both = a_flips & b_flips
  return {
    'a_sooner': int((both & (a < b)).sum() + (a_flips & ~b_flips).sum()),
    'b_sooner': int((both & (b < a)).sum() + (b_flips & ~a_flips).sum()),
    'same': int((both & (a == b)).sum()),
    'of': int((a_flips | b_flips).sum()),
    'neither': int((mask & ~a_flips & ~b_flips).sum()),
  }
