"""Sentences in chunks, as every test of attnmt/faithfulness/runner.py reads them: one record per sentence (its
source row, the model's own output, the reference) and chunks of records of one source width, padded.
"""

from __future__ import annotations

import hashlib

import jax.numpy as jnp
import numpy as np

from attnmt.model.seq2seq import PAD


def width(n: int) -> int:
  """Token widths rounded up to a multiple of 8: fewer shapes, fewer compilations."""
  return max(8, -(-int(n) // 8) * 8)


def first_batches(batches, max_sentences: int) -> list[dict]:
  """The first whole batches holding at least `max_sentences` sentences (0: every batch), from a list or an
  iterator (read only as far as needed)."""
  if not max_sentences:
    return list(batches)
  kept, rows = [], 0
  for b in batches:
    if rows >= max_sentences:
      break
    kept.append(b)
    rows += int(np.sum(np.asarray(b['index']) >= 0))
  return kept


def records(batches: list[dict], own: dict | None) -> list[dict]:
  """One record per real sentence, in batch order: its source row (the batch's width), the model's own output
  (with EOS, where `own` is given) and the reference (with EOS)."""
  out = []
  for b in batches:
    for r in np.flatnonzero(np.asarray(b['index']) >= 0):
      ref_len = int(b['tgt_len'][r])
      rec = {
        'src': np.asarray(b['src'])[r],
        'src_len': int(b['src_len'][r]),
        'ref': np.asarray(b['tgt_out'])[r, :ref_len],
      }
      if own is not None:
        rec['tokens'] = np.asarray(own[int(b['index'][r])].ids, np.int32)
      out.append(rec)
  return out


def chunks(records: list[dict], size: int) -> list[dict]:
  """Records in chunks of `size` rows (consecutive records of one source width; short chunks padded with copies
  of their first row of target length 0, which every test masks), token widths rounded up (`width`)."""
  groups, current = [], []
  for rec in records:
    if current and (len(current) == size or len(rec['src']) != len(current[0]['src'])):
      groups.append(current)
      current = []
    current.append(rec)
  if current:
    groups.append(current)
  chunks = []
  for group in groups:
    rows = group + [group[0]] * (size - len(group))
    real = np.arange(size) < len(group)
    chunk = {
      'real': len(group),
      'src': np.stack([r['src'] for r in rows]).astype(np.int32),
      'src_len': np.array([r['src_len'] for r in rows], np.int32),
    }
    for key, length in (('ref', 'ref_len'), ('tokens', 'lengths')):
      if key not in group[0]:
        continue
      arr = np.full((size, width(max(len(r[key]) for r in group))), PAD, np.int32)
      for k, r in enumerate(rows):
        arr[k, : len(r[key])] = r[key]
      chunk[key] = arr
      chunk[length] = np.where(real, [max(1, len(r[key])) for r in rows], 0).astype(np.int32)
    chunks.append(chunk)
  return chunks


def device(c: dict, *keys):
  """A chunk's arrays `keys` on the device."""
  return [jnp.asarray(c[k]) for k in keys]


def fingerprint(records: list[dict]) -> str:
  """A short hash of the sentences measured (each source's and reference's token ids, in order): two results
  compare only when it is the same (attnmt/faithfulness/contrasts.py)."""
  h = hashlib.sha256()
  for r in records:
    h.update(np.asarray(r['src'][: r['src_len']], np.int32).tobytes() + b'|')
    h.update(np.asarray(r['ref'], np.int32).tobytes() + b'\n')
  return h.hexdigest()[:16]
