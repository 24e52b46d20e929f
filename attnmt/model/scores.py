"""Attention scores e_i = score(q, h_i): each one self-contained definition, chosen by name or import path.

A score is split in two halves, so that work depending on the annotations alone happens once per
sentence (`keys`, e.g. Bahdanau's U h_i + b) and only the query-dependent part runs at every decoder
step (`query`, then `scores`). One definition holds everything attnmt needs of a score:

    params(param)          its parameters, declared with param(name, shape, init=lecun_normal)
    keys(p, h_SxH)         the per-sentence half, S x K (K may be 0)
    query(p, q_BxQ)        the per-step query half, for a batch of queries
    scores(p, half, keys)  the unnormalised scores e_S of one query against one sentence's keys
    check()                the constraints on the rest of the config: raise ConfigError naming the fix
    flops(src_len)         the FLOPs of its matrix products: (keys per sentence, one query's step)

Its options are `settings` rows, read as attributes (`self.size`) and selected with the score:
`model.score=additive(size=64)` (attnmt/model/registry.py). `self.cfg` is the model's ModelConfig. Every method gets plain arrays. Inside the decoder's
teacher-forced scan, a product `q @ p[name]` in `query` has its weight gradient formed after the
backward scan, one product over all steps (`deferred_scan`); nothing in the score needs to know.

Built-in scores register under their name (`@register`). A score of one's own needs no change to
attnmt: define a `Score` subclass in any importable module and select it with its import path,
`--config.model.score=my_pkg.scores:Cosine` (docs/extending.md, "A new attention score").
"""

from __future__ import annotations

from typing import ClassVar

import jax
import jax.numpy as jnp
import flax.linen as nn

from attnmt.errors import ConfigError
from attnmt.model.registry import Component, Declare, Params, Registry, matmul_flops, sibling
from attnmt.schema import Setting


class Score(Component):
  """Base of every attention score; subclasses override what differs from the defaults below."""

  # False for a score that gives every valid position the same weight (no attention: `none`). Supervised
  # attention, the coverage loss and the monotonic normaliser refuse it, and an analysis takes a variant
  # whose score does not attend as the baseline that every attention variant is tested against.
  attends: ClassVar[bool] = True

  @property
  def uses_coverage(self) -> bool:
    """Whether the attention keeps a coverage vector C (Tu et al. 2016) and adds C_i w_cov to every key
    (`attention.attention_step`); the score then declares w_cov (K,) among its parameters."""
    return False

  def params(self, param: Declare) -> Params:
    return {}

  def keys(self, p: Params, annotations_SxH: jax.Array) -> jax.Array:
    return jnp.zeros(annotations_SxH.shape[:1] + (0,), annotations_SxH.dtype)

  def query(self, p: Params, query_BxQ: jax.Array) -> jax.Array:
    return query_BxQ

  def kernel_query(self, p: Params, query_BxQ: jax.Array) -> jax.Array:
    """The query half as a fused kernel's product with the keys reads it (the score's `fuses`): `query`."""
    return self.query(p, query_BxQ)

  def scores(self, p: Params, half: jax.Array, keys_SxK: jax.Array) -> jax.Array:
    raise NotImplementedError(f'score {type(self).__name__} must define scores(p, half, keys_SxK)')

  def check(self) -> None:
    """Raises ConfigError if the score cannot work with the rest of `self.cfg`."""

  def max_positions(self) -> int | None:
    """The most source positions (tokens with EOS) the score can give weight to; None: any."""
    return None

  def flops(self, src_len: int) -> tuple[int, int]:
    """(FLOPs of `keys` for one sentence, FLOPs of `query` + `scores` for one query): required."""
    raise NotImplementedError(
      f'score {type(self).__name__} must define flops(src_len): the benchmark\'s '
      'FLOP count and fraction of peak need it'
    )


REGISTRY = Registry(Score, 'score')
register, names, build = REGISTRY.register, REGISTRY.names, REGISTRY.build


def _v(param: Declare, size: int) -> jax.Array:
  """The scoring vector v (A,), initialised as the A x 1 matrix it multiplies by."""
  return param('v', (size, 1))[:, 0]


@jax.custom_vjp
def additive_scores(query_A: jax.Array, keys_SxA: jax.Array, v_A: jax.Array) -> jax.Array:
  """e_i = v . tanh(query_A + keys_i): Bahdanau Eq. 6 with query_A = W q and keys = U h + b.

  The gradient recomputes the S x A tanh instead of storing it: the decoder would otherwise keep
  one per target step (134 MB at the bench config), which costs more to write than to recompute.
  """
  # A product with v rather than sum(t * v): XLA:CPU hands a multiply-reduce to a YNNPACK fusion that
  # was about 1.6 x slower here than a tanh loop followed by a dot (measured at the bench config).
  return jnp.einsum('sa,a->s', jnp.tanh(keys_SxA + query_A), v_A)


