"""Are the faithfulness pages' verdicts calibrated? A/A experiments of their whole family, run through the pages'
own verdict function (attnmt/faithfulness/contrasts.py's `contrasts`).

Each experiment draws results the way the runner keeps them: per cell and seed, every declared measure as a
ratio over sentences, sum_i s_i / sum_i c_i, with the per-sentence sums and counts (`per_sentence`) from which
`contrasts` takes the jackknife over sentences. The counts differ by sentence and by seed (the steps that flip,
the tokens a test reads), and a sentence's value is a shared difficulty, a seed effect and the seed's own noise.
Every cell has the same expected value (the ratio is a count-weighted mean of values of one expectation, counts
drawn apart from them), so any ranked contrast is a false one. The worst of the design the pages have: seed sds
that differ between cells (up to 15 times, variances 1:225), same-numbered seeds correlated (`rho`, also
sentence by sentence), and the family of the page: measures x cells against one reference.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from attnmt.compare import family
from attnmt.compare.calibration import error_share
from attnmt.faithfulness import contrasts


@dataclasses.dataclass(frozen=True)
class Null:
  """Identical cells (the first is the reference) with seed sds `seed_sds`, measured on `measures` ratio
  measures over `sentences` test sentences; counts per sentence and seed 1 + Poisson(`tokens`)."""

  seed_sds: tuple = (0.05, 0.1, 0.3, 0.75, 0.05, 0.1, 0.3, 0.75, 0.05)
  measures: int = 4
  sentences: int = 128
  tokens: float = 8.0
  rho: float = 0.5
  difficulty_sd: float = 0.2
  noise_sd: float = 0.3

  def results(self, rng: np.random.Generator, seeds: int) -> list[dict]:
    """One experiment: a result per cell, as the runner writes them (the declared measures under 'tests')."""
    v, n = len(self.seed_sds), self.sentences
    cells = [
      {'variant': f'c{i}', 'seeds': list(range(seeds)), 'sentences': n, 'split': 'test', 'tests': {}} for i in range(v)
    ]
    for m in range(self.measures):
      shared, own = rng.normal(size=(seeds, 1)), rng.normal(size=(seeds, v))
      seed_KxV = np.asarray(self.seed_sds) * (np.sqrt(self.rho) * shared + np.sqrt(1 - self.rho) * own)
      noise = np.sqrt(self.rho) * rng.normal(size=(seeds, 1, n)) + np.sqrt(1 - self.rho) * rng.normal(
        size=(seeds, v, n)
      )
      value_KxVxN = rng.normal(0, self.difficulty_sd, n) + seed_KxV[..., None] + self.noise_sd * noise
      count_KxVxN = 1 + rng.poisson(self.tokens, (seeds, v, n))
      sum_KxVxN = value_KxVxN * count_KxVxN
      for i, cell in enumerate(cells):
        s, c = sum_KxVxN[:, i], count_KxVxN[:, i]
        cell['tests'][f'm{m}'] = {
          'value': (s.sum(1) / c.sum(1)).tolist(),
          'per_sentence': {'value': {'sum': s.tolist(), 'count': c.tolist()}},
        }
    return cells

  def paths(self) -> list[str]:
    return [f'tests/m{m}/value' for m in range(self.measures)]


def family_errors(null: Null, seeds: int, experiments: int, shift: float = 0.0, seed: int = 0) -> dict:
  """The share of `experiments` with any wrong ranking over the page's whole family (measures x cells against
  the first cell) and its Monte Carlo error, and the share of contrasts ranked. `shift` > 0 moves the last
  cell's every value up by that much (a true difference: only rankings of the other cells, or of the last one
  downwards, are wrong; 'power' is the share of the last cell's contrasts ranked upwards)."""
  rng = np.random.default_rng(seed)
  last = f'c{len(null.seed_sds) - 1}'
  wrong = ranked = rows = found = 0
  for _ in range(experiments):
    results = null.results(rng, seeds)
    if shift:
      for test in results[-1]['tests'].values():
        test['value'] = [x + shift for x in test['value']]
        kept = test['per_sentence']['value']
        kept['sum'] = (np.asarray(kept['sum']) + shift * np.asarray(kept['count'])).tolist()
    got = contrasts.contrasts(results, null.paths(), reference='c0', plan=False)
    claims = [r for r in got['rows'] if r['decision'] == family.GREATER]
    right = [r for r in claims if shift and r['a'] == last and r['difference'] > 0]
    wrong += len(right) < len(claims)
    found += len(right)
    ranked += len(claims)
    rows += len(got['rows'])
  out = error_share(wrong, experiments) | {'seeds': seeds, 'family_size': rows // experiments}
  out |= {'ranked_share': ranked / rows, 'shift': shift}
  return out | ({'power': found / (null.measures * experiments)} if shift else {})
