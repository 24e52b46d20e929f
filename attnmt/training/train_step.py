"""The loss, the optimiser and one training step: pure functions the experiments and tests share.

A batch is a dict of arrays: `src` (B x S), `src_len` (B), `tgt_in` (B x T, BOS first), `tgt_out`
(B x T, EOS last, PAD after) and `tgt_len` (B); with supervised attention also `alignment` (B x T x S,
1 where output token t links to source token s). The step is a pure function of (state, batch), so
callers `jit` it, `vmap` it over seeds, or shard it.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax
from flax import struct

from attnmt.model.config import ModelConfig
from attnmt.model.seq2seq import Seq2Seq, init_params


ALIGNMENT_EPS = 1e-6  # alignment_loss: -log(a + eps) stays finite where a normaliser gives a = 0


def alignment_loss(
  weights_BxTxS: jax.Array, gold_BxTxS: jax.Array, src_len_B: jax.Array, tgt_len_B: jax.Array
) -> tuple[jax.Array, jax.Array]:
  """Supervised attention: cross-entropy of the attention weights against gold alignments, summed over the
  linked output positions, and their count (the loss is the sum over the count).

      g_ti = A_ti / sum_j A_tj        (the gold links of output position t, uniform over its source positions)
      L_t  = -sum_i g_ti log(a_ti + eps)

  for every output position t < tgt_len with at least one link to a source position i < src_len; other
  positions (unaligned words such as "und", EOS, padding) count for nothing. Liu et al. 2016 ("Neural machine
  translation with supervised attention", the CE variant) and Mi et al. 2016 ("Supervised attentions for
  neural machine translation") train the RNN attention this way, the loss added to the translation loss
  times a weight.

  eps (ALIGNMENT_EPS = 1e-6) rather than a squared error (Mi et al.'s Euclidean variant): the sparse
  normalisers (sparsemax, entmax15) give exact zeros, where log a is -inf and its gradient inf. With eps
  the loss is at most -log eps = 13.8 per position and d L / d a_i = -g_i / (a_i + eps) is finite (at
  most 1e6, which global-norm clipping bounds), while above ~1e-4 the loss is the cross-entropy itself.
  A squared error, sum_i (a_i - g_i)^2, is bounded too but its gradient vanishes when softmax attention
  saturates on a wrong position (the softmax Jacobian diag(a) - a a^T is then near 0), which the
  cross-entropy's d L / d e = a - g does not. With a sparse normaliser no loss of the weights reaches a
  gold position outside the support (the normaliser's Jacobian is zero there): the loss moves weight
  within the support, and the shared parameters carry the rest.
  """
  weights = weights_BxTxS.astype(jnp.result_type(weights_BxTxS.dtype, jnp.float32))
  links_BxTxS = _links(gold_BxTxS, src_len_B, tgt_len_B).astype(weights.dtype)
  n_links_BxT = jnp.sum(links_BxTxS, axis=-1)
  linked_BxT = n_links_BxT > 0
  g_BxTxS = links_BxTxS / jnp.maximum(n_links_BxT, 1)[..., None]
  ce_BxT = -jnp.sum(g_BxTxS * jnp.log(weights + ALIGNMENT_EPS), axis=-1)
  return jnp.sum(jnp.where(linked_BxT, ce_BxT, 0.0)), jnp.sum(linked_BxT)


def _links(gold_BxTxS: jax.Array, src_len_B: jax.Array, tgt_len_B: jax.Array) -> jax.Array:
  """The gold links inside both sentences' lengths (0 elsewhere)."""
  tgt_valid_BxT = jnp.arange(gold_BxTxS.shape[1])[None, :] < tgt_len_B[:, None]
  src_valid_BxS = jnp.arange(gold_BxTxS.shape[2])[None, :] < src_len_B[:, None]
  return jnp.where(tgt_valid_BxT[:, :, None] & src_valid_BxS[:, None, :], gold_BxTxS, 0)


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
  instead: 4 fewer passes over the parameters per update (the measured gain: benchmarks/README.md, "a clip
  that fuses").
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


class LossParts(NamedTuple):
  """What loss_fn adds up, for metrics."""

  total: jax.Array  # summed token cross-entropy
  count: jax.Array  # target tokens
  terms: dict  # the auxiliary losses that are trained ('coverage_loss', 'alignment_loss'), each a mean


def summed_loss(cfg: ModelConfig, params, batch: dict, rng, train: bool, label_smoothing: float = 0.0):
  """(summed token cross-entropy, token count, teacher-forced attention weights B x T x S).

  The cross-entropy equals that of the model's logits (tests/references.py); the model applies its own
  vocabulary projection (`Seq2Seq.token_nll`, fused with the loss: no B x T x V logits are stored).
  """
  labels_BxT = batch['tgt_out']
  nll_BxT, weights_BxTxS = Seq2Seq(cfg).apply(
    {'params': params},
    batch['src'],
    batch['src_len'],
    batch['tgt_in'],
    labels_BxT,
    train=train,
    label_smoothing=label_smoothing,
    rngs={'dropout': rng} if train else None,
    method=Seq2Seq.token_nll,
  )
  mask_BxT = _target_mask(batch)
  return jnp.sum(jnp.where(mask_BxT, nll_BxT, 0.0)), jnp.sum(mask_BxT), weights_BxTxS


def _target_mask(batch: dict) -> jax.Array:
  """B x T: the target positions the loss counts (below `tgt_len`)."""
  return jnp.arange(batch['tgt_out'].shape[1])[None, :] < batch['tgt_len'][:, None]


def loss_fn(
  cfg: ModelConfig,
  params,
  batch: dict,
  rng,
  train: bool,
  label_smoothing: float = 0.0,
  coverage_loss_weight: float = 0.0,
  alignment_loss_weight: float = 0.0,
) -> tuple[jax.Array, LossParts]:
  """The training objective and its LossParts.

  The objective is the mean token cross-entropy (`summed_loss`), plus
  - `coverage_loss_weight` times the coverage loss per target token (`coverage_loss`), and
  - `alignment_loss_weight` times the mean alignment loss over the batch's linked output positions
    (`alignment_loss`; the batch must hold gold `alignment`s B x T x S).
  A term whose weight is 0 is not computed at all: the objective and its gradient are then exactly
  those without it.
  """
  total, count, weights_BxTxS = summed_loss(cfg, params, batch, rng, train, label_smoothing)
  objective, terms = total / jnp.maximum(count, 1), {}
  if coverage_loss_weight:
    terms['coverage_loss'] = coverage_loss(weights_BxTxS, batch['tgt_len']) / jnp.maximum(count, 1)
    objective = objective + coverage_loss_weight * terms['coverage_loss']
  if alignment_loss_weight:
    if 'alignment' not in batch:
      raise ValueError('alignment_loss_weight > 0 needs gold alignments in the batch (batch["alignment"], B x T x S)')
    align_sum, align_count = alignment_loss(weights_BxTxS, batch['alignment'], batch['src_len'], batch['tgt_len'])
    terms['alignment_loss'] = align_sum / jnp.maximum(align_count, 1)
    objective = objective + alignment_loss_weight * terms['alignment_loss']
  return objective, LossParts(total, count, terms)


def train_step(
  cfg: ModelConfig,
  optimizer: optax.GradientTransformation,
  state: TrainState,
  batch: dict,
  label_smoothing: float = 0.0,
  coverage_loss_weight: float = 0.0,
  alignment_loss_weight: float = 0.0,
) -> tuple[TrainState, dict]:
  """One optimiser update on one batch; returns the new state and metrics: `loss` (the mean token
  cross-entropy, the translation loss alone), `loss_sum`, `tokens`, `grad_norm`, and each auxiliary
  loss that is trained (`coverage_loss`, `alignment_loss`; loss_fn)."""
  rng, step_rng = jax.random.split(state.rng)
  grad_fn = jax.value_and_grad(loss_fn, argnums=1, has_aux=True)
  (_, parts), grads = grad_fn(
    cfg, state.params, batch, step_rng, True, label_smoothing, coverage_loss_weight, alignment_loss_weight
  )
  updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
  params = optax.apply_updates(state.params, updates)
  return TrainState(state.step + 1, params, opt_state, rng), _metrics(parts.total, parts.count, grads, parts.terms)


def _metrics(total, count, grads, terms: dict) -> dict:
  """A step's metrics: the mean token cross-entropy, its sum, the tokens, the gradient's norm and the trained
  auxiliary losses (each a mean)."""
  return {
    'loss': total / jnp.maximum(count, 1),
    'loss_sum': total,
    'tokens': count,
    'grad_norm': optax.tree.norm(grads),
    **terms,
  }


def token_count(batch: dict) -> jax.Array:
  """The target tokens of `batch` that the loss counts (positions below `tgt_len`): loss_fn's denominator."""
  return jnp.sum(_target_mask(batch))


def _linked_count(batch: dict) -> jax.Array:
  """The output positions with at least one gold link inside the source: the alignment loss's denominator."""
  return jnp.sum(jnp.sum(_links(batch['alignment'], batch['src_len'], batch['tgt_len']), axis=-1) > 0)


def shard_gradients(
  cfg: ModelConfig,
  params,
  batch: dict,
  rng,
  index,
  shards: int,
  label_smoothing: float = 0.0,
  coverage_loss_weight: float = 0.0,
  alignment_loss_weight: float = 0.0,
) -> tuple[Any, dict]:
  """One of `shards` equal blocks of the batch's rows (block `index`, traced; when the rows do not divide, empty
  rows fill the last block): the gradient of that block's share
  of loss_fn's objective over the *whole* batch, and the block's sums (cross-entropy, tokens, the trained
  auxiliary losses and their counts). The shards' gradients add up to the whole batch's gradient, up to
  rounding: every mean's denominator is the whole batch's count, read from the full batch.

  `rng` is the state's key: the step's dropout key (train_step's split) folded with `index`, so each block
  has its own dropout stream (the masks differ from the one-program step's; their distribution does not)."""
  count = jnp.maximum(token_count(batch), 1)
  linked = jnp.maximum(_linked_count(batch), 1) if alignment_loss_weight else None
  rows = batch['src'].shape[0]
  size = -(-rows // shards)
  if size * shards != rows:  # empty rows (length 0) fill the last block: they count for nothing
    batch = {k: jnp.pad(v, [(0, size * shards - rows)] + [(0, 0)] * (v.ndim - 1)) for k, v in batch.items()}
  block = {k: jax.lax.dynamic_slice_in_dim(v, index * size, size, 0) for k, v in batch.items()}
  dropout_rng = jax.random.fold_in(jax.random.split(rng)[1], index)

  def objective(p):
    total, n, weights_BxTxS = summed_loss(cfg, p, block, dropout_rng, True, label_smoothing)
    sums = {'total': total, 'count': n}
    value = total / count
    if coverage_loss_weight:
      sums['coverage_loss'] = coverage_loss(weights_BxTxS, block['tgt_len'])
      value = value + coverage_loss_weight * sums['coverage_loss'] / count
    if alignment_loss_weight:
      sums['alignment_loss'], sums['alignment_count'] = alignment_loss(
        weights_BxTxS, block['alignment'], block['src_len'], block['tgt_len']
      )
      value = value + alignment_loss_weight * sums['alignment_loss'] / linked
    return value, sums

  grads, sums = jax.grad(objective, has_aux=True)(params)
  return grads, sums


def apply_gradients(optimizer: optax.GradientTransformation, state: TrainState, grads: tuple, sums: tuple):
  """The update from the shards' gradients and sums (shard_gradients, one per shard): their sum is the
  batch's gradient. Returns the new state and train_step's metrics."""
  total_grads = jax.tree.map(lambda *g: functools.reduce(jnp.add, g), *grads)
  added = jax.tree.map(lambda *x: functools.reduce(jnp.add, x), *sums)
  updates, opt_state = optimizer.update(total_grads, state.opt_state, state.params)
  params = optax.apply_updates(state.params, updates)
  terms = {}
  if 'coverage_loss' in added:
    terms['coverage_loss'] = added['coverage_loss'] / jnp.maximum(added['count'], 1)
  if 'alignment_loss' in added:
    terms['alignment_loss'] = added['alignment_loss'] / jnp.maximum(added['alignment_count'], 1)
  rng, _ = jax.random.split(state.rng)
  metrics = _metrics(added['total'], added['count'], total_grads, terms)
  return TrainState(state.step + 1, params, opt_state, rng), metrics


def init_train_states(cfg: ModelConfig, optimizer: optax.GradientTransformation, seeds) -> TrainState:
  """K fresh states stacked along a leading axis, one per seed: the input of seeds.seed_functions' step.

  Seeds are initialised one by one and stacked: under `vmap` the orthogonal initialiser becomes a
  batched QR, whose jaxlib CPU kernel (ParallelBatchMap) can deadlock on a busy 2-core thread pool
  (every thread waiting, no CPU used; docs/troubleshooting.md).
  """
  init_one = jax.jit(init_train_state, static_argnums=(0, 1))
  states = [init_one(cfg, optimizer, jnp.int32(s)) for s in seeds]
  return _stack(states)


@jax.jit
def _stack(trees):
  # One program for the whole tree (stacked leaf by leaf, each leaf would compile its own).
  return jax.tree.map(lambda *xs: jnp.stack(xs), *trees)


# What the learning rate does after the warm-up, per train.schedule.
AFTER_WARMUP = {
  'constant': lambda t, warmup: optax.constant_schedule(t.learning_rate),
  'cosine': lambda t, warmup: optax.cosine_decay_schedule(t.learning_rate, max(t.num_steps - warmup, 1)),
  'rsqrt': lambda t, warmup: lambda s: t.learning_rate * jnp.sqrt(warmup / (s + warmup)),
}


def learning_rate_schedule(t) -> optax.Schedule:
  """train.learning_rate after a linear warm-up of train.warmup_steps, then train.schedule (AFTER_WARMUP)."""
  warmup = max(int(t.warmup_steps), 1)
  ramp = optax.linear_schedule(0.0, t.learning_rate, warmup)
  after = AFTER_WARMUP[t.schedule](t, warmup)  # train.schedule's choices (settings.TRAIN) are these keys
  return optax.join_schedules([ramp, after], [warmup])
