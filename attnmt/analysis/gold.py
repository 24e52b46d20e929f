"""The gold word alignments a run's attention is scored against: a Pharaoh file given as --pharaoh, read and
checked against the split, or the dataset's own; and every seed's alignment error rate (AER) against them."""

from __future__ import annotations

from typing import NamedTuple, Optional

from attnmt import data
from attnmt.analysis import inspection
from attnmt.data import pharaoh as pharaoh_file


class GoldLinks(NamedTuple):
  path: str
  lines: list  # (sure, possible) link sets of each line


def read_pharaoh(pharaoh) -> GoldLinks:
  """The (sure, possible) links of every line of a Pharaoh file given as --pharaoh, read once (it may be a
  pipe): a byte-order mark is dropped, and a malformed line is refused naming the file and the line. Already
  read GoldLinks pass through."""
  if isinstance(pharaoh, GoldLinks):
    return pharaoh
  lines = pharaoh_file.read_lines(pharaoh, '--pharaoh')
  return GoldLinks(pharaoh, [pharaoh_file.parse_sure_possible(line, pharaoh, k) for k, line in enumerate(lines, 1)])


def check_pharaoh(gold: GoldLinks, sources: list[str], targets: list[str], split: str) -> None:
  """Refuses gold links that cannot belong to the split: a line count other than its sentence count, or a
  link naming a word beyond its sentence (AER would silently count it as missed), naming file, line and link."""
  if len(gold.lines) != len(sources):
    raise ValueError(
      f'{gold.path} has {len(gold.lines)} lines but the {split} split has {len(sources)} sentences; '
      'give one Pharaoh line per sentence, in split order'
    )
  for k, ((_, possible), src, tgt) in enumerate(zip(gold.lines, sources, targets), 1):
    pharaoh_file.check_within(possible, len(src.split()), len(tgt.split()), f'{gold.path}:{k}', f'{split} sentence {k}')


def alignment_error_rates(run, split, pharaoh) -> tuple[Optional[list[float]], Optional[dict]]:
  """AER of every seed against the dataset's gold alignments or a Pharaoh file (one line per example), and
  the gold links with the first seed's forced attention ({'sure', 'possible', 'forced'}, by example index;
  inspection.split_word_attention); (None, None) without gold."""
  if pharaoh:
    gold = read_pharaoh(pharaoh)
    check_pharaoh(gold, *data.raw_texts(run.prepared, split), split)
    gold_lines = gold.lines
    sure = {i: s for i, (s, _) in enumerate(gold_lines)}
    possible = {i: p for i, (_, p) in enumerate(gold_lines)}
  else:
    sure = inspection.gold_alignments_from_batches(run, split)
    if sure is None:
      return None, None
    possible = sure
  out, forced = [], None
  for seed_i in range(len(run.seeds)):
    words = inspection.split_word_attention(run, seed_i, split)
    forced = words if seed_i == 0 else forced
    pred = {i: inspection.attention_alignment(w) if w.size else set() for i, (w, _, _) in words.items()}
    keys = sorted(pred)
    out.append(
      inspection.alignment_error_rate([pred[k] for k in keys], [sure[k] for k in keys], [possible[k] for k in keys])
    )
  return out, {'sure': sure, 'possible': possible, 'forced': forced}
