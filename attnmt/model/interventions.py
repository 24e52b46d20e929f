"""Counterfactual attention: the normalised weights of every decoder step replaced by another distribution
over the same source positions, inside the model's own decoding (teacher-forced, greedy and beam search).

    model = Seq2Seq(cfg, intervention=interventions.build('permute', seed=0))

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
    only_max     all weight on the largest weight's position
    keep_max_uniform_others   the largest weight kept, the rest shared equally by the other positions
    permute_moved             a new order at every step, redrawn until the largest weight moves (redraws)

The last three, `last` (LastEncoderState), `uniform`, `zero_max` (ZeroOutMax) and `permute_moved` (RandomPermute)
are Moradi, Kambhatla & Sarkar's counterfactuals (2019; sfu-natlang/attention_explanation,
onmt/modules/global_attention.py). Their ZeroOut zeroes the attentional state h~_t, not the weights, and is not
an intervention here.

Where nothing is left to renormalise (zero_max on a one-token source, or every other weight exactly 0), the
weight is spread uniformly over the valid positions not zeroed; on a one-token source it stays where it is.
Randomness is a function of the intervention's `seed` (the draw's, not the model's), the sentence's tokens,
the target position and the source position alone: the same sentence gets the same counterfactual in any batch, at any padding and in any beam.

Interventions are a registry like scores and windows (attnmt/model/registry.py): each is one class, selected
by name with its options ('zero_top_k(k=3)', 'random(concentration=0.5)') or by an import path to a user's
own subclass ('my_pkg.interventions:Flip(p=0.5)'), which defines

    counterfactual(w_S, valid_S, length, t, key)   one sentence's counterfactual weights (S,), float32
    random                                          True when it draws from `key` (a PRNG key per sentence)

Letters: B batch, S source positions.
"""

from __future__ import annotations

import numbers
from typing import ClassVar

import jax
import jax.numpy as jnp

from attnmt.errors import ConfigError, InputError
from attnmt.model.registry import Component, Registry, check_output, named, selection_text, split_top
from attnmt.schema import Setting


class Intervention(Component):
  """Base of every counterfactual (module docstring); hashable, so jitted decoding takes it as a static argument.

  `seed` is the seed of the intervention's own draw (permute's order, random's Dirichlet draws), not the seed
  of the model's parameters: attnmt.api's Run.intervene names it `draw_seed`, and its `seed` picks the
  model. Options are `settings` rows, as for every component."""

  random: ClassVar[bool] = False  # draws from the per-sentence key: `Seq2Seq.encode` then derives the keys

  def __init__(self, seed: int = 0, **options):
    super().__init__(None, **options)
    if not _whole(seed) or not 0 <= seed < 2**63:
      raise ConfigError(
        f'intervention {self.name}: seed={seed!r} is not a whole number >= 0; pass the seed of the draw as one '
        '(0, 1, ...)'
      )
    self.seed = int(seed)

  def _key(self):
    return type(self), tuple(self.options().items()), self.seed

  def __eq__(self, other):
    return isinstance(other, Intervention) and self._key() == other._key()

  def __hash__(self):
    return hash(self._key())

  def __repr__(self):
    return f'{type(self).__name__}({self.label}, seed={self.seed})'

  @property
  def label(self) -> str:
    """The name with the options that differ from their defaults: 'zero_top_k(k=3)', 'uniform'."""
    defaults = {row.key: row.default for row in self.settings}
    return selection_text(self.name, [(k, v) for k, v in self.options().items() if v != defaults[k]])

  def counterfactual(self, w_S: jax.Array, valid_S: jax.Array, length: jax.Array, t: jax.Array, key) -> jax.Array:
    """One sentence's counterfactual weights (S,) from its weights `w_S` (0 at padding), `valid_S` (positions <
    `length`), the target position `t` and, for a random one, its PRNG key (else None)."""
    raise NotImplementedError(
      f'intervention {type(self).__name__} must define counterfactual(w_S, valid_S, length, t, key)'
    )

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
    if keys_Bx2 is None:
      keys_Bx2 = jnp.zeros(length_B.shape + (2,), jnp.uint32)
    out = jax.vmap(lambda w, n, key: self.one(w.astype(jnp.float32), n, t, key))(weights_BxS, length_B, keys_Bx2)
    check_output('intervention', self, 'from counterfactual()', out, weights_BxS.shape, '(batch, source_len)')
    return out

  def one(self, w_S: jax.Array, length: jax.Array, t: jax.Array, key_data: jax.Array) -> jax.Array:
    """One sentence's counterfactual: `w_S` its weights, `length` its valid positions."""
    valid = jnp.arange(w_S.shape[0]) < length
    key = jax.random.wrap_key_data(key_data) if self.random else None
    return self.counterfactual(jnp.where(valid, w_S, 0.0), valid, length, t, key)


