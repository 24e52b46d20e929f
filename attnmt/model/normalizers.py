"""Attention normalisers: how one query's scores e_S become weights a_S on the simplex (`model.normalizer`).

Like scores and windows, each normaliser is one self-contained definition, chosen by name or by an import
path 'my_pkg.normalizers:Mine':

    normalize(e_S, mask_S)   one query's weights a_S (float32; the sparse two keep float64 scores in
                             float64) over the positions where mask_S is true; masked positions get
                             exactly 0 weight and exactly 0 gradient, and a row with no valid position
                             gives zeros, never NaN
    check()                  constraints on the rest of the config (ConfigError naming the fix)

Its options are `settings` rows read as attributes, selected with it: `model.normalizer=my_pkg.n:Tempered(t=0.5)`.

Windows call the configured normaliser on the positions they keep (attnmt/model/windows.py).

A normaliser that carries state from one target step to the next (`recurrent = True`; `monotonic`)
replaces the window (it needs window 'global') and defines instead:

    params(param)                              its parameters, as a score's
    initial_state(length_B, positions)         its state at the first target step: B x S arrays by name
    step(p, e_S, mask_S, state_S, decoding, noise_S)
                                               one query's weights a_S and the state entries it updates
                                               (S arrays by name; state_S is the attention's whole
                                               state for the sentence); `decoding` is true in greedy
                                               and beam search, false under teacher forcing; noise_S:
                                               standard normal draws in training when `noise_std` > 0,
                                               else None

Built in:
- `softmax`: a_i = exp(e_i) / sum_j exp(e_j); every valid position gets a positive weight.
- `sparsemax` (Martins & Astudillo 2016): the Euclidean projection of e onto the simplex,
  a_i = max(e_i - tau, 0), tau such that the weights sum to 1; low scores get exactly 0.
- `entmax15` (1.5-entmax, Peters et al. 2019): a_i = max(e_i / 2 - tau, 0)^2, tau such that the weights
  sum to 1; sparse too, though less than sparsemax.
- `monotonic` (Raffel et al. 2017): stop probabilities p_i = sigmoid(e_i + r) scanned left to right from
  the previous step's position; the expected alignment in training, hard attention in decoding
  (attnmt/model/monotonic.py). Its weights sum to at most 1.

Both sparse normalisers find tau exactly by sorting the scores (no iteration) and have closed-form
gradients (`jax.custom_vjp`): with s the support (a_i > 0), sparsemax's is g_i - mean_{j in s} g_j on the
support and 0 elsewhere; with r_i = sqrt(a_i), entmax15's is r_i (g_i - sum_j r_j g_j / sum_j r_j).
docs/design.md ("Model", normalisers) has the support conditions and Jacobians.
"""

from __future__ import annotations

from typing import ClassVar

import jax
import jax.numpy as jnp

import flax.linen as nn

from attnmt.model import monotonic
from attnmt.errors import ConfigError
from attnmt.model.registry import Component, Declare, Params, Registry, sibling


def masked_softmax(e_S: jax.Array, mask_S: jax.Array) -> jax.Array:
  """Softmax over the positions where `mask_S` is true; masked positions get exactly 0 weight.

  Gradients to masked scores are exactly zero (they never enter an arithmetic path), and a row with
  no valid position returns all zeros instead of NaN.
  """
  e_S = e_S.astype(jnp.float32)
  any_valid = jnp.any(mask_S)
  e_max = jnp.max(jnp.where(mask_S, e_S, -jnp.inf))
  e_max = jax.lax.stop_gradient(jnp.where(any_valid, e_max, 0.0))
  z_S = jnp.where(mask_S, jnp.exp(jnp.where(mask_S, e_S, e_max) - e_max), 0.0)
  return z_S / jnp.maximum(jnp.sum(z_S), jnp.finfo(jnp.float32).tiny)


