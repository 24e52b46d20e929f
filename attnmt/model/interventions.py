"""Counterfactual attention: the normalised weights of every decoder step replaced by another distribution
over the same source positions, inside the model's own decoding (teacher-forced, greedy and beam search).

    model = Seq2Seq(cfg, intervention=Intervention('permute', seed=0))

`Decoder._step` applies it to the weights the context reads, c_t = sum_i a'_i h_i, at every step; the
attention's own recurrent state (coverage, the monotonic normaliser's) follows the model's weights, so
the intervention changes what the decoder reads and nothing else. Every counterfactual is defined on the
valid source positions (positions >= length stay 0). `permute` and `shift` keep the weights' total (below 1
for local-p, whose Gaussian scales the softmax); the others sum to 1. For a local window the counterfactual
moves weight outside the window: that is the intervention, not a mistake.

    identity     the weights unchanged (through the same code path: equal outputs, bit for bit)
    uniform      1 / length on every valid position
    permute      the weights of the valid positions in a random order, one order per sentence
    zero_max     the largest weight set to 0, the rest renormalised (k = 1 of zero_top_k)
    zero_top_k   the k largest weights set to 0, the rest renormalised
    shift        the distribution moved one position right, circularly within the valid positions
    first, last  all weight on the first, or the last valid position (the source's EOS)
    random       a draw from a symmetric Dirichlet(concentration) at every step

Where nothing is left to renormalise (zero_max on a one-token source, or every other weight exactly 0), the
weight is spread uniformly over the valid positions not zeroed; on a one-token source it stays where it is.
Randomness is a function of the intervention's `seed` (the draw's, not the model's), the sentence's tokens,
the target position and the source position alone: the same sentence gets the same counterfactual in any batch, at any padding and in any beam.
Letters: B batch, S source positions.
"""

from __future__ import annotations

import dataclasses
import math
import numbers

import jax
import jax.numpy as jnp

from attnmt.errors import ConfigError

NAMES = ('identity', 'uniform', 'permute', 'zero_max', 'zero_top_k', 'shift', 'first', 'last', 'random')
RANDOM = ('permute', 'random')


