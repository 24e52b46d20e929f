"""Gold word alignments in the Pharaoh format, read beside a `tsv_pairs` corpus (`data.alignment_path`).

One line per line of the pair file: line k holds the links of the pair on line k of `data.tsv_path`, as
space-separated `i-j` items, i a 0-based source word and j a 0-based target word, the words being the
whitespace-separated words of the TSV sentences (what fast_align and GIZA++ read). An empty line is a pair
without links; the lines of blank or skipped (`data.skip_bad_lines`) TSV lines are read and not used.
`ipj` (a possible link, as in hand-aligned test sets) is accepted and counts as a link. Every error names
the file and line and says what to fix. The word links become token links in `pipeline.token_links`.
"""

from __future__ import annotations

import re

from attnmt.data.tsv_pairs import TsvPairs, refuse_pipes

_LINK = re.compile(r'(\d+)[-p](\d+)')


class PharaohFormatError(ValueError):
  """A malformed or unreadable alignment file, or one out of step with its pair file."""


def parse_links(line: str, path: str = '<alignment>', lineno: int = 0) -> set[tuple[int, int]]:
  """'0-0 2-1 1p1' -> {(0, 0), (2, 1), (1, 1)}: (source word, target word) pairs."""
  links = set()
  for item in line.split():
    match = _LINK.fullmatch(item)
    if match is None:
      raise PharaohFormatError(
        f'{path}:{lineno}: {item!r} is not a Pharaoh link; write 0-based source-target word pairs '
        "such as '0-0 1-2' separated by spaces (an empty line: no links)"
      )
    links.add((int(match.group(1)), int(match.group(2))))
  return links


def parse_sure_possible(line: str, path: str, lineno: int) -> tuple[set, set]:
  """'0-1 2p3' -> (sure, possible) sets of (source, target) pairs, sure links also possible; a malformed
  item is refused naming the file and line (parse_links's message)."""
  parse_links(line, path, lineno)
  sure = {(int(s), int(t)) for s, t in (item.split('-') for item in line.split() if '-' in item)}
  possible = {(int(s), int(t)) for s, t in (item.split('p') for item in line.split() if 'p' in item)}
  return sure, possible | sure


def check_within(links: set[tuple[int, int]], n_source: int, n_target: int, where: str, sentence: str) -> None:
  """Refuses a link naming a word beyond its sentence (AER would silently count it as missed): `where` is
  'file:line', `sentence` names the sentence pair for the message ('test sentence 5')."""
  for s, t in sorted(links):
    for side, index, n in (('source', s, n_source), ('target', t, n_target)):
      if index >= n:
        raise PharaohFormatError(
          f'{where}: link {s}-{t} names {side} word {index}, but {sentence} has {n} {side} words (0 to {n - 1}); '
          'indices are 0-based over whitespace-separated words, source first'
        )


def format_links(links: set[tuple[int, int]]) -> str:
  """{(0, 0), (2, 1)} -> '0-0 2-1' (sorted)."""
  return ' '.join(f'{s}-{t}' for s, t in sorted(links))


def read_lines(path: str, setting: str = 'data.alignment_path') -> list[str]:
  """The lines of `path` as read_pairs counts them: a final newline ends the last line, '\\r' is dropped, and
  so is a byte-order mark. `setting` is what the user gave the path as, for the message."""
  try:
    with open(path, 'rb') as f:
      raw = f.read()
  except OSError as e:
    raise PharaohFormatError(f'cannot read alignment file {path}: {e.strerror}; check {setting}') from None
  raw = raw[3:] if raw.startswith(b'\xef\xbb\xbf') else raw  # UTF-8 byte-order mark
  pieces = raw.split(b'\n')
  if pieces[-1] == b'':
    pieces.pop()
  lines = []
  for lineno, piece in enumerate(pieces, 1):
    try:
      lines.append(piece.decode('utf-8').rstrip('\r'))
    except UnicodeDecodeError:
      raise PharaohFormatError(f'{path}:{lineno}: not valid UTF-8') from None
  return lines


def read_alignments(path: str, tsv_path: str, pairs: TsvPairs) -> dict[int, str]:
  """The links of every pair of `pairs` (read from `tsv_path`) by its line number, as sorted Pharaoh strings.

  Refuses a file whose line count differs from the pair file's, a malformed item, and a word index
  beyond its sentence, each with one line naming the file, the line and the fix.
  """
  refuse_pipes(path, 'data.alignment_path')
  lines = read_lines(path)
  if len(lines) != pairs.num_lines:
    raise PharaohFormatError(
      f'{path} has {len(lines)} lines and {tsv_path} has {pairs.num_lines}; give one Pharaoh line per line of '
      'the pair file (line k aligns the pair on line k; an empty line for a pair without links)'
    )
  out = {}
  for source, target, lineno in pairs.pairs:
    links = parse_links(lines[lineno - 1], path, lineno)
    check_within(
      links, len(source.split()), len(target.split()), f'{path}:{lineno}', f'the pair on line {lineno} of {tsv_path}'
    )
    out[lineno] = format_links(links)
  return out
