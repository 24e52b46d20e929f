"""Almost stochastic order (ASO): the comparison of two score distributions NLP researchers report beside (or
instead of) a t test, shown on every page beside the t verdicts where both variants have MIN_SEEDS seeds.

The definition is del Barrio, Cuesta-Albertos & Matrán (2018), as Dror, Shlomov & Reichart (2019) apply it to
seeds of neural models and deep-significance computes it (Ulmer, Hardmeier & Frellsen 2022; `deepsig.aso`,
version 1.2): with F and G the empirical quantile functions of A's and B's per-seed scores on the grid
t = step, 2 step, ..., < 1, the violation ratio

    eps(A, B) = sum over t with F(t) < G(t) of (G(t) - F(t))^2  /  sum over all t of (G(t) - F(t))^2

is the share of the squared 2-Wasserstein distance in which A's quantile falls below B's (0: A stochastically
above B; 1: below; 0.5 when the distributions are equal). Its upper confidence bound at `level` is

    eps_min = clip(eps + z_(1 - level) * sd of eps over bootstrap resamples of both score sets, 0, 1),

deepsig's eps - sigma_hat / sqrt(nm / (n + m)) * Phi^-1(level) with its sigma_hat = sqrt(nm / (n + m)) * that sd.
A is "almost stochastically" better than B when eps_min < THRESHOLD (deep-significance's recommendation; ASO
itself says < 0.5). ASO gives no p-value, and the verdicts of a page are the t tests' (attnmt.compare.verdicts):
this is reported beside them, not in their family's error budget, and it does not pair the seeds.

Where this differs from deepsig 1.2, on purpose:
- the level is the contrast's share of alpha (alpha / m, Bonferroni) as the t tests'; deepsig's `num_comparisons`
  raises the confidence level c to c + (1 - c) / m, which is Bonferroni at m = 2 only (at m = 10 it tests at
  0.045, not 0.005);
- the numerator sums over the whole grid; deepsig's `aso` leaves its first point out (`diff[1:]`), so its
  eps(A, B) + eps(B, A) falls short of the 1 its own `multi_aso` assumes;
- the bootstrap draws from numpy's Generator with a fixed seed (`seed`), so a page recomputes to the same digits.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from attnmt.compare import pair_tests

STEP = 0.005  # deepsig's dt: the quantile grid's step
BOOTSTRAP = 1000  # deepsig's num_bootstrap_iterations
THRESHOLD = 0.2  # eps_min below it: A almost stochastically better (deep-significance's recommended check)
MIN_SEEDS = 5  # per variant: fewer, and two quantile functions of a few steps decide nothing worth showing


def violation_ratio(a: np.ndarray, b: np.ndarray, step: float = STEP) -> np.ndarray:
  """eps(A, B) of the scores `a` (..., n) and `b` (..., m), over their last axis (a batch over the others):
  the share of the squared W2 distance where A's empirical quantile is below B's; 0.5 where they are equal."""
  t = np.arange(step, 1, step)
  f, g = _quantiles(np.sort(a, -1), t), _quantiles(np.sort(b, -1), t)
  squared = (g - f) ** 2
  total, violated = squared.sum(-1), np.where(f < g, squared, 0.0).sum(-1)
  return np.where(total > 0, violated / np.where(total > 0, total, 1.0), 0.5)


def _quantiles(sorted_scores: np.ndarray, t: np.ndarray) -> np.ndarray:
  """The empirical quantile function at t: the ceil(n t)-th smallest score."""
  n = sorted_scores.shape[-1]
  return sorted_scores[..., np.clip(np.ceil(n * t).astype(int) - 1, 0, n - 1)]


def aso(
  a: Sequence[float],
  b: Sequence[float],
  level: float = 0.05,
  bootstrap: int = BOOTSTRAP,
  seed: int = 0,
  step: float = STEP,
) -> dict:
  """ASO of A over B: 'eps' (the violation ratio), 'eps_min' (its upper bound at `level`), 'level', 'seeds'
  ([n, m]) and 'better' (eps_min < THRESHOLD)."""
  a, b = np.asarray(a, float), np.asarray(b, float)
  if a.ndim != 1 or b.ndim != 1 or not len(a) or not len(b):
    raise ValueError('ASO needs one non-empty list of per-seed scores for each variant')
  if not (np.isfinite(a).all() and np.isfinite(b).all()):
    raise ValueError('ASO: a per-seed score is not a finite number; fix or drop that seed')
  if not 0 < level < 1:
    raise ValueError(f'the ASO level must lie in (0, 1), got {level}')
  rng = np.random.default_rng(seed)
  eps = float(violation_ratio(a, b, step))
  resampled = violation_ratio(
    a[rng.integers(0, len(a), (bootstrap, len(a)))], b[rng.integers(0, len(b), (bootstrap, len(b)))], step
  )
  eps_min = float(np.clip(eps + float(pair_tests._special().ndtri(1 - level)) * resampled.std(), 0.0, 1.0))
  return {'eps': eps, 'eps_min': eps_min, 'level': level, 'seeds': [len(a), len(b)], 'better': eps_min < THRESHOLD}


def aso_or_none(a: Sequence[float], b: Sequence[float], level: float) -> dict | None:
  """`aso` where both variants have MIN_SEEDS seeds, else None (the page shows –)."""
  return aso(a, b, level) if min(len(a), len(b)) >= MIN_SEEDS else None
