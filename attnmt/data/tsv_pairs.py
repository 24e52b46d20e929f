"""TFDS builder `tsv_pairs`: any tab-separated file of sentence pairs.

The format is Tatoeba's (manythings.org): `source<TAB>target<TAB>attribution`, the
attribution optional. It is plain TSV, not CSV: every tab separates fields and quotes are
ordinary characters, so a sentence cannot hold a tab. A line with another number of fields,
an empty side, or a double quote that opens a field and closes in a later one (CSV-style
quoting around a tab) is an error naming the file and line, unless bad lines are skipped,
in which case they are counted (`builder.info.metadata['skipped_lines']`). Blank lines are
ignored; a UTF-8 byte-order mark at the start of the file is dropped. The pairs are split by
a hash of the source sentence, so a sentence with several translations never lands in two
splits; the file needs at least 3 distinct source sentences (one per split).
"""

import dataclasses
import hashlib
import os
import stat

import numpy as np
import tensorflow_datasets as tfds

from attnmt.data import splits as splits_lib


class TsvFormatError(ValueError):
  """A malformed, empty or unreadable pair file."""


@dataclasses.dataclass(frozen=True)
class TsvPairs:
  """The pairs of a file with their 1-based line numbers, and what was left out."""

  pairs: list[tuple[str, str, int]]
  skipped_lines: list[int]
  blank_lines: int
  num_lines: int  # lines in the file, blank and skipped ones included (a final newline ends the last line)


def _split_line(line: str, path: str, lineno: int) -> tuple[str, str]:
  fields = line.split('\t')
  if len(fields) not in (2, 3):
    raise TsvFormatError(
      f'{path}:{lineno}: expected 2 or 3 tab-separated fields (source, target, optional '
      f'attribution), found {len(fields)}; set data.skip_bad_lines=True to skip such lines'
    )
  for k, field in enumerate(fields[:-1]):
    opens = field.lstrip().startswith('"') and not field.rstrip().endswith('"')
    if opens and any(f.rstrip().endswith('"') for f in fields[k + 1 :]):
      raise TsvFormatError(
        f'{path}:{lineno}: a double quote opens field {k + 1} and closes in a later one: '
        'the file is plain TSV (every tab separates fields, no quoting); remove the tab '
        'inside the sentence, or set data.skip_bad_lines=True to skip such lines'
      )
  source, target = fields[0].strip(), fields[1].strip()
  if not source or not target:
    raise TsvFormatError(
      f'{path}:{lineno}: empty source or target sentence; set data.skip_bad_lines=True to skip such lines'
    )
  return source, target


def refuse_pipes(path: str, setting: str) -> None:
  """Refuses a path that is not a regular file or a directory (a pipe from process substitution, a device):
  such a file can be read only once, and the corpus is read several times (to check it, to build it, and
  again to resume or analyse the run); only the first read would see data."""
  try:
    mode = os.stat(path).st_mode
  except OSError:
    return  # the read itself names what is wrong
  if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
    raise TsvFormatError(
      f'{setting} {path} is a pipe or a device, not a file: attnmt reads it more than once (to build the corpus, '
      'and again to resume or analyse the run); save it to a file first (e.g. `... > pairs.tsv`) and pass that'
    )


def read_pairs(path: str, skip_bad_lines: bool = False) -> TsvPairs:
  """Parses `path`; raises TsvFormatError (one line, file and line number) on a bad line
  unless `skip_bad_lines`, and on an empty or unreadable file, or a pipe (refuse_pipes)."""
  refuse_pipes(path, 'data.tsv_path')
  try:
    with open(path, 'rb') as f:
      raw_lines = f.read().split(b'\n')
  except OSError as e:
    raise TsvFormatError(f'cannot read sentence-pair file {path}: {e.strerror}') from None
  if raw_lines[0].startswith(b'\xef\xbb\xbf'):  # UTF-8 byte-order mark
    raw_lines[0] = raw_lines[0][3:]
  pairs, skipped, blank = [], [], 0
  for lineno, raw in enumerate(raw_lines, 1):
    try:
      line = raw.decode('utf-8').rstrip('\r')
      if not line.strip():
        blank += 1
        continue
      source, target = _split_line(line, path, lineno)
    except (UnicodeDecodeError, TsvFormatError) as e:
      if not skip_bad_lines:
        if isinstance(e, UnicodeDecodeError):
          raise TsvFormatError(f'{path}:{lineno}: not valid UTF-8') from None
        raise
      skipped.append(lineno)
      continue
    pairs.append((source, target, lineno))
  if not pairs:
    raise TsvFormatError(f'{path}: no sentence pairs (the file is empty or every line is bad)')
  distinct = len({p[0] for p in pairs})
  if distinct < 3:
    raise TsvFormatError(
      f'{path}: {distinct} distinct source sentence(s); training, validation '
      'and test need at least one each (3 or more; a few hundred to learn)'
    )
  ends_with_newline = raw_lines[-1] == b''
  return TsvPairs(pairs, skipped, blank - ends_with_newline, len(raw_lines) - ends_with_newline)


