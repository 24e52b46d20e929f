"""Writing the analysis's files: each one whole (a temporary file renamed over it, so a reader never sees half),
a run's under the directory its variant's name gives."""

from __future__ import annotations

import os


def write_text(path: str, text: str) -> None:
  """Writes `text` whole: a temporary file beside `path`, then renamed over it (a reader never sees half)."""
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  tmp = f'{path}.tmp-{os.getpid()}'
  with open(tmp, 'w', encoding='utf-8') as f:
    f.write(text)
  os.replace(tmp, path)


def write_lines(path: str, lines: list[str]) -> None:
  write_text(path, '\n'.join(lines) + '\n')


def slug(name: str) -> str:
  """A variant's name as one directory name: its slashes become dashes."""
  return name.replace('/', '-')
