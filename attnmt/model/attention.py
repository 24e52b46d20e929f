"""Attention: a score (attnmt/model/scores.py), an alignment window (attnmt/model/windows.py) with a normaliser
(attnmt/model/normalizers.py), the context.

    e_i = score(q, h_i)      a_S = window(e_S, valid positions), normalised      c = sum_i a_i h_i

Written for one sentence as the equations read; `jax.vmap` batches them. Letters in names:
S source positions, Q query size, H annotation size, K key size.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import flax.linen as nn

from attnmt.model import normalizers, scores, windows
from attnmt.model.config import ModelConfig
from attnmt.model.registry import check_output

Params = dict


def context(weights_BxS: jax.Array, annotations_BxSxH) -> jax.Array:
  """c_b = sum_i a_bi h_bi for a batch: one product a @ h per sentence (inside the decoder's scan, a
  product whose gradient for the annotations `deferred_scan` forms after the backward scan)."""
  return (weights_BxS.astype(annotations_BxSxH.dtype)[:, None, :] @ annotations_BxSxH)[:, 0]


def precompute_keys(cfg: ModelConfig, p: Params, annotations_SxH: jax.Array) -> jax.Array:
  """The per-sentence half of the configured score (S x K, K may be 0)."""
  score = scores.build(cfg)
  keys_SxK = score.keys(p, annotations_SxH)
  check_output(
    'score', score, 'from keys() per sentence', keys_SxK, (annotations_SxH.shape[0], None), '(source_len, K)'
  )
  return keys_SxK


def attention_weights(
  cfg: ModelConfig, p: Params, query_BxQ: jax.Array, keys_BxSxK: jax.Array, length_B: jax.Array, t: jax.Array
) -> jax.Array:
  """Attention weights (B x S, float32) of a batch of queries: the decoder's per-step attention.

  The query products (the score's `query`, the window's `centre`) run once for the whole batch: inside
  the decoder's scan, `q @ p[name]` there is a product whose weight gradient `deferred_scan` forms after
  the backward scan. Scores and window run per sentence.
  `t` is the 0-based target position, positions >= length are padding.
  """
  score, window = scores.build(cfg), windows.build(cfg)
  half_Bx_ = score.query(p, query_BxQ)
  centre_B = window.centre(p, query_BxQ, length_B, t)
  check_output('window', window, 'from centre()', centre_B, length_B.shape, '(batch,)')

  def one(half, keys_SxK, length, centre):
    positions_S = jnp.arange(keys_SxK.shape[0])
    e_S = score.scores(p, half, keys_SxK)
    check_output('score', score, 'per query', e_S, positions_S.shape, '(source_len,)')
    weights_S = window.weights(e_S, positions_S, positions_S < length, centre)
    check_output('window', window, 'from weights() per query', weights_S, positions_S.shape, '(source_len,)')
    return weights_S

  return jax.vmap(one)(half_Bx_, keys_BxSxK, length_B, centre_B)


def recurrent_weights(
  cfg: ModelConfig,
  p: Params,
  query_BxQ: jax.Array,
  keys_BxSxK: jax.Array,
  length_B: jax.Array,
  state: dict,
  decoding: bool,
  noise_BxS: jax.Array | None = None,
) -> tuple[jax.Array, dict]:
  """Attention weights (B x S) of a recurrent normaliser (`monotonic`), which takes the place of the window,
  and the state with the entries it updates: the score per sentence, then the normaliser's `step`."""
  score, normalizer = scores.build(cfg), normalizers.build(cfg)
  half_Bx_ = score.query(p, query_BxQ)

  def one(half, keys_SxK, length, state_S, noise_S):
    mask_S = jnp.arange(keys_SxK.shape[0]) < length
    e_S = score.scores(p, half, keys_SxK)
    check_output('score', score, 'per query', e_S, mask_S.shape, '(source_len,)')
    weights_S, updated = normalizer.step(p, e_S, mask_S, state_S, decoding, noise_S)
    check_output('normaliser', normalizer, 'from step() per query', weights_S, mask_S.shape, '(source_len,)')
    return weights_S, updated

  weights_BxS, updated = jax.vmap(one)(half_Bx_, keys_BxSxK, length_B, state, noise_BxS)
  return weights_BxS, {**state, **updated}


