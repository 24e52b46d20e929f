"""Length-based verse alignment (Gale & Church 1993) to catch versification differences.

The two modules number some passages differently: the Reina-Valera module follows the
Hebrew numbering in places (Numbers 13, 1 Chronicles 21, Jonah 2, ...), merges two verses
into one and leaves the other empty, or shifts a whole chapter by one verse. Pairing verses
by reference alone would then pair text with its neighbour's translation. Aligning each
book's verse sequence by character length, as Gale & Church align sentences, finds these
places: a verse pair is kept only where the alignment pairs the two verses of the same
reference one-to-one.
"""

import math
from typing import Sequence

import numpy as np

# Prior probability of each bead (source verses, target verses). Verses are nearly always
# one-to-one, so the priors favour it more than Gale & Church's sentence priors do.
BEAD_PRIORS = {(1, 1): 0.97, (2, 1): 0.01, (1, 2): 0.01, (1, 0): 0.005, (0, 1): 0.005}


def fit_length_model(src_lens: Sequence[int], tgt_lens: Sequence[int]) -> tuple[float, float]:
  """Robust estimates of Gale & Church's c (target chars per source char) and s^2
  (variance of the target length per source char) from pairs believed aligned."""
  src = np.asarray(src_lens, float)
  tgt = np.asarray(tgt_lens, float)
  keep = (src > 0) & (tgt > 0)
  src, tgt = src[keep], tgt[keep]
  c = float(np.exp(np.median(np.log(tgt / src))))
  residual = (tgt - c * src) / np.sqrt(src)
  s2 = float((1.4826 * np.median(np.abs(residual - np.median(residual)))) ** 2)
  return c, max(s2, 1e-3)


def _bead_cost(src_len: int, tgt_len: int, bead: tuple[int, int], c: float, s2: float) -> float:
  """-log P(bead) - log P(|delta| >= observed), delta as in Gale & Church."""
  mean = (src_len + tgt_len / c) / 2
  delta = 0.0 if mean == 0 else (tgt_len - c * src_len) / math.sqrt(s2 * mean)
  tail = max(math.erfc(abs(delta) / math.sqrt(2)), 1e-300)  # 2 (1 - Phi(|delta|))
  return -math.log(BEAD_PRIORS[bead]) - math.log(tail)


def align_lengths(
  src_lens: Sequence[int], tgt_lens: Sequence[int], c: float, s2: float, band: int = 10
) -> list[tuple[list[int], list[int]]]:
  """Minimum-cost bead sequence aligning two length sequences.

  Returns beads as (source indices, target indices). The search stays within `band`
  positions of the diagonal, plus the difference in lengths.
  """
  n, m = len(src_lens), len(tgt_lens)
  src_cum = np.concatenate([[0], np.cumsum(src_lens)]).tolist()
  tgt_cum = np.concatenate([[0], np.cumsum(tgt_lens)]).tolist()
  width = band + abs(n - m)
  cost = [[math.inf] * (m + 1) for _ in range(n + 1)]
  back = [[(0, 0)] * (m + 1) for _ in range(n + 1)]
  cost[0][0] = 0.0
  for i in range(n + 1):
    for j in range(max(0, i - width), min(m, i + width) + 1):
      if i == 0 and j == 0:
        continue
      for di, dj in BEAD_PRIORS:
        pi, pj = i - di, j - dj
        if pi < 0 or pj < 0 or cost[pi][pj] == math.inf:
          continue
        total = cost[pi][pj] + _bead_cost(src_cum[i] - src_cum[pi], tgt_cum[j] - tgt_cum[pj], (di, dj), c, s2)
        if total < cost[i][j]:
          cost[i][j] = total
          back[i][j] = (di, dj)
  beads = []
  i, j = n, m
  while i > 0 or j > 0:
    di, dj = back[i][j]
    if di == dj == 0:
      raise RuntimeError(f'no alignment reaches ({n}, {m}); widen the band')
    beads.append((list(range(i - di, i)), list(range(j - dj, j))))
    i, j = i - di, j - dj
  return beads[::-1]
