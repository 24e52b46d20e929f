"""Which examples go into which batch, and how much padding that costs.

An epoch's plan is a list of batches (arrays of example positions), a pure function of the
lengths, the options, the seed and the epoch number: the iterator can therefore resume
from (epoch, batch) by recomputing the plan, with no other saved state.

Bucketing is the "sortish" scheme: shuffle, cut into chunks of `bucket_window` batches,
sort each chunk by length (`sort_keys`), cut it into batches, shuffle the batches. Sentences of similar
length share a batch, yet every epoch mixes differently.
"""

import dataclasses

import numpy as np


@dataclasses.dataclass(frozen=True)
class BatchOptions:
  """How to batch; see get_data_config for each field."""

  batch_size: int = 64
  batch_tokens: int = 0
  bucket: bool = True
  bucket_window: int = 100
  pad_to_multiple: int = 8
  fixed_source_length: int = 0
  fixed_target_length: int = 0
  drop_remainder: bool = False
  equal_widths: bool = False
  widths: tuple = ()  # the widths a batch may take (choose_widths): each padded width rounds up to one of them


def padded_length(max_len: int, multiple: int, fixed: int, widths: tuple = ()) -> int:
  """The padded size of a batch dimension whose longest row has `max_len` tokens: a multiple of `multiple`,
  then the smallest of `widths` that holds it (when one does)."""
  if fixed:
    return fixed
  multiple = max(multiple, 1)
  return round_up(max(multiple, -(-max_len // multiple) * multiple), widths)


def round_up(width: int, widths: tuple) -> int:
  """The smallest of `widths` that holds `width`, or `width` itself when none does."""
  return min((w for w in widths if w >= width), default=width)


def batch_widths(src_max: int, tgt_max: int, options: BatchOptions) -> tuple[int, int]:
  """The padded (source, target) widths of a batch whose longest rows have these lengths. With
  `equal_widths` both are the larger one (when neither is fixed): one shape per width, not one per pair."""
  s = padded_length(src_max, options.pad_to_multiple, options.fixed_source_length, options.widths)
  t = padded_length(tgt_max, options.pad_to_multiple, options.fixed_target_length, options.widths)
  if options.equal_widths and not (options.fixed_source_length or options.fixed_target_length):
    s = t = max(s, t)
  return s, t


def choose_widths(counts: dict, k: int) -> tuple:
  """At most `k` widths such that padding every width of `counts` (width -> how many positions take it: rows x
  steps) up to the smallest chosen width that holds it costs the fewest padded positions; the largest width is
  always chosen. Exact (dynamic programming over the sorted distinct widths)."""
  w = sorted(counts)
  if k <= 0 or len(w) <= k:
    return tuple(w)
  n = len(w)
  mass = [0] + list(np.cumsum([counts[x] for x in w]))

  def cost(i, j):  # widths w[i..j] all padded to w[j]
    return w[j] * (mass[j + 1] - mass[i])

  inf = float('inf')
  best = [[inf] * n for _ in range(k + 1)]  # best[c][j]: w[0..j] covered by c widths, the last one w[j]
  back = [[-1] * n for _ in range(k + 1)]
  for j in range(n):
    best[1][j] = cost(0, j)
  for c in range(2, k + 1):
    for j in range(n):
      for i in range(j):
        value = best[c - 1][i] + cost(i + 1, j)
        if value < best[c][j]:
          best[c][j], back[c][j] = value, i
  c = min(range(1, k + 1), key=lambda c: best[c][n - 1])
  chosen, j = [], n - 1
  while j >= 0:
    chosen.append(w[j])
    j, c = back[c][j], c - 1
  return tuple(sorted(chosen))


def padded_positions(counts: dict, widths: tuple) -> int:
  """Positions (rows x width, summed) that `counts` (width -> rows) take once each width rounds up to `widths`."""
  return sum(round_up(w, widths) * n for w, n in counts.items())


def _cut(positions: np.ndarray, src_len, tgt_len, options: BatchOptions) -> list[np.ndarray]:
  """Consecutive batches of `positions`: `batch_size` each, or as many as fit in
  `batch_tokens` padded tokens (max of source and target width times rows)."""
  if not options.batch_tokens:
    return [positions[i : i + options.batch_size] for i in range(0, len(positions), options.batch_size)]
  batches, start, widest = [], 0, 0
  for k, p in enumerate(positions):
    width = max(
      padded_length(src_len[p], options.pad_to_multiple, options.fixed_source_length, options.widths),
      padded_length(tgt_len[p], options.pad_to_multiple, options.fixed_target_length, options.widths),
    )
    if k > start and max(widest, width) * (k - start + 1) > options.batch_tokens:
      batches.append(positions[start:k])
      start, widest = k, 0
    widest = max(widest, width)
  if start < len(positions):
    batches.append(positions[start:])
  return batches


# An evaluation batch (validation, test, analysis) holds at most this many padded source positions: a long
# sentence goes in a batch of its own (or with a few others as long), so decoding memory follows the
# sentence being decoded, not a batch of 64 of them. Batches of ordinary lengths (64 x 128) are not cut.
EVAL_BATCH_POSITIONS = 8192


def eval_rows(src_width: int, options: BatchOptions, limit: int = EVAL_BATCH_POSITIONS) -> int:
  """The rows an evaluation batch of this padded source width is padded to (sentence batches): the batch size,
  or as many as `limit` positions hold for very long sentences. A function of the width alone, so evaluation
  and decoding compile one program per width, whatever the batch's own row count (an epoch's last batch, a cut
  of `cap_positions`)."""
  return max(1, min(options.batch_size, limit // max(src_width, 1)))


def cap_positions(batch: np.ndarray, src_len, options: BatchOptions, limit: int = EVAL_BATCH_POSITIONS) -> list:
  """`batch` cut, in order, into consecutive batches of rows x padded source width <= `limit` (one row at
  least: a sentence longer than `limit` is alone)."""
  out, start, widest = [], 0, 0
  for k, p in enumerate(batch):
    width = padded_length(int(src_len[p]), options.pad_to_multiple, options.fixed_source_length, options.widths)
    if k > start and max(widest, width) * (k - start + 1) > limit:
      out.append(batch[start:k])
      start, widest = k, 0
    widest = max(widest, width)
  if start < len(batch):
    out.append(batch[start:])
  return out


def sort_keys(src_len: np.ndarray, tgt_len: np.ndarray, options: BatchOptions) -> tuple:
  """The keys bucketing sorts a chunk by, for `np.lexsort` (last key first): the length that sets the batch's
  width first. Apart, that is the source length, then the target's. With `equal_widths` a batch takes the
  larger of its two widths on both sides, so the longer side of each pair comes first, then the shorter: on the
  main job's corpus that cuts the padded slots from 26 % to 15 % (docs/results/main.md, "Time")."""
  if options.equal_widths and not (options.fixed_source_length or options.fixed_target_length):
    return np.minimum(src_len, tgt_len), np.maximum(src_len, tgt_len)
  return tgt_len, src_len


def plan_epoch(
  src_len: np.ndarray, tgt_len: np.ndarray, options: BatchOptions, seed: int, epoch: int, shuffle: bool
) -> list[np.ndarray]:
  """The batches of one epoch as arrays of positions into `src_len` / `tgt_len`."""
  n = len(src_len)
  rng = np.random.default_rng([seed, epoch])
  order = rng.permutation(n) if shuffle else np.arange(n)
  if options.bucket:
    chunk = options.batch_size * options.bucket_window if shuffle else max(n, 1)
    batches = []
    for start in range(0, n, chunk):
      part = order[start : start + chunk]
      part = part[np.lexsort(sort_keys(src_len[part], tgt_len[part], options))]
      batches.extend(_cut(part, src_len, tgt_len, options))
    if shuffle:
      batches = [batches[i] for i in rng.permutation(len(batches))]
  else:
    batches = _cut(order, src_len, tgt_len, options)
  if options.drop_remainder and not options.batch_tokens:
    batches = [b for b in batches if len(b) == options.batch_size]
  if not shuffle:  # evaluation: very long sentences in batches of their own
    batches = [part for b in batches for part in cap_positions(b, src_len, options)]
  return batches


def padding_fraction(
  batches: list[np.ndarray], src_len: np.ndarray, tgt_len: np.ndarray, options: BatchOptions
) -> float:
  """Fraction of source plus target slots that are padding over `batches`."""
  real = padded = 0
  for b in batches:
    s, t = batch_widths(int(src_len[b].max()), int(tgt_len[b].max()), options)
    real += int(src_len[b].sum() + tgt_len[b].sum())
    padded += len(b) * (s + t)
  return 1.0 - real / padded if padded else 0.0
