"""Alignment windows (Luong et al. 2015, Sec. 3.2): which source positions a query may attend to, and how.

Like scores (attnmt/model/scores.py), each window is one self-contained definition, chosen by name or by an
import path 'my_pkg.windows:Mine':

    params(param)                         its parameters (param(name, shape, init=lecun_normal))
    centre(p, q_BxQ, length_B, t)         the window's centre p_t for a batch of queries (float32, B);
                                          `q @ p[name]` as in a score's `query`
    weights(e_S, positions_S, mask_S, c)  one query's weights a_S from its scores, the valid positions
                                          and its centre; padding must get weight 0
    check()                               constraints on the rest of the config (ConfigError)
    flops()                               the FLOPs of one query's `centre` (required)
    keeps_all                             True when it keeps every valid position with no centre (global):
                                          a score without attention and the monotonic normaliser need one

Its options are `settings` rows read as attributes, selected with it: `model.window=local_p(size=4)`.

`self.normalize(e_S, keep_S)` is the configured normaliser (`model.normalizer`: softmax, sparsemax,
entmax15 or an import path; attnmt/model/normalizers.py) over the positions a window keeps: the built-in
windows' `weights` call it, so every window works with every normaliser.
"""

from __future__ import annotations

from typing import ClassVar

import jax
import jax.numpy as jnp

from attnmt.model import normalizers
from attnmt.model.registry import Component, Declare, Params, Registry, check_output, matmul_flops
from attnmt.schema import Setting


class Window(Component):
  """Base of every window: the defaults are the global one (every valid position, no centre), except
  `keeps_all`, which a window must claim (`Global` does)."""

  keeps_all: ClassVar[bool] = False

  def params(self, param: Declare) -> Params:
    return {}

  def centre(self, p: Params, query_BxQ: jax.Array, length_B: jax.Array, t: jax.Array) -> jax.Array:
    return jnp.zeros(length_B.shape, jnp.float32)

  def normalize(self, e_S: jax.Array, keep_S: jax.Array) -> jax.Array:
    """The configured normaliser's weights over the positions where `keep_S` is true (0 elsewhere)."""
    normalizer = normalizers.build(self.cfg)
    weights_S = normalizer.normalize(e_S, keep_S)
    check_output('normaliser', normalizer, 'per query', weights_S, keep_S.shape, '(source_len,)')
    return weights_S

  def weights(self, e_S: jax.Array, positions_S: jax.Array, mask_S: jax.Array, centre: jax.Array) -> jax.Array:
    return self.normalize(e_S, mask_S)

  def check(self) -> None:
    """Raises ConfigError if the window cannot work with the rest of `self.cfg`."""

  def flops(self) -> int:
    raise NotImplementedError(f'window {type(self).__name__} must define flops(): the FLOPs of one query\'s centre')


REGISTRY = Registry(Window, 'window')
register, names, build = REGISTRY.register, REGISTRY.names, REGISTRY.build


@register
class Global(Window):
  """Every valid source position (Luong's global attention; Bahdanau's)."""

  name = 'global'
  fuses = True
  keeps_all = True

  def flops(self):
    return 0


_HALF_WIDTH = Setting(
  'size', 10, 'D: half-width of the window; local_p\'s Gaussian sigma = D / 2', lo=1, formerly=('window_size',)
)


@register
class LocalM(Window):
  """local-m: monotonic alignment p_t = t; positions |s - p_t| <= D (its option `size`)."""

  name = 'local_m'
  settings = (_HALF_WIDTH,)

  def centre(self, p, query_BxQ, length_B, t):
    return jnp.broadcast_to(jnp.asarray(t, jnp.float32), length_B.shape)

  def weights(self, e_S, positions_S, mask_S, centre):
    return self.normalize(e_S, mask_S & (jnp.abs(positions_S - centre) <= self.size))

  def flops(self):
    return 0


@register
class LocalP(Window):
  """local-p (Luong Eq. 9, 10): predicted centre p_t = S sigmoid(v_p . tanh(W_p q)), S the true source
  length; positions |s - p_t| <= D, the normaliser's weights times a Gaussian exp(-(s - p_t)^2 / (2 sigma^2)),
  sigma = D/2."""

  name = 'local_p'
  settings = (
    _HALF_WIDTH,
    Setting('predictor_size', 128, "hidden size of the centre's predictor W_p", lo=1, formerly=('attention_size',)),
  )

  def params(self, param):
    q, a = self.cfg.decoder_hidden_size, self.predictor_size
    return {'W_p': param('W_p', (q, a)), 'v_p': param('v_p', (a, 1))[:, 0]}

  def centre(self, p, query_BxQ, length_B, t):
    return length_B * jax.nn.sigmoid(jnp.tanh(query_BxQ @ p['W_p']) @ p['v_p']).astype(jnp.float32)

  def weights(self, e_S, positions_S, mask_S, centre):
    half_width = self.size
    distance_S = positions_S.astype(jnp.float32) - centre
    sigma = half_width / 2.0
    inside = self.normalize(e_S, mask_S & (jnp.abs(distance_S) <= half_width))
    return inside * jnp.exp(-jnp.square(distance_S) / (2.0 * sigma**2))

  def flops(self):
    q, a = self.cfg.decoder_hidden_size, self.predictor_size
    return matmul_flops(1, a, q) + matmul_flops(1, 1, a)
