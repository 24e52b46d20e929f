"""What a page decides, declared before the data: the contrasts (every pair, or each variant against named
references), the error budget of each look, and the three answers a contrast can get.

A family's contrasts are fixed by the variants' names and the declared spec, never by the results (no
"against the best"). Each contrast's interval is a simultaneous one: the t interval at level `level / m`
(Bonferroni over the m contrasts of the family). All m intervals cover their true differences together with
probability at least 1 - level, so every claim read off them holds together at that level:

  * `A > B` when the interval lies above 0;
  * `A ≈ B` (equivalent within ±delta) when the equivalence interval, of coverage 1 - 2 level / m, lies inside
    (-delta, delta): Schuirmann's two one-sided tests (1987), each at level / m. When the true |difference| is
    delta or more, a wrong equivalence needs the one one-sided test on the side of the truth to fail (chance at
    most level / m), and a ranking in the wrong direction implies it, so each contrast errs with chance at most
    level / m, and the family at most level;
  * undecided otherwise, with the seeds per variant that would decide it (attnmt.compare.planning).

One family covers ranking and equivalence claims at once, with no step-down to break the agreement between
a printed interval and its verdict (Holm's step-down has no intervals that agree with it). When a page
ranks more than one kind of thing (the corpus and its longest-sentence buckets), its alpha is split between
them in declared shares and the Bonferroni inequality bounds the page as a whole.

Seeds trained in rounds look at the data several times: each look gets the part of alpha that the spending
function releases at its information fraction (Lan & DeMets 1983, with O'Brien & Fleming's 1979 or
Pocock's shape); a contrast decided at a look keeps its verdict. By the same inequality over looks, the chance
of any wrong claim at any look stays below alpha however the rounds go (attnmt.compare.sequential).
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Optional, Sequence

from attnmt import schema
from attnmt.errors import ConfigError
from attnmt.schema import Setting

ALPHA = 0.05  # the page's error budget: the chance of any wrong verdict on it
DELTA = 0.5  # BLEU: the default equivalence margin
SPENDING = ('obrien_fleming', 'pocock')

# The comparison's settings, declared once: the sweep's section (experiments/configs/default.py) holds them,
# and analyze's flags and attnmt.compare's arguments take their defaults from here.
SETTINGS = (
  Setting(
    'contrasts',
    'all',
    "the family the analysis decides, declared before the results: 'all' (every pair), variant names (each "
    "against every other variant), or pairs written A~B; comma-separated",
  ),
  Setting(
    'delta',
    DELTA,
    'equivalence margin in BLEU: A ≈ B when the two one-sided tests put the difference within ±delta',
    lo='>0',
  ),
  Setting(
    'spending',
    SPENDING[0],
    "with sweep.rounds: how alpha is spent over the looks (Lan-DeMets): 'obrien_fleming' little early, 'pocock' evenly",
    choices=SPENDING,
  ),
)
DEFAULTS = {s.key: s for s in SETTINGS}


def checked(key: str, value, name: str):
  """`value` of the comparison's setting `key` when it is what SETTINGS declares (a finite number in range,
  a known choice), else one ConfigError naming `name` (the flag or argument it came in) and what it accepts."""
  schema.check_value('', DEFAULTS[key], value, name)
  return value


def check_alpha(alpha, name: str = 'alpha') -> float:
  """An error budget: a finite number in (0, 1), else one ConfigError naming `name`."""
  if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 < alpha < 1:
    raise ConfigError(f'{name} must be a number in (0, 1), the chance of any wrong verdict allowed; got {alpha!r}')
  return float(alpha)


def spec_text(spec) -> str:
  """A contrasts spec as the family reads it: None is 'all'; an empty spec names no contrast and is refused."""
  if spec is None:
    return 'all'
  text = str(spec).strip()
  if not text:
    raise ConfigError(f"contrasts {spec!r} names no contrast; give 'all', variant names or pairs written A~B")
  return text


def contrast_pairs(names: Sequence[str], spec: str = 'all') -> list:
  """(i, j) index pairs of the family, each once: 'all' (or None) every pair; otherwise a comma list whose
  entries are a variant name (every other variant against it) or 'A~B' (that one pair). A name is a variant's
  full name or the first parts of exactly one ('none' for 'none/bahdanau/global'). In a pair from 'all' the
  variant listed first comes first. Only names and the spec are read: a family never depends on results."""
  names = list(names)
  text = spec_text(spec)
  if text == 'all':
    return [(i, j) for i in range(len(names)) for j in range(i + 1, len(names))]
  entries = [e.strip() for e in text.split(',')]
  if 'all' in entries:
    raise ConfigError(
      f"contrasts '{spec}': 'all' is every pair already and takes no other entry; give 'all' alone, or names "
      'and pairs written A~B'
    )
  out = []
  for entry in entries:
    if not entry:
      continue
    if '~' in entry:
      a, _, b = (x.strip() for x in entry.partition('~'))
      wanted = [(_index(names, a, spec), _index(names, b, spec))]
      if wanted[0][0] == wanted[0][1]:
        raise ConfigError(f"contrast '{entry}' compares a variant with itself; name two different variants")
    else:
      ref = _index(names, entry, spec)
      wanted = [(v, ref) for v in range(len(names)) if v != ref]
    out += [p for p in wanted if p not in out and p[::-1] not in out]
  if not out:
    raise ConfigError(f"contrasts '{spec}' name no pair; use 'all', variant names or pairs written A~B")
  return out


def _index(names, name, spec) -> int:
  """The variant `name` names: its full name, or the leading '/'-parts of exactly one variant's."""
  if name in names:
    return names.index(name)
  matches = [i for i, n in enumerate(names) if n.startswith(name + '/')]
  if len(matches) == 1:
    return matches[0]
  if matches:
    raise ConfigError(
      f"contrasts '{spec}': '{name}' names {len(matches)} variants ({', '.join(names[i] for i in matches)}); "
      'give one of those names whole'
    )
  raise ConfigError(
    f"contrasts '{spec}': '{name}' is not a variant compared here ({', '.join(names)}); use 'all', those "
    'names, or pairs written A~B'
  )