def _sorted_valid(z_S: jax.Array, mask_S: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
  """The valid entries of `z_S` shifted so that their maximum is 0, and sorted in decreasing order.

  Returns (the shifted z_S, masked entries 0; sorted_S, entries past the valid count 0; k_S = 1..S;
  in_range_S = k_S <= the valid count). Shifting changes neither sparse normaliser's output (both are
  invariant to adding a constant to every score) and keeps the cumulative sums below in a safe range.
  """
  n_valid = jnp.sum(mask_S)
  z_max = jnp.max(jnp.where(mask_S, z_S, -jnp.inf))
  z_S = jnp.where(mask_S, z_S - jnp.where(n_valid > 0, z_max, 0.0), 0.0)
  sorted_S = -jnp.sort(jnp.where(mask_S, -z_S, jnp.inf))  # decreasing; masked entries (-inf) last
  k_S = jnp.arange(1, z_S.shape[0] + 1)
  in_range_S = k_S <= n_valid
  return z_S, jnp.where(in_range_S, sorted_S, 0.0), k_S, in_range_S


def _support_size(k_S: jax.Array, in_range_S: jax.Array, condition_S: jax.Array) -> jax.Array:
  """The largest k <= the valid count for which the condition holds; 0 in a row with no valid position."""
  return jnp.max(jnp.where(in_range_S & condition_S, k_S, 0))


def _at(x_S: jax.Array, k: jax.Array) -> jax.Array:
  """x_S[k - 1], with k = 0 (no valid position) reading x_S[0]."""
  return x_S[jnp.maximum(k - 1, 0)]


@jax.custom_vjp
def _sparsemax(z_S: jax.Array, mask_S: jax.Array) -> jax.Array:
  z_S, sorted_S, k_S, in_range_S = _sorted_valid(z_S, mask_S)
  cumsum_S = jnp.cumsum(sorted_S)
  # The support is the k largest scores for the largest k with 1 + k z_(k) > sum_{j<=k} z_(j).
  k = _support_size(k_S, in_range_S, 1.0 + k_S.astype(z_S.dtype) * sorted_S > cumsum_S)
  tau = (_at(cumsum_S, k) - 1.0) / jnp.maximum(k, 1).astype(z_S.dtype)
  return jnp.where(mask_S, jnp.maximum(z_S - tau, 0.0), 0.0)


def _sparsemax_fwd(z_S, mask_S):
  a_S = _sparsemax(z_S, mask_S)
  return a_S, a_S


def _sparsemax_bwd(a_S, g_S):
  support_S = a_S > 0.0
  size = jnp.maximum(jnp.sum(support_S), 1).astype(g_S.dtype)
  mean = jnp.sum(jnp.where(support_S, g_S, 0.0)) / size
  return jnp.where(support_S, g_S - mean, 0.0), None


_sparsemax.defvjp(_sparsemax_fwd, _sparsemax_bwd)


@jax.custom_vjp
def _entmax15(z_S: jax.Array, mask_S: jax.Array) -> jax.Array:
  return jnp.square(_entmax15_root(z_S, mask_S))


def _entmax15_root(z_S: jax.Array, mask_S: jax.Array) -> jax.Array:
  """r_S = max(z_S / 2 - tau, 0) on the valid positions (0 elsewhere): the square roots of the weights."""
  z_S, sorted_S, k_S, in_range_S = _sorted_valid(z_S / 2.0, mask_S)
  k_float_S = k_S.astype(z_S.dtype)
  # On a support of the k largest, sum_{j<=k} (z_(j) - tau)^2 = 1 is a quadratic in tau whose smaller root
  # is tau_k = mean_k - sqrt((1 - ss_k) / k), ss_k the sum of squared deviations from the mean mean_k.
  # The support is the largest k with tau_k <= z_(k) (Peters et al. 2019, Algorithm 2).
  mean_S = jnp.cumsum(sorted_S) / k_float_S
  ss_S = jnp.cumsum(jnp.square(sorted_S)) - k_float_S * jnp.square(mean_S)
  tau_S = mean_S - jnp.sqrt(jnp.maximum((1.0 - ss_S) / k_float_S, 0.0))
  k = _support_size(k_S, in_range_S, tau_S <= sorted_S)
  return jnp.where(mask_S, jnp.maximum(z_S - _at(tau_S, k), 0.0), 0.0)


def _entmax15_fwd(z_S, mask_S):
  r_S = _entmax15_root(z_S, mask_S)
  return jnp.square(r_S), r_S


def _entmax15_bwd(r_S, g_S):
  total = jnp.maximum(jnp.sum(r_S), jnp.finfo(r_S.dtype).tiny)
  return r_S * (g_S - jnp.sum(r_S * g_S) / total), None


_entmax15.defvjp(_entmax15_fwd, _entmax15_bwd)


def _at_least_float32(e_S: jax.Array) -> jax.Array:
  return e_S.astype(jnp.promote_types(e_S.dtype, jnp.float32))


def masked_sparsemax(e_S: jax.Array, mask_S: jax.Array) -> jax.Array:
  """Sparsemax over the positions where `mask_S` is true; masked positions get exactly 0 weight and gradient."""
  return _sparsemax(_at_least_float32(e_S), mask_S)


def masked_entmax15(e_S: jax.Array, mask_S: jax.Array) -> jax.Array:
  """1.5-entmax over the positions where `mask_S` is true; masked positions get exactly 0 weight and gradient."""
  return _entmax15(_at_least_float32(e_S), mask_S)


class Normalizer(Component):
  """Base of every normaliser; subclasses define `normalize` and, if they need to, `check`; a recurrent one
  defines `params`, `initial_state` and `step` instead of `normalize`."""

  recurrent: ClassVar[bool] = False  # carries state between target steps; replaces the window
  noise_std: ClassVar[float] = 0.0  # > 0: a recurrent normaliser's step gets standard normal noise in training

  def normalize(self, e_S: jax.Array, mask_S: jax.Array) -> jax.Array:
    raise NotImplementedError(f'normalizer {type(self).__name__} must define normalize(e_S, mask_S)')

  def check(self) -> None:
    """Raises ConfigError if the normaliser cannot work with the rest of `self.cfg`."""

  def params(self, param: Declare) -> Params:
    return {}

  def initial_state(self, length_B: jax.Array, positions: int) -> dict:
    return {}

  def step(
    self, p: Params, e_S: jax.Array, mask_S: jax.Array, state_S: dict, decoding: bool, noise_S: jax.Array | None
  ) -> tuple[jax.Array, dict]:
    return self.normalize(e_S, mask_S), {}


REGISTRY = Registry(Normalizer, 'normalizer')
register, names, build = REGISTRY.register, REGISTRY.names, REGISTRY.build


@register
class Softmax(Normalizer):
  """a_i = exp(e_i) / sum_j exp(e_j) over the valid positions (Bahdanau Eq. 6, Luong Eq. 7)."""

  name = 'softmax'
  fuses = True

  def normalize(self, e_S, mask_S):
    return masked_softmax(e_S, mask_S)


@register
class Sparsemax(Normalizer):
  """Martins & Astudillo 2016: a = argmin_{p in simplex} |p - e|^2 = max(e - tau, 0)."""

  name = 'sparsemax'

  def normalize(self, e_S, mask_S):
    return masked_sparsemax(e_S, mask_S)


@register
class Entmax15(Normalizer):
  """Peters et al. 2019, alpha = 1.5: a = max(e / 2 - tau, 0)^2."""

  name = 'entmax15'

  def normalize(self, e_S, mask_S):
    return masked_entmax15(e_S, mask_S)


@register
class Monotonic(Normalizer):
  """Raffel et al. 2017: p_i = sigmoid(e_i + r), r a learned scalar bias (starting at `r_init`); training
  attends with the expected alignment, decoding with hard monotonic attention (attnmt/model/monotonic.py).

  The state 'alignment' is alpha_{i-1} under teacher forcing, the one-hot position last attended in
  decoding. In training, Gaussian noise of standard deviation `noise_std` is added to the scores before the
  sigmoid (Raffel's "encouraging discreteness"), so that the model learns to give p near 0 or 1, where expected and hard
  attention agree.
  """

  name = 'monotonic'
  recurrent = True
  r_init = -1.0  # p starts below 1/2 (sigmoid(-1) = 0.27 for a 0 score): the scan moves on by default
  noise_std = 1.0  # Gaussian pre-sigmoid noise in training (Raffel: unit variance)

  def params(self, param):
    return {'r': param('r', (), nn.initializers.constant(self.r_init))}

  def initial_state(self, length_B, positions):
    return {'alignment': jnp.broadcast_to(monotonic.initial_alignment(positions), (length_B.shape[0], positions))}

  def step(self, p, e_S, mask_S, state_S, decoding, noise_S):
    if noise_S is not None:  # pre-sigmoid noise pushes p towards 0 or 1, where expected and hard attention agree
      e_S = e_S + self.noise_std * noise_S.astype(e_S.dtype)
    p_S = monotonic.stop_probabilities(e_S, p['r'], mask_S)
    if decoding:
      weights_S, position_S = monotonic.hard_alignment(p_S, state_S['alignment'])
      return weights_S, {'alignment': position_S}
    alpha_S = monotonic.expected_alignment(p_S, state_S['alignment'])
    return alpha_S, {'alignment': alpha_S}

  def normalize(self, e_S, mask_S):
    raise NotImplementedError('the monotonic normaliser depends on the previous step; use attention.attention_step')

  def check(self):
    cfg = self.cfg
    if not sibling(cfg, 'window').keeps_all:
      raise ConfigError(
        f"normalizer 'monotonic' scans every source position from the last one attended; use window 'global', "
        f"not '{cfg.window}'"
      )
    if not sibling(cfg, 'score').attends:
      raise ConfigError(
        f"normalizer 'monotonic' stops where the score is high, and score '{cfg.score}' gives every position the "
        'same score; use another score'
      )