@dataclasses.dataclass(eq=False)
class TsvConfig(tfds.core.BuilderConfig):
  """A pair file, the language codes of its columns, and how to split it."""

  path: str = ''
  source_lang: str = 'source'
  target_lang: str = 'target'
  skip_bad_lines: bool = False
  validation_fraction: float = 0.05
  test_fraction: float = 0.05


def tsv_config(
  path: str, source_lang: str, target_lang: str, skip_bad_lines: bool, validation_fraction: float, test_fraction: float
) -> TsvConfig:
  """A config named by a hash of the file's content and the settings, so an edited file
  is rebuilt and the same file is not."""
  if source_lang == target_lang or 'line' in (source_lang, target_lang):
    raise ValueError(f'language codes must differ and not be "line": {source_lang!r}, {target_lang!r}')
  digest = hashlib.sha256()
  with open(path, 'rb') as f:
    digest.update(f.read())
  digest.update(repr((source_lang, target_lang, skip_bad_lines, validation_fraction, test_fraction)).encode())
  stem = ''.join(ch if ch.isalnum() else '_' for ch in os.path.basename(path))[:40]
  return TsvConfig(
    name=f'{stem}_{digest.hexdigest()[:10]}',
    description=path,
    path=os.path.abspath(path),
    source_lang=source_lang,
    target_lang=target_lang,
    skip_bad_lines=skip_bad_lines,
    validation_fraction=validation_fraction,
    test_fraction=test_fraction,
  )


class TsvPairsBuilder(tfds.core.GeneratorBasedBuilder):
  """Sentence pairs from a tab-separated file; features named by the language codes."""

  name = 'tsv_pairs'
  VERSION = tfds.core.Version('1.0.0')
  RELEASE_NOTES = {'1.0.0': 'First version.'}
  BUILDER_CONFIGS = [TsvConfig(name='default', description='Set a path with tsv_config().')]

  def _info(self) -> tfds.core.DatasetInfo:
    c = self.builder_config
    return self.dataset_info_from_configs(
      features=tfds.features.FeaturesDict(
        {
          c.source_lang: tfds.features.Text(),
          c.target_lang: tfds.features.Text(),
          'line': tfds.features.Scalar(dtype=np.int64),  # 1-based line in the file
        }
      ),
      supervised_keys=(c.source_lang, c.target_lang),
      metadata=tfds.core.MetadataDict(),
    )

  def _split_generators(self, dl_manager):
    del dl_manager  # A local file.
    c = self.builder_config
    parsed = read_pairs(c.path, c.skip_bad_lines)
    self.info.metadata['skipped_lines'] = len(parsed.skipped_lines)
    self.info.metadata['first_skipped_lines'] = parsed.skipped_lines[:20]
    self.info.metadata['blank_lines'] = parsed.blank_lines
    split_of = splits_lib.assign_splits((p[0] for p in parsed.pairs), c.validation_fraction, c.test_fraction)
    by_split = splits_lib.group_by_split(parsed.pairs, lambda p: p[0], split_of)
    return {s: self._generate_examples(pairs) for s, pairs in by_split.items()}

  def _generate_examples(self, pairs):
    c = self.builder_config
    for source, target, lineno in pairs:
      yield lineno, {c.source_lang: source, c.target_lang: target, 'line': lineno}