def _additive_fwd(query_A, keys_SxA, v_A):
  return additive_scores(query_A, keys_SxA, v_A), (query_A, keys_SxA, v_A)


def _additive_bwd(residuals, de_S):
  query_A, keys_SxA, v_A = residuals
  t_SxA = jnp.tanh(keys_SxA + query_A)
  dpre_SxA = de_S[:, None] * v_A * (1.0 - t_SxA * t_SxA)  # tanh' = 1 - tanh^2
  # dv as a product de . t, not sum(de * t): the same YNNPACK multiply-reduce as in the forward pass.
  return jnp.sum(dpre_SxA, axis=0), dpre_SxA, jnp.einsum('s,sa->a', de_S, t_SxA)


additive_scores.defvjp(_additive_fwd, _additive_bwd)


@register
class NoScore(Score):
  """RNNencdec (Bahdanau et al. 2015, Sec. 4.2's baseline): no attention, the mean annotation as a
  fixed summary. Equal scores give every valid position the weight 1 / length."""

  name = 'none'
  attends = False

  def scores(self, p, half, keys_SxK):
    return jnp.zeros(keys_SxK.shape[:1], half.dtype)

  def check(self):
    if not sibling(self.cfg, 'window').keeps_all:
      raise ConfigError(f"score 'none' has no attention to window; use window 'global', not '{self.cfg.window}'")

  def flops(self, src_len):
    return 0, 0


class _TanhScore(Score):
  """e_i = v . tanh(W q + U h_i [+ b]): the shape Bahdanau's additive and Luong's concat score share. A
  subclass names its two matrices (`query_matrix`, `key_matrix`) and says whether a bias rides with the keys.

  With coverage (Tu et al. 2016, the "linguistic" coverage C_i = sum_{t'<t} a_t'i), C_i w_cov is added to
  each key inside the tanh: e_i = v . tanh(W q + U h_i + C_i w_cov + b), w_cov starting at 0."""

  query_matrix = key_matrix = ''
  bias = False
  settings = (
    Setting('size', 128, 'A: the hidden size of v . tanh(W q + U h_i)', lo=1, formerly=('attention_size',)),
    Setting(
      'coverage',
      'none',
      "'sum': Tu et al. 2016's coverage C_i = sum_{t'<t} a_t'i enters the tanh as C_i w_cov (w_cov starts at 0)",
      choices=('none', 'sum'),
      formerly=('coverage',),
    ),
  )

  @property
  def uses_coverage(self):
    return self.coverage == 'sum'

  def params(self, param):
    q, h, a = self.cfg.decoder_hidden_size, self.cfg.annotation_size, self.size
    p = {self.query_matrix: param(self.query_matrix, (q, a)), self.key_matrix: param(self.key_matrix, (h, a))}
    if self.bias:
      p['b'] = param('b', (a,), nn.initializers.zeros)
    p['v'] = _v(param, a)
    if self.uses_coverage:  # w_cov, zero at the start: the model begins as without coverage
      p['w_cov'] = param('w_cov', (a,), nn.initializers.zeros)
    return p

  def keys(self, p, annotations_SxH):
    keys = annotations_SxH @ p[self.key_matrix]
    return keys + p['b'] if self.bias else keys

  def query(self, p, query_BxQ):
    return query_BxQ @ p[self.query_matrix]

  def scoring_vector(self, p) -> jax.Array:
    """v (A,) of v . tanh(...), as the scores use it (the fused attention kernel reads it too)."""
    return p['v']

  def scores(self, p, half_A, keys_SxA):
    return additive_scores(half_A, keys_SxA, self.scoring_vector(p))

  def flops(self, src_len):
    q, h, a = self.cfg.decoder_hidden_size, self.cfg.annotation_size, self.size
    return matmul_flops(src_len, a, h), matmul_flops(1, a, q) + matmul_flops(src_len, 1, a)


@register
class Additive(_TanhScore):
  """Bahdanau et al. 2015, Eq. 6: e_i = v . tanh(W q + U h_i + b). The bias rides with the keys."""

  name = 'additive'
  fuses = 'additive_attend'
  query_matrix, key_matrix, bias = 'W', 'U', True


