"""How a value reads in the tables: a seed's value or mean ± sd over seeds (never "± 0.00" for one seed), the
per-seed values, an interval, a p-value; and what one seed per variant means for the verdicts (ONE_SEED)."""

from __future__ import annotations

import numpy as np

ONE_SEED = (
  'One seed per variant: the variants are not ranked (seed-to-seed variation is unmeasured, and it can '
  'exceed the differences shown); rerun with --config.train.seeds=0,1,2 to rank them'
)


def per_seed(values, digits: int = 2) -> str:
  return ' / '.join(f'{v:.{digits}f}' for v in values)


def mean_sd(values, digits: int = 2) -> str:
  """The value of one seed, or mean ± sd over several (never a spread of one); an sd too small for `digits`
  keeps one significant digit, so that a real spread never reads as '± 0.00'."""
  v = np.asarray(values, float)
  if v.size == 1:
    return f'{v[0]:.{digits}f}'
  sd = v.std(ddof=1)
  sd_text = f'{sd:.{digits}f}' if sd == 0 or round(sd, digits) > 0 else f'{sd:.1g}'
  return f'{v.mean():.{digits}f} ± {sd_text}'


def interval(bounds, digits: int = 2) -> str:
  return '–' if bounds is None else f'[{bounds[0]:.{digits}f}, {bounds[1]:.{digits}f}]'


def format_p(p) -> str:
  return '–' if p is None else '< 0.001' if p < 0.001 else f'{p:.3f}'