REGISTRY = Registry(Intervention, 'intervention', 'intervention')
register, names = REGISTRY.register, REGISTRY.names


def _per_position(key, positions):
  return jax.vmap(lambda i: jax.random.fold_in(key, i))(positions)


@register
class Identity(Intervention):
  """The weights unchanged (through the same code path: equal outputs, bit for bit)."""

  name = 'identity'

  def apply(self, weights_BxS, length_B, t, keys_Bx2=None):
    return weights_BxS


@register
class Uniform(Intervention):
  """1 / length on every valid position."""

  name = 'uniform'

  def counterfactual(self, w_S, valid_S, length, t, key):
    return jnp.where(valid_S, 1.0 / jnp.maximum(length, 1).astype(jnp.float32), 0.0)


@register
class Permute(Intervention):
  """The weights of the valid positions in a random order, one order per sentence."""

  name = 'permute'
  random = True

  def counterfactual(self, w_S, valid_S, length, t, key):  # valid position i takes the weight of position order[i]
    u = jax.vmap(jax.random.uniform)(_per_position(key, jnp.arange(w_S.shape[0])))
    order = jnp.argsort(jnp.where(valid_S, u, jnp.inf))
    return jnp.where(valid_S, w_S[order], 0.0)


def zero_largest(w_S: jax.Array, valid_S: jax.Array, length: jax.Array, k: int) -> jax.Array:
  """The k largest weights set to 0 and the rest renormalised; uniform over the rest where nothing is left to
  renormalise; a one-token source keeps its weight."""
  rank = jnp.argsort(jnp.argsort(-jnp.where(valid_S, w_S, -jnp.inf)))  # 0 for the largest weight
  zeroed = valid_S & (rank < jnp.minimum(k, length - 1))
  rest = jnp.where(valid_S & ~zeroed, w_S, 0.0)
  total = jnp.sum(rest)
  spread = jnp.where(valid_S & ~zeroed, 1.0, 0.0)
  return jnp.where(total > 0, rest / jnp.where(total > 0, total, 1.0), spread / jnp.maximum(jnp.sum(spread), 1.0))


@register
class ZeroMax(Intervention):
  """The largest weight set to 0, the rest renormalised (zero_top_k with k = 1)."""

  name = 'zero_max'

  def counterfactual(self, w_S, valid_S, length, t, key):
    return zero_largest(w_S, valid_S, length, 1)


@register
class ZeroTopK(Intervention):
  """The k largest weights set to 0, the rest renormalised."""

  name = 'zero_top_k'
  settings = (Setting('k', 2, 'how many of the largest weights are zeroed', lo=1),)

  def counterfactual(self, w_S, valid_S, length, t, key):
    return zero_largest(w_S, valid_S, length, self.k)


@register
class Shift(Intervention):
  """The distribution moved one position right, circularly within the valid positions: a'_i = a_{(i-1) mod n}."""

  name = 'shift'

  def counterfactual(self, w_S, valid_S, length, t, key):
    positions, n = jnp.arange(w_S.shape[0]), jnp.maximum(length, 1)
    return jnp.where(valid_S, w_S[jnp.where(valid_S, (positions - 1) % n, positions)], 0.0)


