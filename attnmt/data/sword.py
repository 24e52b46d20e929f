"""Reads verses from the SWORD Bible modules that Debian ships, with pysword.

The modules are compressed per book; pysword decompresses the whole book again for every
verse it returns, which is what makes a plain read of the Bible take minutes. Caching the
last decompressed blocks on the module object makes the full read take about a second.
"""

import functools
import os
from typing import Optional, Sequence

from pysword.modules import SwordModules

ENGLISH_MODULE = 'engWEB2015eb'  # World English Bible, Debian package sword-text-web
SPANISH_MODULE = 'spaRV1909eb'  # Reina-Valera 1909, Debian package sword-text-sparv
INSTALL_COMMAND = 'sudo apt-get install -y sword-text-web sword-text-sparv'
DEFAULT_SWORD_PATH = '/usr/share/sword'

Ref = tuple[str, int, int]  # (OSIS book name, chapter, verse), e.g. ('John', 3, 16)


class SwordModulesMissingError(FileNotFoundError):
  """The SWORD modules of the embedded corpus are not installed."""


def sword_path(path: Optional[str] = None) -> str:
  """The SWORD library directory: `path`, else $SWORD_PATH, else /usr/share/sword."""
  return path or os.environ.get('SWORD_PATH') or DEFAULT_SWORD_PATH


def open_bible(module: str, path: Optional[str] = None):
  """Opens one SWORD module as a pysword Bible, with a clear error when it is missing."""
  root = sword_path(path)
  mods_d = os.path.join(root, 'mods.d')
  confs = os.listdir(mods_d) if os.path.isdir(mods_d) else []
  if f'{module.lower()}.conf' not in [c.lower() for c in confs]:
    raise SwordModulesMissingError(f'SWORD module {module} not found in {mods_d}; run: {INSTALL_COMMAND}')
  modules = SwordModules(root)
  modules.parse_modules()
  bible = modules.get_bible_from_module(module)
  # Instance attribute, not module state: memoise the per-book decompression.
  bible._decompressed_text = functools.lru_cache(maxsize=4)(bible._decompressed_text)
  return bible


def resolve_books(bible, books: Optional[Sequence[str]]) -> list[str]:
  """OSIS names, in canonical order, for `books` (OSIS or English names); all if None."""
  structure = bible.get_structure()
  canonical = [b.osis_name for section in structure.get_books().values() for b in section]
  if not books:
    return canonical
  wanted = set()
  for name in books:
    try:
      wanted.add(structure.find_book(name.strip())[1].osis_name)
    except ValueError:
      raise ValueError(f'unknown Bible book {name!r}; use OSIS names such as {", ".join(canonical[:5])}, ...') from None
  return [b for b in canonical if b in wanted]


def read_verses(bible, books: Sequence[str]) -> dict[Ref, str]:
  """Raw OSIS markup of every verse of `books` (OSIS names) that the module's
  versification defines; books the versification lacks are skipped."""
  structure = bible.get_structure()
  verses = {}
  for osis in books:
    try:
      _, book = structure.find_book(osis)
    except ValueError:
      continue  # e.g. the deuterocanon in a KJV-versified module
    texts = list(bible.get_iter(books=[book.name], clean=False))
    refs = [(book.osis_name, c, v) for c, n in enumerate(book.chapter_lengths, 1) for v in range(1, n + 1)]
    if len(texts) != len(refs):
      raise RuntimeError(
        f'{book.osis_name}: pysword returned {len(texts)} verses, the versification defines {len(refs)}'
      )
    verses.update(zip(refs, texts))
  return verses
