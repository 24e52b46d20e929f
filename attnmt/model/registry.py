"""The one registry under scores, windows, normalisers, decoder forms and interventions: named classes of one
kind, selectable by name (`model.score=additive`) or by an import path to a user's own subclass
(`model.score=my_pkg.scores:Cosine`), each with the options it declares itself, written after the name:

    model.window=local_p(size=4)            model.score=my_pkg.scores:Cosine(scale=10.0)

A component declares its options as `settings`, rows of `attnmt.schema.Setting` (default, meaning, bounds or
choices, the value older runs had, former names), and reads them as attributes (`self.size`). The selection
is checked against those rows like any other setting; a run's config holds the canonical selection, every
option written out (`canonical`), so config.json says what the component did and an old run still compares
equal after a default changes. A run is named by its components' names; a sweep's variant names add the
options that differ between its variants (`label`).
"""

from __future__ import annotations

import difflib
import functools
import importlib
from typing import Any, Callable, ClassVar

import jax
import jax.numpy as jnp

from attnmt import schema
from attnmt.errors import ConfigError, UnknownChoice

Params = dict
# param(name, shape, init=lecun_normal()) -> a float32 parameter of the model
Declare = Callable[..., jax.Array]


def matmul_flops(m: int, n: int, k: int) -> int:
  """FLOPs of an (m x k) @ (k x n) product: one multiply and one add per term."""
  return 2 * m * n * k


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


class Component:
  """Base of every selectable class. `name` is its registered name; `settings` its options (schema.Setting
  rows), which the constructor sets as attributes: a row `Setting('size', 10, ...)` is read as `self.size`.
  `self.cfg` is the whole model's ModelConfig."""

  name: ClassVar[str] = ''
  settings: ClassVar[tuple] = ()
  # What the fused kernels (model.kernels='pallas', attnmt/model/kernels/) run in the component's place: a score
  # names its kernel ('attend' or 'additive_attend'), a window or a normaliser says True. A class declares it for
  # itself and a subclass does not inherit it: a subclass (a user's) may change the math, so it runs the readable
  # path unless its own body says `fuses`.
  fuses: ClassVar[str | bool | None] = None

  def __init_subclass__(cls, **kwargs):
    super().__init_subclass__(**kwargs)
    if 'fuses' not in cls.__dict__:
      cls.fuses = None

  def __init__(self, cfg, **options):
    self.cfg = cfg
    for row in self.settings:
      setattr(self, row.key, options.get(row.key, row.default))

  def options(self) -> dict[str, Any]:
    """The component's options, every declared one, by key."""
    return {row.key: getattr(self, row.key) for row in self.settings}


def _value(text: str):
  """An option's value as written: true/false, an integer, a number, else the text (quotes optional)."""
  text = text.strip()
  low = text.lower()
  if low in ('true', 'false'):
    return low == 'true'
  for kind in (int, float):
    try:
      return kind(text)
    except ValueError:
      pass
  return text[1:-1] if len(text) > 1 and text[0] == text[-1] and text[0] in '\'"' else text


def _text(value) -> str:
  return str(value).lower() if isinstance(value, bool) else str(value)


def selection_text(name: str, options) -> str:
  """A selection as written: 'name' or 'name(key=value, ...)' for `options`, (key, value) pairs in order."""
  written = ', '.join(f'{k}={_text(v)}' for k, v in options)
  return f'{name}({written})' if written else name


def split_top(text: str, sep: str = ',') -> list[str]:
  """`text` split at `sep` outside parentheses: 'additive(size=4, coverage=sum),dot' -> two selections."""
  parts, depth, start = [], 0, 0
  for i, ch in enumerate(text):
    depth += {'(': 1, ')': -1}.get(ch, 0)
    if ch == sep and depth == 0:
      parts.append(text[start:i])
      start = i + 1
  return parts + [text[start:]]


