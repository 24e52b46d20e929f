"""The loss, the optimiser and one training step: pure functions the experiments and tests share.

A batch is a dict of arrays: `src` (B x S), `src_len` (B), `tgt_in` (B x T, BOS first), `tgt_out`
(B x T, EOS last, PAD after) and `tgt_len` (B). The step is a pure function of (state, batch), so
callers `jit` it, `vmap` it over seeds, or shard it.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import optax
from flax import struct

from attnmt import fused_loss
from attnmt.config import ModelConfig
from attnmt.model import Seq2Seq, init_params


def masked_cross_entropy(
  logits_BxTxV: jax.Array, labels_BxT: jax.Array, length_B: jax.Array, label_smoothing: float = 0.0
) -> tuple[jax.Array, jax.Array]:
  """Summed token cross-entropy over the first `length` positions of each row, and the token count.

  With label smoothing eps the target is (1 - eps) on the label plus eps spread uniformly over the
  vocabulary (Szegedy et al. 2016).
  """
  # -log p(y) = logsumexp(logits) - logits[y]. The label's logit is picked by a comparison with an
  # iota rather than a gather, so its gradient fuses with the softmax's instead of scattering.
  logits_BxTxV = logits_BxTxV.astype(jnp.float32)
  lse_BxT = jax.nn.logsumexp(logits_BxTxV, axis=-1)
  is_label_BxTxV = jnp.arange(logits_BxTxV.shape[-1]) == labels_BxT[..., None]
  nll_BxT = lse_BxT - jnp.sum(jnp.where(is_label_BxTxV, logits_BxTxV, 0.0), axis=-1)
  if label_smoothing:  # mean_v log p(v) = mean_v logits_v - logsumexp(logits)
    mean_logp_BxT = jnp.mean(logits_BxTxV, axis=-1) - lse_BxT
    nll_BxT = (1.0 - label_smoothing) * nll_BxT - label_smoothing * mean_logp_BxT
  mask_BxT = jnp.arange(labels_BxT.shape[1])[None, :] < length_B[:, None]
  return jnp.sum(jnp.where(mask_BxT, nll_BxT, 0.0)), jnp.sum(mask_BxT)


class TrainState(struct.PyTreeNode):
  step: jax.Array
  params: Any
  opt_state: Any
  rng: jax.Array


def clip_by_global_norm(max_norm: float) -> optax.GradientTransformation:
  """`optax.clip_by_global_norm` as one scalar factor: g * min(1, max_norm / ||g||).

  The same clipping (bit for bit when ||g|| < max_norm, equal up to rounding otherwise) and the same state
  (`optax.EmptyState`, so checkpoints restore either way). optax divides every gradient by the
  norm, and XLA:CPU, which counts a division as expensive, then writes the clipped gradients out
  once more and Adam's two moment updates read both copies; a multiplication fuses into them
  instead. At the bench config that is 4 fewer passes over the 12.5 M parameters, 20.4 → 16.4 ms
  per update (benchmarks/README.md, "a clip that fuses").
  """

  def update(updates, state, params=None):
    del params
    norm = optax.tree.norm(updates)
    scale = jnp.where(norm < max_norm, 1.0, max_norm / norm)
    return jax.tree.map(lambda g: g * scale.astype(g.dtype), updates), state

  return optax.GradientTransformation(lambda params: optax.EmptyState(), update)


def make_optimizer(learning_rate, clip_norm: float = 1.0) -> optax.GradientTransformation:
  """Adam after global-norm clipping; `learning_rate` is a float or an optax schedule. `clip_norm` 0 means
  no clipping (as in fairseq and OpenNMT): the gradients pass unchanged, with the same optimiser state."""
  return optax.chain(clip_by_global_norm(clip_norm if clip_norm > 0 else float('inf')), optax.adam(learning_rate))


def init_train_state(cfg: ModelConfig, optimizer: optax.GradientTransformation, seed) -> TrainState:
  """A fresh state from an integer seed (a traced one works too, so seeds can be vmapped)."""
  init_rng, rng = jax.random.split(jax.random.key(seed))
  params = init_params(cfg, init_rng)
  return TrainState(jnp.zeros((), jnp.int32), params, optimizer.init(params), rng)


def coverage_loss(weights_BxTxS: jax.Array, tgt_len_B: jax.Array) -> jax.Array:
  """See et al. 2017, Eq. 12, summed over the target positions within `tgt_len`:
  sum_t sum_i min(a_ti, c_ti), with c_t = sum_{t'<t} a_t' the coverage before step t. It is 0 when no
  source position is attended twice, and grows with every repeated look."""
  weights_BxTxS = weights_BxTxS.astype(jnp.promote_types(weights_BxTxS.dtype, jnp.float32))
  coverage_BxTxS = jnp.cumsum(weights_BxTxS, axis=1) - weights_BxTxS
  per_step_BxT = jnp.sum(jnp.minimum(weights_BxTxS, coverage_BxTxS), axis=-1)
  mask_BxT = jnp.arange(weights_BxTxS.shape[1])[None, :] < tgt_len_B[:, None]
  return jnp.sum(jnp.where(mask_BxT, per_step_BxT, 0.0))


def summed_loss(cfg: ModelConfig, params, batch: dict, rng, train: bool, label_smoothing: float = 0.0):
  """(summed token cross-entropy, token count, teacher-forced attention weights B x T x S).

  The cross-entropy equals `masked_cross_entropy` of the model's logits; the vocabulary projection runs
  inside `fused_loss.projected_nll`, whose gradient avoids extra passes over the B x T x V logits.
  """
  hidden_BxTxO, weights_BxTxS = Seq2Seq(cfg).apply(
    {'params': params},
    batch['src'],
    batch['src_len'],
    batch['tgt_in'],
    train=train,
    rngs={'dropout': rng} if train else None,
    method=Seq2Seq.features,
  )
  labels_BxT = batch['tgt_out']
  nll_N = fused_loss.projected_nll(
    hidden_BxTxO.reshape(-1, hidden_BxTxO.shape[-1]),
    params['decoder']['W_out'],
    params['decoder']['b_out'],
    labels_BxT.reshape(-1),
    label_smoothing,
  )
  mask_BxT = jnp.arange(labels_BxT.shape[1])[None, :] < batch['tgt_len'][:, None]
  return jnp.sum(jnp.where(mask_BxT, nll_N.reshape(labels_BxT.shape), 0.0)), jnp.sum(mask_BxT), weights_BxTxS


def loss_fn(
  cfg: ModelConfig,
  params,
  batch: dict,
  rng,
  train: bool,
  label_smoothing: float = 0.0,
  coverage_loss_weight: float = 0.0,
):
  """The training objective and (summed cross-entropy, token count, auxiliary terms) for metrics.

  The objective is the mean token cross-entropy (`summed_loss`), plus `coverage_loss_weight` times the
  coverage loss per target token (`coverage_loss`; its value per token is the auxiliary term
  'coverage_loss' when the weight is not 0).
  """
  total, count, weights_BxTxS = summed_loss(cfg, params, batch, rng, train, label_smoothing)
  per_token = 1.0 / jnp.maximum(count, 1)
  objective, terms = total * per_token, {}
  if coverage_loss_weight:
    terms['coverage_loss'] = coverage_loss(weights_BxTxS, batch['tgt_len']) * per_token
    objective = objective + coverage_loss_weight * terms['coverage_loss']
  return objective, (total, count, terms)


def train_step(
  cfg: ModelConfig,
  optimizer: optax.GradientTransformation,
  state: TrainState,
  batch: dict,
  label_smoothing: float = 0.0,
  coverage_loss_weight: float = 0.0,
) -> tuple[TrainState, dict]:
  """One optimiser update on one batch; returns the new state and metrics (the objective, tokens,
  grad norm, and each auxiliary loss term per token)."""
  rng, step_rng = jax.random.split(state.rng)
  grad_fn = jax.value_and_grad(loss_fn, argnums=1, has_aux=True)
  (loss, (total, count, terms)), grads = grad_fn(
    cfg, state.params, batch, step_rng, True, label_smoothing, coverage_loss_weight
  )
  updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
  params = optax.apply_updates(state.params, updates)
  metrics = {'loss': loss, 'loss_sum': total, 'tokens': count, 'grad_norm': optax.tree.norm(grads), **terms}
  return TrainState(state.step + 1, params, opt_state, rng), metrics


def init_train_states(cfg: ModelConfig, optimizer: optax.GradientTransformation, seeds) -> TrainState:
  """K fresh states stacked along a leading axis, one per seed: the input of `vmapped_train_step`.

  Seeds are initialised one by one and stacked: under `vmap` the orthogonal initialiser becomes a
  batched QR, whose jaxlib CPU kernel (ParallelBatchMap) deadlocks on a busy 2-core thread pool
  (seen with jaxlib 0.10.2: every thread waiting, no CPU used).
  """
  init_one = jax.jit(init_train_state, static_argnums=(0, 1))
  states = [init_one(cfg, optimizer, jnp.int32(s)) for s in seeds]
  return jax.tree.map(lambda *xs: jnp.stack(xs), *states)


def vmapped_train_step(
  cfg: ModelConfig,
  optimizer: optax.GradientTransformation,
  states: TrainState,
  batches: dict,
  label_smoothing: float = 0.0,
  coverage_loss_weight: float = 0.0,
) -> tuple[TrainState, dict]:
  """K independent runs stepped as one program: `states` and `batches` carry a leading axis K.

  The K models share nothing but the compiled program, so K small runs fill a machine that one
  cannot. Jit it like `train_step`: `jax.jit(functools.partial(vmapped_train_step, cfg, opt),
  donate_argnums=0)`; metrics come back with the leading axis K.
  """
  step = lambda state, batch: train_step(cfg, optimizer, state, batch, label_smoothing, coverage_loss_weight)
  return jax.vmap(step)(states, batches)