def spent(fraction: float, kind: str = 'obrien_fleming', alpha: float = ALPHA) -> float:
  """Lan & DeMets' spending function: the alpha spent by information fraction t in (0, 1]. O'Brien-Fleming
  shape 2 - 2 Phi(z_{1-alpha/2} / sqrt(t)) spends little early; Pocock shape alpha ln(1 + (e - 1) t) spends
  evenly."""
  if not 0 < fraction <= 1:
    raise ValueError(f'an information fraction is in (0, 1], got {fraction}')
  if kind == 'pocock':
    return alpha * math.log(1 + (math.e - 1) * fraction)
  if kind == 'obrien_fleming':
    z = NormalDist().inv_cdf(1 - alpha / 2)
    return 2 - 2 * NormalDist().cdf(z / math.sqrt(fraction))
  raise ConfigError(f"alpha spending '{kind}' is not one of {', '.join(SPENDING)}")


def look_levels(schedule: Sequence[int], kind: str = 'obrien_fleming', alpha: float = ALPHA) -> list[float]:
  """The alpha each look spends: the increments of `spent` at information fractions K_r / K_max, for a
  schedule of seeds per variant at each look (increasing). One look spends all of alpha."""
  if not schedule or any(b <= a for a, b in zip(schedule, schedule[1:])) or schedule[0] < 1:
    raise ValueError(f'a look schedule is an increasing list of seeds per variant, got {list(schedule)}')
  cumulative = [spent(k / schedule[-1], kind, alpha) for k in schedule]
  cumulative[-1] = alpha  # exactly, whatever the float rounding
  return [b - a for a, b in zip([0.0] + cumulative[:-1], cumulative)]


