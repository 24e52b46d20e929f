"""Settings declared once: each row holds a key, its default, what it means, and the values it accepts.

A section (`train` in attnmt/training/settings.py, `data` in attnmt/data/config.py) is one tuple of `Setting`
rows; `defaults(rows)` is the section's ConfigDict and `check(section, rows, values)` validates a section
against the same rows, so a new setting is one line in one place. The model's settings are a frozen
dataclass (attnmt/model/config.py) for the same reason: the field, its comment and its check sit together.
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


@dataclasses.dataclass(frozen=True)
class Setting:
  """One setting: its key, default and meaning; its kind is the default's type (bool, int, float, str);
  numbers may carry bounds `lo` / `hi` and strings a tuple of `choices`."""

  key: str
  default: Any
  doc: str
  lo: Bound = None
  hi: Bound = None
  choices: tuple = ()

  @property
  def kind(self) -> str:
    return {bool: 'bool', int: 'int', float: 'float', str: 'str'}[type(self.default)]


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


def check_value(section: str, row: Setting, value) -> None:
  """Raises ConfigError naming `section.key` and what it accepts when `value` does not fit `row`."""
  name, kind, lo, hi = f'{section}.{row.key}', row.kind, row.lo, row.hi
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