@register
class First(Intervention):
  """All weight on the first valid position."""

  name = 'first'

  def counterfactual(self, w_S, valid_S, length, t, key):
    return (jnp.arange(w_S.shape[0]) == 0).astype(jnp.float32)


@register
class Last(Intervention):
  """All weight on the last valid position (the source's EOS)."""

  name = 'last'

  def counterfactual(self, w_S, valid_S, length, t, key):
    return (jnp.arange(w_S.shape[0]) == jnp.maximum(length, 1) - 1).astype(jnp.float32)


@register
class OnlyMax(Intervention):
  """All weight on the largest weight's position (Moradi et al.'s OnlyMax: the other scores set to -inf)."""

  name = 'only_max'

  def counterfactual(self, w_S, valid_S, length, t, key):
    return (jnp.arange(w_S.shape[0]) == jnp.argmax(jnp.where(valid_S, w_S, -jnp.inf))).astype(jnp.float32)


@register
class KeepMaxUniformOthers(Intervention):
  """The largest weight kept, the rest of the mass shared equally by the other valid positions (Moradi et al.'s
  KeepMaxUniformOthers: (1 - max) / (length - 1) each); a one-token source keeps its weight."""

  name = 'keep_max_uniform_others'

  def counterfactual(self, w_S, valid_S, length, t, key):
    top = jnp.argmax(jnp.where(valid_S, w_S, -jnp.inf))
    is_top = jnp.arange(w_S.shape[0]) == top
    others = (1.0 - w_S[top]) / jnp.maximum(length - 1, 1).astype(jnp.float32)
    return jnp.where(is_top, jnp.where(length > 1, w_S[top], 1.0), jnp.where(valid_S, others, 0.0))


@register
class PermuteMoved(Intervention):
  """Moradi et al.'s RandomPermute: at every step a new random order of the valid weights, drawn again (up to
  `redraws` times, theirs 10) until the largest weight has moved; the last draw is kept if none moved it (their
  code prints a warning then), and a one-token source keeps its weight."""

  name = 'permute_moved'
  random = True
  settings = (Setting('redraws', 10, 'draws until the largest weight moves (theirs: 10)', lo=1),)

  def counterfactual(self, w_S, valid_S, length, t, key):
    top = jnp.argmax(jnp.where(valid_S, w_S, -jnp.inf))
    positions = jnp.arange(w_S.shape[0])

    def draw(r):
      u = jax.vmap(jax.random.uniform)(_per_position(jax.random.fold_in(jax.random.fold_in(key, t), r), positions))
      permuted = jnp.where(valid_S, w_S[jnp.argsort(jnp.where(valid_S, u, jnp.inf))], 0.0)
      return permuted, jnp.argmax(jnp.where(valid_S, permuted, -jnp.inf)) != top

    draws_RxS, moved_R = jax.vmap(draw)(jnp.arange(self.redraws))
    first = jnp.where(jnp.any(moved_R), jnp.argmax(moved_R), self.redraws - 1)
    return draws_RxS[first]


@register
class Random(Intervention):
  """A draw from a symmetric Dirichlet(concentration) at every step: Gamma draws per position, normalised."""

  name = 'random'
  random = True
  settings = (Setting('concentration', 1.0, "the Dirichlet's parameter (1: uniform over the simplex)", lo='>0'),)

  def counterfactual(self, w_S, valid_S, length, t, key):
    keys = _per_position(jax.random.fold_in(key, t), jnp.arange(w_S.shape[0]))
    g = jax.vmap(lambda k: jax.random.gamma(k, self.concentration))(keys)
    g = jnp.where(valid_S, jnp.maximum(g, 1e-30), 0.0)
    return g / jnp.sum(g)


NAMES = names()
RANDOM = tuple(n for n in NAMES if REGISTRY.classes[n].random)


