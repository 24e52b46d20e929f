"""Is the seed design the comparison assumes the one it has? Simulated designs at the seed level (`Scenario`):
same-numbered seeds correlated across variants (rho; also sentence by sentence), seed variances that differ
between the variants (ratios up to 225), families of 1, 3 and 10 contrasts, and both the paired test (the seeds
match) and the unpaired one (the same data analysed as if they did not): `design_errors` for one look or every
look of a design of rounds, `design_rounds` for the rounds' own record, `aso_errors` for almost stochastic order
beside the t verdicts. The generator is linear (a seed's score is the mean of its per-sentence scores), so the
jackknife rows are exact and an experiment costs microseconds: what it tests is the seed design, while
attnmt/compare/calibration.py's `simulate` tests the statistics on sacrebleu's BLEU.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from attnmt.compare import family, sequential, stochastic_order, verdicts
from attnmt.compare.calibration import error_share, pair_truth, rounds_errors, wrong_claims


@dataclasses.dataclass(frozen=True)
class Scenario:
  """A simulated design at the seed level: per variant its true mean BLEU and seed sd; `rho` the correlation of
  same-numbered seeds across variants, `sentence_rho` that of their per-sentence noise; `noise_sd` a seed's own
  noise on each sentence (BLEU), `difficulty_sd` the sentences' difficulty shared by every system,
  `interaction_sd` each variant's own effect on each sentence (mean 0 over sentences)."""

  means: tuple = (0.0, 0.0)
  seed_sds: tuple = (0.45, 0.45)
  rho: float = 0.0
  sentence_rho: float = 0.0
  sentences: int = 400
  noise_sd: float = 5.0
  difficulty_sd: float = 15.0
  interaction_sd: float = 0.0

  def experiment(self, rng: np.random.Generator, seeds: int) -> tuple[list, list]:
    """Per variant the per-seed scores (K) and their exact jackknife rows (K x N)."""
    v, n = len(self.means), self.sentences
    shared, own = rng.normal(size=(seeds, 1)), rng.normal(size=(seeds, v))
    seed_effect = np.asarray(self.seed_sds) * (np.sqrt(self.rho) * shared + np.sqrt(1 - self.rho) * own)
    noise = np.sqrt(self.sentence_rho) * rng.normal(size=(seeds, 1, n))
    noise = self.noise_sd * (noise + np.sqrt(1 - self.sentence_rho) * rng.normal(size=(seeds, v, n)))
    sentence = rng.normal(0, self.difficulty_sd, n) + rng.normal(0, self.interaction_sd, (v, n))
    x_KxVxN = np.asarray(self.means)[:, None] + seed_effect[..., None] + sentence + noise
    score_KxV = x_KxVxN.mean(-1)
    jack_KxVxN = (n * score_KxV[..., None] - x_KxVxN) / (n - 1)
    return [score_KxV[:, i] for i in range(v)], [jack_KxVxN[:, i] for i in range(v)]


def design_errors(
  scenario: Scenario,
  seeds: int,
  experiments: int,
  paired: bool = True,
  delta: float = family.DELTA,
  contrasts: str = 'all',
  seed: int = 0,
  design=None,
) -> dict:
  """The share of `experiments` of `scenario` with any wrong claim over the family (every look of `design`, a
  sequential.Design, when given; else one look at K = `seeds`), its Monte Carlo error, and the share of
  contrasts decided. `paired` False: the same experiments analysed as if the seed numbers differed."""
  names = [f'v{i}' for i in range(len(scenario.means))]
  truth = pair_truth(names, scenario.means)
  rng = np.random.default_rng(seed)
  k = design.schedule[-1] if design is not None else seeds
  numbers = [list(range(k))] * len(names) if paired else [list(range(i * k, (i + 1) * k)) for i in range(len(names))]
  wrong = decided = contrasts_seen = 0
  for _ in range(experiments):
    bleu, jack = scenario.experiment(rng, k)
    if design is None:
      results = [
        verdicts.compare_scores(names, bleu, None, jack, contrasts=contrasts, delta=delta, plan=False, seeds=numbers)
      ]
    else:
      results = [look['comparison'] for look in sequential.looks(design, names, bleu, jack, False, paired)]
    wrong += any(wrong_claims(r, truth, delta) for r in results)
    last = results[-1]['pairs']
    decided += sum(p['decision'] in (family.GREATER, family.EQUIVALENT) for p in last)
    contrasts_seen += len(last)
  return error_share(wrong, experiments) | {
    'seeds': k,
    'paired': paired,
    'decided_share': decided / max(contrasts_seen, 1),
  }


def design_rounds(scenario: Scenario, design, experiments: int, paired: bool = True, seed: int = 0) -> dict:
  """`rounds_errors` of `scenario` under `design` (sequential.Design), paired or analysed as if unpaired."""
  names = [f'v{i}' for i in range(len(scenario.means))]
  rng = np.random.default_rng(seed)

  def draw():
    return scenario.experiment(rng, design.schedule[-1])

  return rounds_errors(design, names, pair_truth(names, scenario.means), draw, experiments, paired)


def aso_errors(scenario: Scenario, seeds: int, experiments: int, seed: int = 0) -> dict:
  """Almost stochastic order (stochastic_order.aso) beside the t verdicts, on the same experiments of
  `scenario` at K = `seeds`: every pair its higher mean first, ASO at alpha / m as the pages show it. Per test
  ('aso': eps_min < THRESHOLD; 't': the paired verdict's ranking) the share of experiments with any wrong
  ranking over the family (of two variants with equal means, or against the true order) and the share of
  contrasts ranked."""
  names = [f'v{i}' for i in range(len(scenario.means))]
  truth = pair_truth(names, scenario.means)
  rng = np.random.default_rng(seed)
  numbers = [list(range(seeds))] * len(names)
  counts = {'aso': [0, 0], 't': [0, 0]}  # experiments with a wrong ranking, contrasts ranked
  contrasts = 0
  for _ in range(experiments):
    bleu, jack = scenario.experiment(rng, seeds)
    result = verdicts.compare_scores(names, bleu, None, jack, plan=False, seeds=numbers)
    wrong = {'aso': False, 't': False}
    for p in result['pairs']:
      i, j = names.index(p['a']), names.index(p['b'])
      d = truth[(p['a'], p['b'])]
      ranked = {
        'aso': stochastic_order.aso(bleu[i], bleu[j], p['level'], seed=int(rng.integers(2**31)))['better'],
        't': p['decision'] == family.GREATER,
      }
      for test, got in ranked.items():
        counts[test][1] += got
        wrong[test] |= got and d <= 0  # a ranking of equal variants or against the true order
    contrasts += len(result['pairs'])
    for test in counts:
      counts[test][0] += wrong[test]
  return {
    'seeds': seeds,
    **{test: error_share(w, experiments) | {'ranked_share': r / max(contrasts, 1)} for test, (w, r) in counts.items()},
  }