@functools.lru_cache(maxsize=None)
def parse(setting: str, text: str) -> tuple[str, tuple[tuple[str, Any], ...]]:
  """A selection 'name(key=value, ...)' as (name, ((key, value), ...)); a bare name has no options."""
  text = str(text).strip()
  name, paren, rest = text.partition('(')
  if not paren:
    if ')' in text:
      raise UnknownChoice(f"{setting} '{text}' has a ')' without '('; write name(key=value, ...)")
    return name.strip(), ()
  extra = rest.count(')') - rest.count('(') - 1
  if extra > 0:
    raise UnknownChoice(f"{setting} '{text}' has {extra} ')' more than '('; write name(key=value, ...)")
  if extra < 0:
    raise UnknownChoice(f"{setting} '{text}' does not close its options; write name(key=value, ...)")
  if not rest.endswith(')'):
    raise UnknownChoice(f"{setting} '{text}' has text after its options' ')'; write name(key=value, ...)")
  options = []
  for part in filter(str.strip, split_top(rest[:-1])):
    key, eq, value = part.partition('=')
    if not eq or not key.strip():
      raise UnknownChoice(f"{setting} '{text}': option '{part.strip()}' is not key=value; write name(key=value, ...)")
    if key.strip() in dict(options):
      raise UnknownChoice(f"{setting} '{text}' sets the option {key.strip()} twice; keep one")
    options.append((key.strip(), _value(value)))
  return name.strip(), tuple(options)


def resolve(name: str, base: type, registry: dict, setting: str) -> type:
  """The class a config value names: a registered name, or an import path 'module:Class'."""
  kind = setting.rpartition('.')[2]
  if name in registry:
    return registry[name]
  if ':' not in str(name):
    raise UnknownChoice(
      f"unknown {setting} '{name}'; valid: {', '.join(registry)}, or an import path "
      f"such as my_pkg.{kind}s:Mine to a subclass of {base.__name__}"
    )
  module_name, _, attr = name.partition(':')
  try:
    module = importlib.import_module(module_name)
  except ImportError as e:
    raise UnknownChoice(
      f"{setting} '{name}': cannot import module '{module_name}' ({e}); check the path "
      'and that its package is on PYTHONPATH'
    ) from None
  except Exception as e:  # the user's module itself fails while it is imported
    raise UnknownChoice(
      f"{setting} '{name}': importing module '{module_name}' raised {type(e).__name__}: {e}; fix that module"
    ) from None
  cls = getattr(module, attr, None)
  if not (isinstance(cls, type) and issubclass(cls, base)):
    raise UnknownChoice(
      f"{setting} '{name}': '{attr}' in {module_name} is not a {base.__module__}.{base.__name__} subclass"
    )
  _check_settings(cls, kind)
  return cls


def _check_settings(cls: type, kind: str) -> None:
  """Refuses a class whose options are not Setting rows (a tuple of them, each a declaration attnmt can read),
  repeat a key, or shadow one of its attributes."""
  keys = []
  if not isinstance(cls.settings, (tuple, list)):
    raise UnknownChoice(
      f'{kind} {cls.__name__}.settings is {type(cls.settings).__name__}, not a tuple; write settings = (Setting(...),)'
      ' with a comma after a single row'
    )
  for row in cls.settings:
    if not isinstance(row, schema.Setting):
      raise UnknownChoice(
        f'{kind} {cls.__name__}.settings holds {row!r}; declare each option as attnmt.schema.Setting(key, default, doc)'
      )
    problem = schema.declaration_problem(row)
    if problem:
      raise UnknownChoice(f'{kind} {cls.__name__}: {problem}')
    if row.key in keys:
      raise UnknownChoice(f"{kind} {cls.__name__} declares the option '{row.key}' twice; keep one")
    if row.key == 'cfg' or any(row.key in vars(c) for c in cls.__mro__ if c is not object):
      raise UnknownChoice(
        f"{kind} {cls.__name__}'s option '{row.key}' has the name of one of its attributes or methods; rename the "
        'option'
      )
    keys.append(row.key)


_REGISTRIES: dict = {}  # kind -> its Registry, for `sibling`


def sibling(cfg, kind: str):
  """The component of another kind `cfg` selects (`sibling(self.cfg, 'window').keeps_all`): how a component's
  check asks another component a property without importing its module."""
  return _REGISTRIES[kind].build(cfg)


