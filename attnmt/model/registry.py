"""The one registry under scores, windows and normalisers: named classes of one kind, selectable by name
(`model.score=additive`) or by an import path to a user's own subclass (`model.score=my_pkg.scores:Cosine`),
and the types their definitions share."""

from __future__ import annotations

import importlib
from typing import Callable

import jax
import jax.numpy as jnp

from attnmt.errors import ConfigError, UnknownChoice

Params = dict
# param(name, shape, init=lecun_normal()) -> a float32 parameter of the model
Declare = Callable[..., jax.Array]


def matmul_flops(m: int, n: int, k: int) -> int:
  """FLOPs of an (m x k) @ (k x n) product: one multiply and one add per term."""
  return 2 * m * n * k


def resolve(name: str, base: type, registry: dict, kind: str) -> type:
  """The class a config value names: a registered name, or an import path 'module:Class'."""
  if name in registry:
    return registry[name]
  if ':' not in str(name):
    raise UnknownChoice(
      f"unknown model.{kind} '{name}'; valid: {', '.join(registry)}, or an import path "
      f"such as my_pkg.{kind}s:Mine to a {base.__name__} subclass"
    )
  module_name, _, attr = name.partition(':')
  try:
    module = importlib.import_module(module_name)
  except ImportError as e:
    raise UnknownChoice(
      f"model.{kind} '{name}': cannot import module '{module_name}' ({e}); check the path "
      'and that its package is on PYTHONPATH'
    ) from None
  except Exception as e:  # the user's module itself fails while it is imported
    raise UnknownChoice(
      f"model.{kind} '{name}': importing module '{module_name}' raised {type(e).__name__}: {e}; fix that module"
    ) from None
  cls = getattr(module, attr, None)
  if not (isinstance(cls, type) and issubclass(cls, base)):
    raise UnknownChoice(
      f"model.{kind} '{name}': '{attr}' in {module_name} is not a {base.__module__}.{base.__name__} subclass"
    )
  return cls


def check_output(kind: str, obj, what: str, x, expected: tuple, names: str) -> None:
  """Refuses, with one line naming the class, an output of a user's (or a built-in) score, window or normaliser
  whose shape is not `expected` (None: any size) or whose dtype is not floating point. Shapes are static, so
  this runs once, while the computation is traced, and costs nothing when it runs. `what` says per what
  the output is ('per query'); `names` spells the expected axes ('(source_len,)')."""
  shape, dtype = tuple(getattr(x, 'shape', ())), getattr(x, 'dtype', None)
  fits = len(shape) == len(expected) and all(e is None or s == e for s, e in zip(shape, expected))
  if not fits:
    want = '(' + ', '.join('any' if e is None else str(e) for e in expected) + (',)' if len(expected) == 1 else ')')
    raise ConfigError(
      f'{kind} {type(obj).__name__} returned shape {shape} {what}; expected {names} = {want}'
      + ('' if shape else ' (one number where there should be one per source position)')
    )
  if dtype is None or not jnp.issubdtype(dtype, jnp.floating):
    raise ConfigError(f'{kind} {type(obj).__name__} returned dtype {dtype} {what}; expected a floating-point array')


class Registry:
  """Named classes of one kind ('score', 'window', 'normalizer'), selectable as model.<kind>=<name> or by an
  import path 'module:Class' to a subclass of `base`."""

  def __init__(self, base: type, kind: str):
    self.base, self.kind, self.classes = base, kind, {}

  def register(self, cls: type) -> type:
    """Class decorator: makes `cls` selectable as `model.<kind>=<cls.name>`."""
    if not cls.name:
      raise ValueError(f'{cls.__name__} needs a `name` to be registered')
    self.classes[cls.name] = cls
    return cls

  def names(self) -> tuple[str, ...]:
    """The registered names, in registration order."""
    return tuple(self.classes)

  def build(self, cfg):
    """The configured class, bound to `cfg`."""
    return resolve(getattr(cfg, self.kind), self.base, self.classes, self.kind)(cfg)