@dataclasses.dataclass(frozen=True)
class Intervention:
  """One counterfactual (module docstring); hashable, so jitted decoding takes it as a static argument.

  `seed` is the seed of the intervention's own draw (permute's order, random's Dirichlet draws), not the seed
  of the model's parameters: attnmt.api's Run.intervene names it `draw_seed`, and its `seed` picks the
  model."""

  name: str
  k: int = 2  # zero_top_k: how many of the largest weights are zeroed
  seed: int = 0  # permute, random: the seed of the draw (not the model's training seed)
  concentration: float = 1.0  # random: the Dirichlet's parameter (1: uniform over the simplex)

  def __post_init__(self):
    if not isinstance(self.name, str) or self.name not in NAMES:
      raise ConfigError(f"unknown intervention {_quoted(self.name)}; valid: {', '.join(NAMES)}")
    if not _whole(self.k) or self.k < 1:
      raise ConfigError(
        f'intervention {self.name}: k={self.k!r} is not a whole number >= 1; pass k=1, 2, ... (zero_top_k zeroes '
        'the k largest weights)'
      )
    if not _whole(self.seed) or not 0 <= self.seed < 2**63:
      raise ConfigError(
        f'intervention {self.name}: seed={self.seed!r} is not a whole number >= 0; pass the seed of the draw as '
        'one (0, 1, ...)'
      )
    c = self.concentration
    if not isinstance(c, numbers.Real) or isinstance(c, bool) or not (math.isfinite(c) and c > 0):
      raise ConfigError(
        f'intervention {self.name}: concentration={c!r} is not a finite number > 0; pass one such as 1.0 (random '
        "draws from a Dirichlet of that parameter)"
      )
    object.__setattr__(self, 'k', int(self.k))  # NumPy integers as ints: equal options hash equal
    object.__setattr__(self, 'seed', int(self.seed))
    object.__setattr__(self, 'concentration', float(c))

  @property
  def random(self) -> bool:
    return self.name in RANDOM

  def sentence_keys(self, src_BxS: jax.Array) -> jax.Array:
    """Per-sentence key data (B x 2 uint32) from the seed and the sentence's tokens (padding is 0 and adds
    nothing), so a sentence's counterfactual does not depend on its batch."""
    tokens = src_BxS.astype(jnp.uint32)
    weights = (jnp.arange(src_BxS.shape[1], dtype=jnp.uint32) + 1) * jnp.uint32(2654435761)
    digest_B = jnp.sum(tokens * weights[None, :], axis=1, dtype=jnp.uint32)
    base = jax.random.key(self.seed)
    return jax.vmap(lambda d: jax.random.key_data(jax.random.fold_in(base, d)))(digest_B)

  def apply(self, weights_BxS: jax.Array, length_B: jax.Array, t: jax.Array, keys_Bx2=None) -> jax.Array:
    """The counterfactual weights (B x S, float32) of one decoder step at target position `t`."""
    if self.name == 'identity':
      return weights_BxS
    if keys_Bx2 is None:
      keys_Bx2 = jnp.zeros(length_B.shape + (2,), jnp.uint32)
    one = lambda w, n, key: self.one(w.astype(jnp.float32), n, t, key)
    return jax.vmap(one)(weights_BxS, length_B, keys_Bx2)

  def one(self, w_S: jax.Array, length: jax.Array, t: jax.Array, key_data: jax.Array) -> jax.Array:
    """One sentence's counterfactual: `w_S` its weights, `length` its valid positions."""
    positions = jnp.arange(w_S.shape[0])
    valid = positions < length
    w_S = jnp.where(valid, w_S, 0.0)
    n = jnp.maximum(length, 1)
    if self.name == 'uniform':
      return jnp.where(valid, 1.0 / n.astype(jnp.float32), 0.0)
    if self.name == 'first':
      return (positions == 0).astype(jnp.float32)
    if self.name == 'last':
      return (positions == n - 1).astype(jnp.float32)
    if self.name == 'shift':  # a'_i = a_{(i - 1) mod length}
      return jnp.where(valid, w_S[jnp.where(valid, (positions - 1) % n, positions)], 0.0)
    key = jax.random.wrap_key_data(key_data)
    per_position = lambda k: jax.vmap(lambda i: jax.random.fold_in(k, i))(positions)
    if self.name == 'permute':  # valid position i takes the weight of position order[i]
      u = jax.vmap(lambda k: jax.random.uniform(k))(per_position(key))
      order = jnp.argsort(jnp.where(valid, u, jnp.inf))
      return jnp.where(valid, w_S[order], 0.0)
    if self.name == 'random':  # Gamma draws per position and step, normalised: a Dirichlet draw
      g = jax.vmap(lambda k: jax.random.gamma(k, self.concentration))(per_position(jax.random.fold_in(key, t)))
      g = jnp.where(valid, jnp.maximum(g, 1e-30), 0.0)
      return g / jnp.sum(g)
    k = 1 if self.name == 'zero_max' else int(self.k)
    rank = jnp.argsort(jnp.argsort(-jnp.where(valid, w_S, -jnp.inf)))  # 0 for the largest weight
    zeroed = valid & (rank < jnp.minimum(k, length - 1))  # a one-token source keeps its weight
    rest = jnp.where(valid & ~zeroed, w_S, 0.0)
    total = jnp.sum(rest)
    spread = jnp.where(valid & ~zeroed, 1.0, 0.0)
    return jnp.where(total > 0, rest / jnp.where(total > 0, total, 1.0), spread / jnp.maximum(jnp.sum(spread), 1.0))


def _whole(x) -> bool:
  """An integer (Python's or NumPy's), not a bool and not a float, even a whole one: `k=2.0` is refused."""
  return isinstance(x, numbers.Integral) and not isinstance(x, bool)


def _quoted(name) -> str:
  return f"'{name}'" if isinstance(name, str) else f'{name!r} (of type {type(name).__name__}, not a name)'


def parse(text: str, k: int = 2, seed: int = 0) -> list[Intervention]:
  """`uniform,permute,zero_top_k` as Interventions (`k` and `seed`, the seed of the draw, for each); an unknown
  name gets one line listing the valid ones."""
  names = [n.strip() for n in str(text).split(',') if n.strip()]
  if not names:
    raise ConfigError(f"no intervention named in '{text}'; valid: {', '.join(NAMES)}")
  return [Intervention(n, k=k, seed=seed) for n in names]