def nominal_levels(
  schedule: Sequence[int], kind: str = 'obrien_fleming', alpha: float = ALPHA, sides: int = 2, contrasts: int = 1
) -> list[float]:
  """The level each look tests one of `contrasts` contrasts at, so that its looks together spend
  `look_levels` / contrasts (Bonferroni over the family, look by look), exactly: the group-sequential
  boundaries b_r with P(|Z_1| < b_1, ..., |Z_r-1| < b_r-1, |Z_r| >= b_r) = the r-th increment, for the
  looks' joint normal distribution (corr(Z_i, Z_j) = sqrt(K_i / K_j)), by the numerical integration of
  Jennison & Turnbull (2000, ch. 19) that gsDesign implements (gsdesign.h1 / hupdate); returned as nominal
  levels (two-sided 2 (1 - Phi(b_r)), or one-sided 1 - Phi(b_r) with `sides` 1: upper boundaries only).
  The first look's equals its increment; later looks' exceed theirs, which the union bound over looks gave
  away. The statistics are t, not normal: calibration.py checks the error they give at few seeds."""
  import gsdesign
  from scipy.optimize import brentq

  if sides not in (1, 2):
    raise ValueError(f'a boundary is one- or two-sided, got sides={sides}')
  spend = [x / contrasts for x in look_levels(schedule, kind, alpha)]
  normal = NormalDist()
  lower = (lambda b: -b) if sides == 2 else (lambda b: -math.inf)
  levels, grid, continuing, info_prev = [], None, 1.0, None
  for increment, k in zip(spend, schedule):
    info = float(k)
    if grid is None:
      b = normal.inv_cdf(1 - increment / sides)
      grid = gsdesign.h1(GRID, 0.0, info, lower(b), b)
    else:
      previous = grid

      def left_over(b, previous=previous, info=info, info_prev=info_prev):
        nxt = gsdesign.hupdate(GRID, 0.0, info, lower(b), b, 0.0, info_prev, previous)
        return continuing - float(nxt[2].sum()) - increment

      b = brentq(left_over, 1e-6 if sides == 2 else -10.0, 40.0, xtol=1e-10)
      grid = gsdesign.hupdate(GRID, 0.0, info, lower(b), b, 0.0, info_prev, previous)
    continuing, info_prev = float(grid[2].sum()), info
    levels.append(sides * (1 - normal.cdf(b)))
  return levels


GRID = 36  # gsDesign's grid parameter r: its default is 18; 36 halves the integration error again


# The answers a contrast can get.
GREATER, EQUIVALENT, UNDECIDED, UNRANKED = 'greater', 'equivalent', 'undecided', 'unranked'


def decision(
  interval: Optional[Sequence[float]], delta: float, seeds: Sequence[int], within: Optional[Sequence[float]] = None
) -> str:
  """GREATER (the simultaneous `interval` excludes 0: the sign of the difference says which), EQUIVALENT (the
  equivalence interval `within`, coverage 1 - 2 level / m, inside (-delta, delta): TOST at level / m per side;
  `interval` itself when not given), UNDECIDED, or UNRANKED (one seed on a side: the seed variance is unmeasured)."""
  if min(seeds) < 2 or interval is None:
    return UNRANKED
  lo, hi = interval
  if lo > 0 or hi < 0:
    return GREATER
  lo, hi = interval if within is None else within
  if -delta < lo and hi < delta:
    return EQUIVALENT
  return UNDECIDED


def verdict(a: str, b: str, difference: float, interval, delta: float, seeds: Sequence[int], within=None) -> str:
  """The contrast in words: 'A > B' (with 'by less than delta' when the equivalence interval says so too),
  'A ≈ B (within ±delta)', 'undecided with K seeds', or 'not ranked with 1 seed'."""
  kind = decision(interval, delta, seeds, within)
  if kind == UNRANKED:
    return f'{a} vs {b}: not ranked with 1 seed'  # why, and what to do, the table's note says once
  if kind == GREATER:
    winner, loser = (a, b) if difference > 0 else (b, a)
    lo, hi = interval if within is None else within
    small = -delta < lo and hi < delta
    return f'{winner} > {loser}' + (f' (by less than {delta:g})' if small else '')
  if kind == EQUIVALENT:
    return f'{a} ≈ {b} (equivalent within ±{delta:g})'
  k = f'{seeds[0]} seeds' if seeds[0] == seeds[1] else f'{seeds[0]} and {seeds[1]} seeds'
  return f'{a} vs {b}: undecided with {k}'