class Registry:
  """Named classes of one kind ('score', 'window', 'normalizer', 'query_timing'), selectable as
  model.<kind>=<name>(options) or by an import path 'module:Class(options)' to a subclass of `base`."""

  def __init__(self, base: type, kind: str, setting: str = ''):
    self.base, self.kind, self.classes = base, kind, {}
    self.setting = setting or f'model.{kind}'  # how messages name the selection
    _REGISTRIES[kind] = self

  def register(self, cls: type) -> type:
    """Class decorator: makes `cls` selectable as `model.<kind>=<cls.name>`."""
    if not cls.name:
      raise ValueError(f'{cls.__name__} needs a `name` to be registered')
    _check_settings(cls, self.kind)
    self.classes[cls.name] = cls
    return cls

  def names(self) -> tuple[str, ...]:
    """The registered names, in registration order."""
    return tuple(self.classes)

  def is_builtin(self, text: str) -> bool:
    """Whether a selection names a registered class (attnmt's own, or one registered by an imported module)."""
    return parse(self.setting, text)[0] in self.classes

  def resolve(self, text: str) -> type:
    """The class a selection names."""
    return resolve(parse(self.setting, text)[0], self.base, self.classes, self.setting)

  def options(self, text: str, former: dict | None = None) -> tuple[type, dict[str, Any]]:
    """The class a selection names and its options, every declared one: those written, else a former model
    setting the option declares (`former`: e.g. model.window_size for local_p's `size`), else the default.
    Each is checked against its row; an unknown one is refused with the nearest valid key."""
    name, written = parse(self.setting, text)
    cls = resolve(name, self.base, self.classes, self.setting)
    rows = {row.key: row for row in cls.settings}
    for key, _ in written:
      if key not in rows:
        near = difflib.get_close_matches(key, rows, n=1)
        hint = f'did you mean {near[0]}?' if near else f"valid: {', '.join(rows)}" if rows else 'it has none'
        raise UnknownChoice(f"{self.setting} '{text}': {cls.__name__} has no option '{key}'; {hint}")
    written, former = dict(written), former or {}
    out = {}
    for key, row in rows.items():
      given = [k for k in row.formerly if former.get(k) is not None]
      if len(given) > 1:  # a setting renamed before it moved: which one the run used cannot be told
        raise ConfigError(
          f'both {given[1]} and {given[0]} are set; {given[1]} is the former name of {given[0]}: keep one'
        )
      if given and key in written and written[key] != _value(str(former[given[0]])):
        raise ConfigError(
          f"model.{given[0]}={former[given[0]]} and the option {key}={_text(written[key])} of {self.setting} "
          f"'{text}' are both set; {given[0]} is that option's former name: keep the option"
        )
      value = written.get(key, former[given[0]] if given else row.default)
      if isinstance(value, str) and row.kind != 'str':
        value = _value(value)
      try:
        schema.check_value(f'{self.setting} {name}', row, value)
      except ConfigError as e:  # an option no selection could take: a mistake, not a combination to skip
        raise UnknownChoice(str(e)) from None
      out[key] = {'float': float, 'int': int}.get(row.kind, lambda v: v)(value)
    return cls, out

  def canonical(self, text: str, former: dict | None = None) -> str:
    """The selection with every option written out, in declaration order: what a run's config holds."""
    _, options = self.options(text, former)
    return selection_text(parse(self.setting, text)[0], options.items())

  def label(self, text: str, shown=None) -> str:
    """The selection as a variant's name shows it: the options that differ from their defaults (or, given
    `shown`, those keys alone)."""
    cls, options = self.options(text)
    defaults = {row.key: row.default for row in cls.settings}
    kept = [(k, v) for k, v in options.items() if (v != defaults[k] if shown is None else k in shown)]
    return selection_text(parse(self.setting, text)[0], kept)

  def build(self, cfg, text: str | None = None):
    """The configured class, bound to `cfg` with its options."""
    return _build(self, cfg, getattr(cfg, self.kind) if text is None else text)


@functools.lru_cache(maxsize=256)
def _build_cached(registry: Registry, cfg, text: str, cls: type):  # `cls` in the key: a reloaded module's class
  return _make(registry, cfg, text)


def _make(registry: Registry, cfg, text: str):
  cls, options = registry.options(text)
  return named(cls(cfg, **options), text, registry.setting)


def named(component, text: str, setting: str):
  """`component`, with the name it was selected by when its class has none (a user's, by import path)."""
  if not type(component).name:
    component.name = parse(setting, text)[0]
  return component


def _build(registry: Registry, cfg, text: str):
  try:
    hash(cfg)
  except TypeError:  # a config section (ConfigDict) rather than a ModelConfig: built afresh
    return _make(registry, cfg, text)
  return _build_cached(registry, cfg, text, registry.resolve(text))
