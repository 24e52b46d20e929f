"""Tiny tasks on random token strings: reverse (the string reversed) and copy (the string itself).

Attention should learn to look at the mirrored source position (reverse) or the same one (copy, a
monotone task), which makes them quick checks that a model learns and that its attention means
something. Strings are split into a training half and a held-out half by a checksum, so held-out
strings are never seen in training.
"""

from __future__ import annotations

import numpy as np

from attnmt.model.seq2seq import BOS, EOS, PAD

FIRST_SYMBOL = 4  # ids below are PAD, BOS, EOS, UNK


def _held_out(strings: np.ndarray, lengths: np.ndarray) -> np.ndarray:
  """Deterministic split: a string is held out when its checksum is 0 mod 5."""
  weights = np.arange(1, strings.shape[1] + 1)
  masked = np.where(np.arange(strings.shape[1])[None] < lengths[:, None], strings, 0)
  return (masked * weights).sum(1) % 5 == 0


def reverse_batch(
  rng: np.random.Generator,
  batch: int,
  num_symbols: int,
  length_probs: np.ndarray,
  held_out: bool = False,
  reverse: bool = True,
) -> dict:
  """A batch of the task; `length_probs[i]` is the probability of length i + 1.

  Source rows are `x_1 .. x_L EOS`; targets `x_L .. x_1 EOS` (with `reverse=False`, `x_1 .. x_L EOS`)
  with BOS-shifted decoder inputs.
  """
  max_len = len(length_probs)
  strings, lengths = [], []
  while len(strings) < batch:
    n = batch - len(strings)
    lens = rng.choice(np.arange(1, max_len + 1), size=n, p=length_probs)
    s = rng.integers(FIRST_SYMBOL, FIRST_SYMBOL + num_symbols, size=(n, max_len))
    keep = _held_out(s, lens) == held_out
    strings.extend(s[keep])
    lengths.extend(lens[keep])
  return encode_pairs(np.stack(strings[:batch]), np.array(lengths[:batch]), reverse)


def copy_batch(
  rng: np.random.Generator, batch: int, num_symbols: int, length_probs: np.ndarray, held_out: bool = False
) -> dict:
  """A batch of the copy task: targets `x_1 .. x_L EOS`, the source itself (see `reverse_batch`)."""
  return reverse_batch(rng, batch, num_symbols, length_probs, held_out, reverse=False)


def encode_pairs(strings: np.ndarray, lengths: np.ndarray, reverse: bool = True) -> dict:
  """Builds the batch dict (src, src_len, tgt_in, tgt_out, tgt_len) from strings and their lengths; the
  targets are the strings reversed, or as they are with `reverse=False`."""
  b, max_len = strings.shape
  src = np.full((b, max_len + 1), PAD, np.int32)
  tgt_out = np.full((b, max_len + 1), PAD, np.int32)
  for i, (s, n) in enumerate(zip(strings, lengths)):
    src[i, :n], src[i, n] = s[:n], EOS
    tgt_out[i, :n], tgt_out[i, n] = (s[:n][::-1] if reverse else s[:n]), EOS
  tgt_in = np.concatenate([np.full((b, 1), BOS, np.int32), tgt_out[:, :-1]], axis=1)
  tgt_in[tgt_in == EOS] = PAD
  return dict(
    src=src,
    src_len=(lengths + 1).astype(np.int32),
    tgt_in=tgt_in,
    tgt_out=tgt_out,
    tgt_len=(lengths + 1).astype(np.int32),
  )
