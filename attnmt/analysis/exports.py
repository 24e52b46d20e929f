"""Attention in the formats other tools read: hard alignments (Pharaoh), soft matrices (NPZ, JSON with the
tokens) and the Nematus / SoftAlignments text format.

Every export holds the word-level attention of forced decoding of the reference (inspection.split_word_attention:
subword attention summed over a source word's pieces and averaged over a target word's pieces), one entry
per sentence of the split in index order, so line i of a Pharaoh file is sentence i. Pharaoh, NPZ and JSON
leave the EOS out; the Nematus format counts it on both sides (a row for the step that emits EOS, a column
for the source EOS), as its readers expect.
"""

from __future__ import annotations

import json
import os

import numpy as np

from attnmt.analysis import inspection

FORMATS = ('pharaoh', 'npz', 'json', 'softalign')
FILES = {
  'pharaoh': 'alignments.pharaoh',
  'npz': 'attention.npz',
  'json': 'attention.json',
  'softalign': 'attention.softalign',
}


def parse_formats(text: str) -> list[str]:
  """'pharaoh,npz' -> ['pharaoh', 'npz']; an unknown name is a ValueError naming the valid ones."""
  names = [f.strip() for f in str(text).split(',') if f.strip()]
  unknown = [f for f in names if f not in FORMATS]
  if unknown:
    raise ValueError(f"unknown --export format(s) {', '.join(unknown)}; valid: {', '.join(FORMATS)} (comma-separated)")
  return names


def without_eos(weights, src: list[str], tgt: list[str]) -> tuple:
  """An entry of split_word_attention(..., eos=True) as split_word_attention(...) gives it: the EOS row,
  column and labels dropped (0 x 0 for a sentence with no words on a side)."""
  if len(src) < 2 or len(tgt) < 2:
    return np.zeros((0, 0)), [], []
  return np.asarray(weights)[:-1, :-1], list(src[:-1]), list(tgt[:-1])


def write(word_attention_eos: dict[int, tuple], out_dir: str, formats: list[str]) -> list[str]:
  """Writes each format of `word_attention_eos` ({index: (weights (T+1) x (S+1), source words, target words),
  EOS last on each side}: inspection.split_word_attention(..., eos=True)) into out_dir; returns the paths."""
  os.makedirs(out_dir, exist_ok=True)
  order = sorted(word_attention_eos)
  word_attention = {i: without_eos(*word_attention_eos[i]) for i in order}
  paths = []
  for fmt in formats:
    path = os.path.join(out_dir, FILES[fmt])
    if fmt == 'pharaoh':
      _write_pharaoh(path, [word_attention[i][0] for i in order])
    elif fmt == 'npz':
      arrays = {f'weights_{i}': np.asarray(word_attention[i][0], np.float32) for i in order}
      np.savez_compressed(path, index=np.asarray(order, np.int64), **arrays)
    elif fmt == 'json':
      payload = [
        {
          'index': i,
          'source': list(word_attention[i][1]),
          'target': list(word_attention[i][2]),
          'weights': np.round(np.asarray(word_attention[i][0], np.float64), 6).tolist(),
        }
        for i in order
      ]
      with open(path, 'w', encoding='utf-8') as f:
        json.dump(payload, f, ensure_ascii=False)
    else:
      _write_softalign(path, [(i, *word_attention_eos[i]) for i in order])
    paths.append(path)
  return paths


def _write_pharaoh(path: str, matrices: list[np.ndarray]) -> None:
  """One line per sentence: 'source-target' links, each target word to its most attended source word."""
  with open(path, 'w') as f:
    for w in matrices:
      links = sorted(inspection.attention_alignment(w), key=lambda st: (st[1], st[0])) if w.size else []
      f.write(' '.join(f'{s}-{t}' for s, t in links) + '\n')


def _write_softalign(path: str, sentences: list[tuple]) -> None:
  """Nematus's soft-alignment text, as SoftAlignments (softalignments.functions.readNematus) reads it: per
  sentence a header `<id> ||| <target words> ||| 0 ||| <source words> ||| <S+1> <T+1>`, the words without EOS
  (the reader appends `<EOS>` to each side) and the sizes counting it, then T+1 lines (one per target word,
  then the EOS step) of S+1 weights (one per source word, then the source EOS), then an empty line. The
  target is the forced-decoded reference; `sentences` hold (index, weights, source words, target words) with
  EOS last, as split_word_attention(..., eos=True) gives them."""
  with open(path, 'w', encoding='utf-8') as f:
    for index, w, src, tgt in sentences:
      f.write(f'{index} ||| {" ".join(tgt[:-1])} ||| 0 ||| {" ".join(src[:-1])} ||| {len(src)} {len(tgt)}\n')
      for row in np.asarray(w):
        f.write(' '.join(f'{x:.6f}' for x in row) + '\n')
      f.write('\n')


def read_softalign(path: str) -> list[tuple]:
  """(index, weights (T+1) x (S+1), source words, target words) of every sentence of a file `write` wrote,
  EOS last on each side, as written."""
  out = []
  with open(path, encoding='utf-8') as f:
    blocks = f.read().split('\n\n')
  for block in filter(None, (b.strip('\n') for b in blocks)):
    head, *rows = block.split('\n')
    index, tgt, _, src, sizes = (x.strip() for x in head.split('|||'))
    n_src, n_tgt = (int(x) for x in sizes.split())
    weights = np.array([[float(x) for x in r.split()] for r in rows]).reshape(n_tgt, n_src)
    out.append((int(index), weights, src.split() + ['</s>'], tgt.split() + ['</s>']))
  return out