def _whole(x) -> bool:
  """An integer (Python's or NumPy's), not a bool and not a float, even a whole one."""
  return isinstance(x, numbers.Integral) and not isinstance(x, bool)


def build(text: str, seed: int = 0) -> Intervention:
  """The intervention a selection names ('zero_top_k(k=3)', 'my_pkg.iv:Flip'), with the seed of its draw."""
  if not isinstance(text, str):
    raise ConfigError(
      f'intervention {text!r} (of type {type(text).__name__}) is not a name; valid: {", ".join(NAMES)}, or an '
      'import path to an Intervention subclass'
    )
  cls, options = REGISTRY.options(text)
  return named(cls(seed, **options), text, REGISTRY.setting)


def check(intervention: Intervention) -> None:
  """Traces the intervention once on 2 sentences of 3 positions without computing anything (`jax.eval_shape`):
  a user's class whose output has the wrong shape or dtype, or that lacks `counterfactual`, is refused in one
  line before any run is loaded."""
  weights, length = jnp.full((2, 3), 1 / 3, jnp.float32), jnp.array([3, 2])
  try:
    jax.eval_shape(lambda: intervention.apply(weights, length, jnp.int32(0), intervention.sentence_keys(weights)))
  except NotImplementedError as e:
    raise ConfigError(str(e)) from None


def parse(text: str, seed: int = 0) -> list[Intervention]:
  """'uniform,permute,zero_top_k(k=3)' as checked Interventions (`seed`, the seed of the draw, for each); an
  unknown name gets one line listing the valid ones."""
  chosen = [build(part.strip(), seed) for part in split_top(str(text)) if part.strip()]
  if not chosen:
    raise ConfigError(f"no intervention named in '{text}'; valid: {', '.join(NAMES)}")
  for intervention in chosen:
    check(intervention)
  return chosen


def selected(value, draw_seed: int = 0, **options) -> Intervention:
  """The API's intervention (attnmt.Run.translate, intervene: the draw's seed is `draw_seed`, since `seed` picks the
  model there): an Intervention as given, or built from its selection ('zero_top_k', 'zero_top_k(k=3)', an import path)
  with `options` (its declared options, e.g. k, concentration) and `draw_seed`, the seed of its draw; anything
  else is an InputError naming the value and the accepted forms, a bad name or option one naming the valid ones."""
  if isinstance(value, Intervention):
    given = sorted(options) + (['draw_seed'] if draw_seed else [])
    if given:
      raise InputError(
        f'intervention options {", ".join(given)} given with an Intervention object: set them on it, or pass '
        f"the intervention's name ({value.name!r}) with them"
      )
    return value
  if not isinstance(value, str):
    raise InputError(
      f'intervention={value!r} (of type {type(value).__name__}) is not an intervention; pass its name (one of '
      f"{', '.join(NAMES)}) or an attnmt.model.interventions.Intervention"
    )
  if not (isinstance(draw_seed, numbers.Integral) and not isinstance(draw_seed, bool) and draw_seed >= 0):
    raise InputError(
      f'draw_seed={draw_seed!r} is not a whole number >= 0; pass the seed of the draw as one (0, 1, ...)'
    )
  try:
    cls = REGISTRY.resolve(value.strip())
    unknown = sorted(set(options) - {row.key for row in cls.settings})
    if unknown:
      valid = ', '.join([row.key for row in cls.settings] + ['draw_seed'])
      raise InputError(
        f"intervention options: {cls.name} has no option {', '.join(unknown)}; valid: {valid} (draw_seed is the "
        "seed of the draw; seed= picks the model's)"
      )
    written = ', '.join(f'{k}={v}' for k, v in options.items())
    text = value.strip() if not options else f'{value.strip().rstrip(")")}{", " if "(" in value else "("}{written})'
    intervention = build(text, draw_seed)
    check(intervention)
    return intervention
  except ConfigError as e:
    raise InputError(str(e)) from None