def initial_state(cfg: ModelConfig, length_B: jax.Array, positions: int) -> dict:
  """The attention's own recurrent state at the first target position: B x S arrays by name, empty
  when nothing carries over from one step to the next. A score's coverage: C = 0; a recurrent normaliser's own."""
  state = dict(normalizers.build(cfg).initial_state(length_B, positions))
  if scores.build(cfg).uses_coverage:
    state['coverage'] = jnp.zeros((length_B.shape[0], positions), jnp.float32)
  return state


def attention_step(
  cfg: ModelConfig,
  p: Params,
  query_BxQ: jax.Array,
  keys_BxSxK: jax.Array,
  length_B: jax.Array,
  t: jax.Array,
  state: dict,
  decoding: bool = False,
  noise_BxS: jax.Array | None = None,
) -> tuple[jax.Array, dict]:
  """One decoder step's attention weights (B x S, float32) and the attention's next state.

  `state` is what `initial_state` started (B x S arrays by name); `decoding` is true in greedy and
  beam search, false under teacher forcing; `noise_BxS` (training only) are standard normal draws for a
  normaliser with training noise (`noise_std > 0`). A score's coverage (`Score.uses_coverage`: Tu et al. 2016,
  Eq. 7 with the "linguistic" update C_t = C_{t-1} + a_t) adds C_i w_cov to every key before the score's tanh. A recurrent normaliser
  (`monotonic`: expected alignment under teacher forcing, hard attention in decoding) replaces the window.
  """
  coverage = scores.build(cfg).uses_coverage
  if coverage:
    keys_BxSxK = keys_BxSxK + state['coverage'][..., None].astype(keys_BxSxK.dtype) * p['w_cov'].astype(
      keys_BxSxK.dtype
    )
  if normalizers.build(cfg).recurrent:
    weights_BxS, new = recurrent_weights(cfg, p, query_BxQ, keys_BxSxK, length_B, state, decoding, noise_BxS)
  else:
    weights_BxS, new = attention_weights(cfg, p, query_BxQ, keys_BxSxK, length_B, t), dict(state)
  if coverage:
    new['coverage'] = state['coverage'] + weights_BxS
  return weights_BxS, new


def check_user_code(cfg: ModelConfig) -> None:
  """Traces the configured score, window and normaliser once on 2 queries against 3 source positions, without
  computing anything (`jax.eval_shape`): an output of the wrong shape or dtype is refused (check_output's one
  line naming the class) before any data is prepared."""
  length_B = jnp.array([3, 2])

  def run(decoding):
    module = AttentionParams(cfg)
    p = module.apply({'params': module.init(jax.random.key(0)).get('params', {})})
    keys_BxSxK = jax.vmap(lambda h: precompute_keys(cfg, p, h))(jnp.zeros((2, 3, cfg.annotation_size)))
    query_BxQ = jnp.zeros((2, cfg.decoder_hidden_size))
    return attention_step(
      cfg, p, query_BxQ, keys_BxSxK, length_B, jnp.int32(0), initial_state(cfg, length_B, 3), decoding
    )

  for decoding in (False, True):
    jax.eval_shape(lambda: run(decoding))


class AttentionParams(nn.Module):
  """Declares the parameters of the configured score, window and normaliser and returns them as one dict."""

  cfg: ModelConfig

  @nn.compact
  def __call__(self) -> Params:
    def param(name, shape, init=nn.initializers.lecun_normal()):
      return self.param(name, init, shape, jnp.float32)

    return {
      **scores.build(self.cfg).params(param),
      **windows.build(self.cfg).params(param),
      **normalizers.build(self.cfg).params(param),
    }
