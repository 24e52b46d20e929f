"""Token ids per split, length filtering, numpy batches, and a resumable batch iterator.

Batch format (the model depends on it exactly), all int32:
  src      [B, S]  source ids, then EOS (2), then PAD (0)
  src_len  [B]     source tokens including the EOS
  tgt_in   [B, T]  BOS (1), then target ids (decoder input), then PAD
  tgt_out  [B, T]  target ids, then EOS (labels), then PAD
  tgt_len  [B]     tgt_out tokens including the EOS
  index    [B]     example position in its split (see raw_texts)
  alignment [B, T, S]  1 where target token t (tgt_out position) aligns to source token s;
                   corpora with gold alignments only (the synthetic task; tsv_pairs with
                   data.alignment_path)
"""

import dataclasses
from typing import Optional

import numpy as np

from attnmt.data import batching, pharaoh
from attnmt.data.tokenizers import BOS_ID, EOS_ID


@dataclasses.dataclass
class TokenizedSplit:
  """Token ids of every example of a split, stored flat (ids + offsets) to stay compact.

  Lengths count the EOS that batches append. `links[i]` holds the example's gold
  alignment as (source token, target token) rows, when the dataset has one.
  """

  src_ids: np.ndarray
  src_offsets: np.ndarray
  tgt_ids: np.ndarray
  tgt_offsets: np.ndarray
  links: Optional[list[np.ndarray]] = None

  @property
  def src_len(self) -> np.ndarray:
    return np.diff(self.src_offsets).astype(np.int32) + 1

  @property
  def tgt_len(self) -> np.ndarray:
    return np.diff(self.tgt_offsets).astype(np.int32) + 1

  def __len__(self) -> int:
    return len(self.src_offsets) - 1

  def src(self, i: int) -> np.ndarray:
    return self.src_ids[self.src_offsets[i] : self.src_offsets[i + 1]]

  def tgt(self, i: int) -> np.ndarray:
    return self.tgt_ids[self.tgt_offsets[i] : self.tgt_offsets[i + 1]]


