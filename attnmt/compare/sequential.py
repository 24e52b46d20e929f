"""Seeds until decided: a group-sequential design over rounds of seeds. Every round trains `seeds_per_round`
more seeds of every variant; after it, one look tests the contrasts still undecided at that look's share of
alpha (family.look_levels: Lan-DeMets spending at information fraction K_r / K_max); a contrast decided at a
look keeps its verdict; the rounds stop when every contrast is ranked or equivalent, or at the cap.

Why the error holds: a wrong claim at look r needs the simultaneous interval of that look to miss its true
difference, which happens with probability at most the look's share; summed over looks (Bonferroni's
inequality, whatever the looks' dependence and whichever contrasts remain) the chance of any wrong claim is at
most alpha. This ignores the correlation between looks that exact group-sequential boundaries use (they
assume normal statistics with known variance, which 2-10 seeds are not), so it is conservative.

Looks are replayed from the rounds' stored translations (`replay`): the jackknife has no random seed, so the
same translations give the same looks, and a killed or repeated round cannot change an earlier verdict.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os

import numpy as np

from attnmt.compare import verdicts, family, planning, pair_tests
from attnmt.errors import ConfigError

DESIGN_FILE = 'design.json'


@dataclasses.dataclass(frozen=True)
class Design:
  """A declared look schedule: `rounds` rounds of `seeds_per_round` seeds per variant from seed `first_seed`,
  alpha spent by `spending`, equivalence margin `delta` (BLEU), the family `contrasts` (family.contrast_pairs)."""

  seeds_per_round: int
  rounds: int
  spending: str = family.SPENDING[0]
  delta: float = family.DELTA
  contrasts: str = 'all'
  alpha: float = family.ALPHA
  first_seed: int = 0  # a continuation after an earlier experiment starts past its seeds

  def __post_init__(self):
    if self.seeds_per_round < 2 or self.rounds < 1:
      raise ConfigError(
        f'seeds until decided needs at least 2 seeds per round and 1 round, got {self.seeds_per_round} and '
        f'{self.rounds}; e.g. --config.sweep.rounds=4 --config.sweep.seeds_per_round=5'
      )
    if self.spending not in family.SPENDING:
      raise ConfigError(f"sweep.spending '{self.spending}' is not one of {', '.join(family.SPENDING)}")
    family.checked('delta', self.delta, 'sweep.delta')
    family.check_alpha(self.alpha, 'the design\'s alpha')
    if self.first_seed < 0:
      raise ConfigError(f'sweep.first_seed must be >= 0, got {self.first_seed}')

  @property
  def schedule(self) -> list[int]:
    """Seeds per variant at each look."""
    return [self.seeds_per_round * (r + 1) for r in range(self.rounds)]

  @property
  def levels(self) -> list[float]:
    """The alpha each look spends (the spending function's increments)."""
    return family.look_levels(self.schedule, self.spending, self.alpha)

  def boundaries(self, contrasts: int) -> tuple[list[float], list[float]]:
    """Per look, the level one of `contrasts` contrasts is tested at: two-sided for a ranking and one-sided for
    each of the two tests of equivalence, each contrast spending each look's increment / contrasts (Bonferroni
    over the family), exact over the looks (family.nominal_levels)."""
    m, k = max(contrasts, 1), tuple(self.schedule)
    return _nominal(k, self.spending, self.alpha, 2, m), _nominal(k, self.spending, self.alpha, 1, m)

  def round_seeds(self, r: int) -> list[int]:
    """The seeds round r (0-based) trains."""
    start = self.first_seed + r * self.seeds_per_round
    return list(range(start, start + self.seeds_per_round))


@functools.lru_cache(maxsize=None)
def _nominal(schedule: tuple, spending: str, alpha: float, sides: int, contrasts: int) -> list[float]:
  return family.nominal_levels(schedule, spending, alpha, sides, contrasts)


def declare(root: str, design: Design, training: dict | None = None, write: bool = True) -> None:
  """Writes the design into `root` before any round trains, with `training` (what a round trains: the settings
  beside the design, as nested dicts); a root that holds another design or another training is refused, naming
  what differs (a design changed after seeing data no longer controls the error, and rounds trained otherwise are
  not this experiment's). A design declared before the training was bound gets it added, with a notice (`write`
  False, a report of the rounds: checked only, nothing written)."""
  path = os.path.join(root, DESIGN_FILE)
  wanted = dataclasses.asdict(design) | ({'training': training} if training is not None else {})
  if os.path.exists(path):
    held = _held_design(path, root)
    held = {'first_seed': 0} | held  # a design declared before first_seed existed started at seed 0
    changed = sorted(k for k in set(held) | set(wanted) if k != 'training' and held.get(k) != wanted.get(k))
    if changed:
      shown = {k: v for k, v in held.items() if k != 'training'}
      raise ConfigError(
        f'{root} was started with another design (changed: {", ".join(changed)}; it holds {shown}); a design '
        'may not change once rounds have trained: run the same settings again, or use a new --workdir'
      )
    if training is None or held.get('training') == training:
      return
    if 'training' in held:
      differ = _differences(held['training'], training)
      raise ConfigError(
        f'{root}: its rounds trained with other settings ({", ".join(differ[:8])}{" ..." * (len(differ) > 8)} '
        'differ); rounds of one experiment train alike: run the same settings again, or use a new --workdir'
      )
    if not write:
      return
    print(f'notice: {path} is bound now to the settings its rounds train with (it held the design alone)')
  else:
    trained = sorted(d for d in (os.listdir(root) if os.path.isdir(root) else []) if d.startswith('round-'))
    if trained:
      raise ConfigError(
        f'{root} holds rounds ({", ".join(trained)}) but no {DESIGN_FILE}: the design they were trained under is '
        'unknown, and a new one would be declared after seeing them; restore the file, or use a new --workdir'
      )
    seen = _sweep_results(root)
    if seen:
      raise ConfigError(
        f'{root} holds a sweep\'s results ({", ".join(seen[:3])}): a design declared there would come after '
        'seeing them; use a new --workdir (and sweep.first_seed past the seeds trained there)'
      )
  if not write:
    return
  os.makedirs(root, exist_ok=True)
  tmp = f'{path}.tmp-{os.getpid()}'
  with open(tmp, 'w') as f:
    json.dump(wanted, f, indent=1)
  os.replace(tmp, path)


def _sweep_results(root: str) -> list[str]:
  """What a plain sweep left in `root`: its tables, or run directories (each holds its config.json)."""
  if not os.path.isdir(root):
    return []
  return sorted(
    e
    for e in os.listdir(root)
    if e in ('results.json', 'results.md') or os.path.exists(os.path.join(root, e, 'config.json'))
  )


def _held_design(path: str, root: str) -> dict:
  try:
    with open(path) as f:
      held = json.load(f)
    if not isinstance(held, dict):
      raise ValueError('not a JSON object')
    fields = {f.name for f in dataclasses.fields(Design)}
    Design(**{k: v for k, v in held.items() if k in fields})  # a stored design that is not one is damaged
  except (OSError, ValueError, TypeError, ConfigError) as e:
    raise ConfigError(
      f'{path} cannot be read as a design ({e}); it is what the rounds under {root} were declared with: '
      'restore it, or use a new --workdir'
    ) from None
  return held


def _differences(old, new, prefix: str = '') -> list[str]:
  """The dotted keys where two nested dicts differ, with both values ('train.learning_rate 0.01 -> 0.02')."""
  if isinstance(old, dict) and isinstance(new, dict):
    return [d for k in sorted(set(old) | set(new)) for d in _differences(old.get(k), new.get(k), f'{prefix}{k}.')]
  return [] if old == new else [f'{prefix[:-1]} {old!r} -> {new!r}']


def replay(design: Design, rounds: list[dict]) -> list[dict]:
  """The looks after each finished round, from `rounds[r]`: {'names', 'references', 'greedy': per variant, per
  seed, the outputs}, every round on the same references (`looks` of their pooled seeds)."""
  names = rounds[0]['names'] if rounds else []
  bleu, jack = {n: [] for n in names}, {n: [] for n in names}  # per seed, pooled over the rounds
  for r, round_ in enumerate(rounds[: design.rounds]):
    if round_['names'] != names or round_['references'] != rounds[0]['references']:
      raise ConfigError(f'round {r + 1} translated other variants or sentences than round 1; they cannot be pooled')
    for name, outputs in zip(names, round_['greedy']):
      stats = np.stack([pair_tests.sentence_statistics(h, rounds[0]['references']) for h in outputs])
      bleu[name] += [pair_tests.corpus_bleu(s.sum(0)) for s in stats]
      jack[name] += list(pair_tests.jackknife(stats))  # a seed's jackknife does not depend on the others
  return list(looks(design, names, [bleu[n] for n in names], [jack[n] for n in names]))


def looks(design: Design, names, bleu, jack, plan: bool = True, paired: bool = True):
  """Each look the seeds allow, in order: `bleu[v]` variant v's per-seed BLEU and `jack[v]` their jackknife
  rows, seeds in the order the rounds trained them. A look is its number, seeds per variant, level and the
  comparison of its first K seeds, with the contrasts decided at an earlier look carried over (their 'look'
  says which); an open contrast's seed plan is at the last look's level (`plan` False: none). Every variant
  trains the same seeds in each round, so the contrasts are paired by seed (`paired` False: analysed as if
  they were not, which the calibration compares)."""
  decided = {}
  m = len(family.contrast_pairs(names, design.contrasts)) if len(names) > 1 else 1
  ranking, equivalence = design.boundaries(m)
  seeds = [design.round_seeds(r) for r in range(design.rounds)]
  seeds = [s for round_ in seeds for s in round_]
  for r, k in enumerate(design.schedule):
    if min(map(len, bleu)) < k:
      return
    level = m * ranking[r]  # compare_scores tests each of its m contrasts at level / m
    result = verdicts.compare_scores(
      names,
      [b[:k] for b in bleu],
      None,
      [np.asarray(j[:k]) for j in jack],
      contrasts=design.contrasts,
      delta=design.delta,
      alpha=design.alpha,
      level=level,
      equivalence_level=m * equivalence[r],
      decided=decided,
      plan=plan,
      seeds=[seeds[:k]] * len(names) if paired else None,  # round_seeds: the same seeds for every variant
    )
    last = ranking[-1]
    for p in result['pairs']:
      if p.get('seeds_to_decide') and 'look' not in p:
        p['seeds_to_decide'] = planning.plan_contrast(p, result['seed_sd'], last, design.delta)
      p.setdefault('look', r + 1)
      if p['decision'] in (family.GREATER, family.EQUIVALENT):
        decided[(p['a'], p['b'])] = p
    yield {'look': r + 1, 'seeds': k, 'level': level, 'comparison': result}


def open_contrasts(look: dict) -> list[dict]:
  return [p for p in look['comparison']['pairs'] if p['decision'] not in (family.GREATER, family.EQUIVALENT)]