@register
class NormedAdditive(Additive):
  """Additive with a weight-normalised v (Salimans & Kingma 2016): e_i = g v/|v| . tanh(W q + U h_i + b)."""

  name = 'normed_additive'
  fuses = 'additive_attend'

  def params(self, param):
    return {**super().params(param), 'g': param('g', (), nn.initializers.constant(self.size**-0.5))}

  def scoring_vector(self, p):
    return p['g'] * p['v'] * jax.lax.rsqrt(jnp.sum(jnp.square(p['v'])))


@register
class Dot(Score):
  """Luong et al. 2015, Eq. 8 "dot": e_i = q . h_i."""

  name = 'dot'
  fuses = 'attend'

  def keys(self, p, annotations_SxH):
    return annotations_SxH

  def scores(self, p, query_Q, keys_SxH):
    return keys_SxH @ query_Q

  def check(self):
    cfg = self.cfg
    if cfg.decoder_hidden_size != cfg.annotation_size:
      raise ConfigError(
        f"score '{self.name}' needs the query size (decoder_hidden_size={cfg.decoder_hidden_size}) to equal "
        f'the annotation size ({cfg.annotation_size} = encoder_hidden_size x {2 if cfg.bidirectional else 1} '
        f"directions); change one of them or use score 'general'"
      )

  def flops(self, src_len):
    return 0, matmul_flops(src_len, 1, self.cfg.decoder_hidden_size)


@register
class ScaledDot(Dot):
  """Dot scaled by 1/sqrt(Q) (Vaswani et al. 2017): e_i = q . h_i / sqrt(Q)."""

  name = 'scaled_dot'
  fuses = 'attend'

  def scores(self, p, query_Q, keys_SxH):
    return keys_SxH @ query_Q * jax.lax.rsqrt(jnp.float32(query_Q.shape[-1])).astype(query_Q.dtype)

  def kernel_query(self, p, query_BxQ):
    """q / sqrt(Q): the kernel's q . h_i is then this score's."""
    return query_BxQ * jax.lax.rsqrt(jnp.float32(query_BxQ.shape[-1])).astype(query_BxQ.dtype)


@register
class General(Score):
  """Luong et al. 2015, Eq. 8 "general": e_i = q . W h_i, with W h_i computed once per sentence."""

  name = 'general'
  fuses = 'attend'

  def params(self, param):
    return {'W': param('W', (self.cfg.annotation_size, self.cfg.decoder_hidden_size))}

  def keys(self, p, annotations_SxH):
    return annotations_SxH @ p['W']

  def scores(self, p, query_Q, keys_SxQ):
    return keys_SxQ @ query_Q

  def flops(self, src_len):
    q = self.cfg.decoder_hidden_size
    return matmul_flops(src_len, q, self.cfg.annotation_size), matmul_flops(src_len, 1, q)


@register
class Concat(_TanhScore):
  """Luong et al. 2015, Eq. 8 "concat": e_i = v . tanh(W [q ; h_i]) = v . tanh(W_q q + W_h h_i), no bias."""

  name = 'concat'
  fuses = 'additive_attend'
  query_matrix, key_matrix = 'W_q', 'W_h'


@register
class Location(Score):
  """Luong et al. 2015, Eq. 9 "location": a_t = softmax(W_a q), from the query alone; W_a has one output
  per source position up to its option `positions`. A longer source's later positions get no weight (their
  score is the lowest finite number): the score cannot address them, and the sentence is still translated."""

  name = 'location'
  settings = (
    Setting(
      'positions',
      128,
      "source positions it has a weight for (W_a's output size); a longer source's later positions get no "
      'attention. Not the training filter data.max_source_length',
      lo=1,
      formerly=('location_positions', 'max_source_length'),
    ),
  )

  def params(self, param):
    return {'W': param('W', (self.cfg.decoder_hidden_size, self.positions))}

  def query(self, p, query_BxQ):
    return query_BxQ @ p['W']

  def scores(self, p, half_L, keys_SxK):
    num_positions, max_len = keys_SxK.shape[0], half_L.shape[-1]
    if num_positions > max_len:  # static shapes: only a batch with longer sources pays for the padding
      beyond = jnp.full((num_positions - max_len,), jnp.finfo(half_L.dtype).min, half_L.dtype)
      return jnp.concatenate([half_L, beyond])
    return half_L[:num_positions]

  def max_positions(self):
    return self.positions

  def flops(self, src_len):
    return 0, matmul_flops(1, self.positions, self.cfg.decoder_hidden_size)
