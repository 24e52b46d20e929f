"""Settings declared once: each row holds a key, its default, what it means, the values it accepts, the value
that reproduces runs written before the setting existed, and whether a resumed run may change it.

Every section is one tuple of `Setting` rows: `train` in attnmt/training/settings.py, `data` in
attnmt/data/config.py, `sweep` in experiments/configs/default.py, and `model` read off the fields of the frozen
dataclass attnmt/model/config.py (`rows_of`: each field is declared with `field(...)`, so the field, its
meaning and its check sit together). From the same rows come the section's defaults (`defaults`), its checks
(`check`), an old run's missing values (`fill_missing`) and the answer to "is this the same run?"
(`differences`). A new setting is therefore one declaration: nothing else lists it.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import numbers
from typing import Any, Optional, Union

import ml_collections

from attnmt.errors import ConfigError

Bound = Optional[Union[float, str]]  # a number (inclusive), '>x' / '<x' (exclusive), or None (open)


class _Default:
  def __repr__(self):
    return 'the default'


DEFAULT = _Default()  # Setting.before: runs written before the setting existed did what its default does


@dataclasses.dataclass(frozen=True)
class Setting:
  """One setting: its key, default and meaning; its kind is the default's type (bool, int, float, str);
  numbers may carry bounds `lo` / `hi` and strings a tuple of `choices`.

  `before` is the value that does what runs written before the setting existed did (their config.json lacks
  the key): the default unless declared, so a setting whose default changes nothing needs no entry.
  `resumable`: a resumed run may change it (train longer, log more often); any other difference is another
  run. `derived`: not read from the config section but filled in by attnmt (the vocabulary sizes).
  `formerly`: the keys it had before a rename; a saved config that holds one reads as this key."""

  key: str
  default: Any
  doc: str
  lo: Bound = None
  hi: Bound = None
  choices: tuple = ()
  before: Any = DEFAULT
  resumable: bool = False
  derived: bool = False
  formerly: tuple = ()

  @property
  def kind(self) -> str:
    return {bool: 'bool', int: 'int', float: 'float', str: 'str'}[type(self.default)]

  @property
  def value_before(self) -> Any:
    """What a run written before this setting existed did."""
    return self.default if self.before is DEFAULT else self.before


def declaration_problem(row: Setting) -> str | None:
  """What makes a Setting row (a component's option, a user's among them) one attnmt cannot read, as a line that
  names the row and the fix; None when it reads: a key that is a Python name, a default of bool, int, float or
  str, bounds that are numbers (or '>x' / '<x'), and choices that are strings holding the default."""
  if not isinstance(row.key, str) or not row.key.isidentifier():
    return f'the option key {row.key!r} is not a Python name; write Setting(\'my_option\', default, doc)'
  if type(row.default) not in (bool, int, float, str):
    return (
      f"option '{row.key}': its default {row.default!r} is a {type(row.default).__name__}; an option is a bool, "
      'int, float or str (its default says which)'
    )
  for side, bound in (('lo', row.lo), ('hi', row.hi)):
    number = bound[1:] if isinstance(bound, str) and bound[:1] in '<>' else bound
    try:
      ok = bound is None or (not isinstance(number, bool) and math.isfinite(float(number)))
    except (TypeError, ValueError):
      ok = False
    if not ok:
      return f"option '{row.key}': {side}={bound!r} is not a bound; give a finite number, '>x', '<x' or None"
  if row.choices and not (all(isinstance(c, str) for c in row.choices) and row.default in row.choices):
    return f"option '{row.key}': choices {row.choices!r} must be strings among which is the default {row.default!r}"
  return None


def field(default, doc: str, **kw):
  """A dataclass field declared as a setting (its row in the field's metadata; `rows_of` reads it back)."""
  return dataclasses.field(default=default, metadata={'setting': Setting('', default, doc, **kw)})


def rows_of(cls) -> tuple[Setting, ...]:
  """The rows of a dataclass whose fields were declared with `field`, in field order."""
  rows = []
  for f in dataclasses.fields(cls):
    if 'setting' not in f.metadata:
      raise TypeError(f'{cls.__name__}.{f.name} is not declared with schema.field(default, doc, ...)')
    rows.append(dataclasses.replace(f.metadata['setting'], key=f.name))
  return tuple(rows)


def defaults(rows: tuple[Setting, ...]) -> ml_collections.ConfigDict:
  """The section's ConfigDict of defaults."""
  return ml_collections.ConfigDict({row.key: row.default for row in rows})


def describe(rows: tuple[Setting, ...]) -> str:
  """The settings as text, one per line: key = default  # meaning (the comment a config file would hold)."""
  return '\n'.join(f'{row.key} = {row.default!r}  # {row.doc}' for row in rows)


def _range_text(kind: str, lo: Bound, hi: Bound) -> str:
  what = 'an integer' if kind == 'int' else 'a finite number'
  if lo is None and hi is None:
    return what
  parts = []
  if lo is not None:
    parts.append(f'> {lo[1:]}' if isinstance(lo, str) else f'>= {lo}')
  if hi is not None:
    parts.append(f'< {hi[1:]}' if isinstance(hi, str) else f'<= {hi}')
  return f'{what} ' + ' and '.join(parts)


def check_value(section: str, row: Setting, value, name: str = '') -> None:
  """Raises ConfigError naming `section.key` (or `name`: a flag, an argument) and what it accepts when `value`
  does not fit `row`."""
  name, kind, lo, hi = name or f'{section}.{row.key}', row.kind, row.lo, row.hi
  if kind == 'bool':
    if not isinstance(value, bool):
      raise ConfigError(f'{name} must be true or false, got {value!r}')
    return
  if kind == 'str':
    if not isinstance(value, str):
      raise ConfigError(f'{name} must be a string, got {value!r}')
    if row.choices and value not in row.choices:
      raise ConfigError(f"unknown {name} '{value}'; valid: {', '.join(row.choices)}")
    return
  if (
    isinstance(value, bool) or not isinstance(value, numbers.Real) or (kind == 'int' and not float(value).is_integer())
  ):
    raise ConfigError(f'{name} must be {_range_text(kind, lo, hi)}, got {value!r}')
  v = float(value)
  bad = not math.isfinite(v)
  if lo is not None:
    bad |= v <= float(lo[1:]) if isinstance(lo, str) else v < lo
  if hi is not None:
    bad |= v >= float(hi[1:]) if isinstance(hi, str) else v > hi
  if bad:
    raise ConfigError(f'{name} must be {_range_text(kind, lo, hi)}, got {value!r}')


def check(section: str, rows: tuple[Setting, ...], values) -> None:
  """Every value of the section against its row; a key no row declares is refused with the nearest valid
  one. Keys a section lacks (a run written before the setting existed) keep their defaults elsewhere."""
  known = {row.key: row for row in rows}
  for key in values.keys():
    if key not in known:
      near = difflib.get_close_matches(key, known, n=1)
      hint = f"; did you mean {section}.{near[0]}?" if near else f"; valid: {', '.join(known)}"
      raise ConfigError(f'unknown setting {section}.{key}{hint}')
  for key, row in known.items():
    if key in values:
      check_value(section, row, values[key])


def current_keys(rows: tuple[Setting, ...], values: dict) -> dict:
  """`values` with every key a setting had before a rename (`Setting.formerly`) under its current key. A
  section that holds both names is refused: which one the run used cannot be told."""
  out = dict(values)
  for row in rows:
    for old in row.formerly:
      if old in out:
        if row.key in out:
          raise ConfigError(f'both {old} and {row.key} are set; {old} is the former name of {row.key}: keep one')
        out[row.key] = out.pop(old)
  return out


def fill_missing(rows: tuple[Setting, ...], values: dict) -> dict:
  """`values` (a section of a saved config) under current keys (`current_keys`), with every declared,
  non-derived key it lacks set to what runs written before that setting existed did (`Setting.value_before`)."""
  values = current_keys(rows, values)
  missing = {row.key: row.value_before for row in rows if not row.derived and row.key not in values}
  return {**values, **missing}


def differences(sections: dict[str, tuple[Setting, ...]], old: dict, new: dict) -> tuple[list[str], list[str]]:
  """Where two configs differ, as 'section.key' names in two sorted lists: (those that make it another run,
  those a resumed run may change). Keys no row declares count as another run."""
  refused, resumable = [], []
  for section, rows in sections.items():
    allowed = {row.key for row in rows if row.resumable}
    a, b = old.get(section) or {}, new.get(section) or {}
    for key in sorted(set(a) | set(b)):
      if a.get(key) != b.get(key):
        (resumable if key in allowed else refused).append(f'{section}.{key}')
  return refused, resumable