def _flatten(sequences: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
  offsets = np.zeros(len(sequences) + 1, np.int64)
  np.cumsum([len(s) for s in sequences], out=offsets[1:])
  ids = np.fromiter((i for s in sequences for i in s), np.int32, count=int(offsets[-1]))
  return ids, offsets


def encode_words(tokenizer, text: str) -> tuple[list[int], list[int]]:
  """Ids of `text` encoded word by word (whitespace-separated words), and the word index of each token.

  A word may give several tokens (sentencepiece pieces; `classic_preprocess` splitting 'well-known') or
  none (the word tokenizer drops punctuation)."""
  ids, word_of = [], []
  for w, word in enumerate(text.split()):
    pieces = tokenizer.encode(word)
    ids.extend(pieces)
    word_of.extend([w] * len(pieces))
  return ids, word_of


def token_links(alignment: str, src_word_of: list[int], tgt_word_of: list[int]) -> np.ndarray:
  """Word links (a Pharaoh string '0-0 1-2') as (source token, target token) rows: every token of a linked
  source word links to every token of its target word. A word without tokens loses its links."""
  word_links = pharaoh.parse_links(alignment)
  rows = [(s, t) for t, tw in enumerate(tgt_word_of) for s, sw in enumerate(src_word_of) if (sw, tw) in word_links]
  return np.array(rows, np.int32).reshape(-1, 2)


def tokenize_split(raw, src_tokenizer, tgt_tokenizer) -> TokenizedSplit:
  """Encodes a RawSplit. With gold alignments, sentences are encoded word by word so that
  each token knows its word (sentencepiece pieces never cross spaces, so the ids match)."""
  if raw.alignment is None:
    src = src_tokenizer.encode_batch(raw.source)
    tgt = tgt_tokenizer.encode_batch(raw.target)
    links = None
  else:
    src_enc = [encode_words(src_tokenizer, s) for s in raw.source]
    tgt_enc = [encode_words(tgt_tokenizer, t) for t in raw.target]
    src, tgt = [e[0] for e in src_enc], [e[0] for e in tgt_enc]
    links = [token_links(a, s[1], t[1]) for a, s, t in zip(raw.alignment, src_enc, tgt_enc)]
  return TokenizedSplit(*_flatten(src), *_flatten(tgt), links)


def length_filter(data: TokenizedSplit, max_source_length: int, max_target_length: int) -> np.ndarray:
  """Positions of the examples whose lengths (with EOS) fit; 0 means no limit."""
  keep = np.ones(len(data), bool)
  if max_source_length:
    keep &= data.src_len <= max_source_length
  if max_target_length:
    keep &= data.tgt_len <= max_target_length
  return np.flatnonzero(keep)


def build_batch(
  data: TokenizedSplit, positions: np.ndarray, options: batching.BatchOptions, rows: Optional[slice] = None
) -> dict[str, np.ndarray]:
  """The numpy batch (format in the module docstring) of the examples at `positions`.

  A position of -1 is an empty row (lengths 0, index -1). With `rows`, only those rows are
  built, at the widths of the whole batch: one host's share of a global batch.
  """
  real = positions[positions >= 0]
  s, t = batching.batch_widths(int(data.src_len[real].max()), int(data.tgt_len[real].max()), options)
  if rows is not None:
    positions = positions[rows]
  empty = positions < 0
  src_len = np.where(empty, 0, data.src_len[np.maximum(positions, 0)])
  tgt_len = np.where(empty, 0, data.tgt_len[np.maximum(positions, 0)])
  b = len(positions)
  batch = {
    'src': np.zeros((b, s), np.int32),
    'tgt_in': np.zeros((b, t), np.int32),
    'tgt_out': np.zeros((b, t), np.int32),
    'src_len': src_len.astype(np.int32),
    'tgt_len': tgt_len.astype(np.int32),
    'index': positions.astype(np.int32),
  }
  for row, i in enumerate(positions):
    if i < 0:
      continue
    src, tgt = data.src(i), data.tgt(i)
    batch['src'][row, : len(src)] = src
    batch['src'][row, len(src)] = EOS_ID
    batch['tgt_in'][row, 0] = BOS_ID
    batch['tgt_in'][row, 1 : len(tgt) + 1] = tgt
    batch['tgt_out'][row, : len(tgt)] = tgt
    batch['tgt_out'][row, len(tgt)] = EOS_ID
  if data.links is not None:
    batch['alignment'] = np.zeros((b, t, s), np.int32)
    for row, i in enumerate(positions):
      if i < 0:
        continue
      links = data.links[i]
      batch['alignment'][row, links[:, 1], links[:, 0]] = 1
  return batch


class BatchIterator:
  """Batches of one split over epochs; `state()` is a small dict that `restore` (or
  the `state` argument) turns back into exactly the same remaining stream.

  Data parallelism: `row_multiple` pads every batch with empty rows (length 0, index -1) to a
  multiple of the device count, and `shard=(process_index, process_count)` yields only this
  process's block of rows of each global batch. The plan (which examples form which global
  batch) depends on lengths and seeds only, so every process agrees on it without talking, and
  the global batches are the same for any number of processes.
  """

  def __init__(
    self,
    data: TokenizedSplit,
    keep: np.ndarray,
    options: batching.BatchOptions,
    seed: int,
    num_epochs: Optional[int],
    shuffle: bool,
    split: str = '',
    state: Optional[dict] = None,
    row_multiple: int = 1,
    shard: tuple[int, int] = (0, 1),
    fixed_rows: bool = False,
  ):
    if row_multiple % shard[1]:
      raise ValueError(f'row_multiple {row_multiple} must be a multiple of the process count {shard[1]}')
    self._row_multiple, self._shard, self._fixed_rows = row_multiple, shard, fixed_rows
    self._data, self._keep, self._options = data, keep, options
    self._seed, self._num_epochs, self._shuffle, self._split = seed, num_epochs, shuffle, split
    self._all_src_len, self._all_tgt_len = data.src_len, data.tgt_len  # by position in the split
    self._src_len, self._tgt_len = self._all_src_len[keep], self._all_tgt_len[keep]
    self._epoch, self._batch, self._plan = 0, 0, None
    if state is not None:
      self.restore(state)

  def state(self) -> dict:
    """Where the iterator stands: JSON-able, a few integers."""
    return {
      'split': self._split,
      'seed': self._seed,
      'num_examples': int(len(self._keep)),
      'epoch': self._epoch,
      'batch': self._batch,
    }

  def restore(self, state: dict) -> None:
    """Continues from `state`; refuses a state saved for other data or another seed."""
    mine = self.state()
    for key in ('split', 'seed', 'num_examples'):
      if state[key] != mine[key]:
        raise ValueError(f'iterator state was saved with {key}={state[key]!r}, this iterator has {mine[key]!r}')
    self._epoch, self._batch, self._plan = int(state['epoch']), int(state['batch']), None

  def epoch_plan(self, epoch: int) -> list[np.ndarray]:
    """The batches of `epoch`, as positions into the split."""
    plan = batching.plan_epoch(self._src_len, self._tgt_len, self._options, self._seed, epoch, self._shuffle)
    return [self._keep[b] for b in plan]

  def widths(self, positions: np.ndarray) -> tuple[int, int]:
    """The padded (source, target) widths of the batch of these positions."""
    return batching.batch_widths(
      int(self._all_src_len[positions].max()), int(self._all_tgt_len[positions].max()), self._options
    )

  def rows(self, positions: np.ndarray) -> int:
    """The rows of the batch of these positions once padded: to a multiple of `row_multiple`, and with
    `fixed_rows` to batching.eval_rows of its source width (at least its own rows)."""
    rows = len(positions) + (-len(positions) % self._row_multiple)
    if self._fixed_rows and not self._options.batch_tokens:
      fixed = batching.eval_rows(self.widths(positions)[0], self._options)
      rows = max(rows, fixed + (-fixed % self._row_multiple))
    return rows

  def shapes_ahead(self, steps: int) -> list[tuple[int, int, int]]:
    """(rows, source width, target width) of the next `steps` batches (fewer if the data run out), from the
    plans alone: nothing is built and the iterator does not move. Rows and widths are the global batch's."""
    out, epoch, batch, plan = [], self._epoch, self._batch, self._plan
    while len(out) < steps:
      if self._num_epochs and epoch >= self._num_epochs:
        break
      if plan is None:
        plan = self.epoch_plan(epoch)
        if not plan:
          break
      if batch >= len(plan):
        epoch, batch, plan = epoch + 1, 0, None
        continue
      positions = plan[batch]
      out.append((self.rows(positions), *self.widths(positions)))
      batch += 1
    return out

  def __iter__(self):
    return self

  def __next__(self) -> dict[str, np.ndarray]:
    while True:
      if self._num_epochs and self._epoch >= self._num_epochs:
        raise StopIteration
      if self._plan is None:
        self._plan = self.epoch_plan(self._epoch)
        if not self._plan:
          raise StopIteration  # Nothing survives filtering; never loop forever.
      if self._batch < len(self._plan):
        break
      self._epoch, self._batch, self._plan = self._epoch + 1, 0, None
    positions = self._plan[self._batch]
    self._batch += 1
    positions = np.pad(positions, (0, self.rows(positions) - len(positions)), constant_values=-1)
    index, count = self._shard
    share = len(positions) // count
    rows = slice(index * share, (index + 1) * share) if count > 1 else None
    return build_batch(self._data, positions, self._options, rows)
