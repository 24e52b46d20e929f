"""The family's contrasts as the pages read them: the pair table's cells (contrast_cells, under PAIR_HEADERS), the
sentence naming the family and its error budget, what the table's columns mean (pairs_note), and for undecided
verdicts the seeds per variant that would decide them and the options that train those (seed_plan_text). The
statistics are attnmt.compare.verdicts's."""

from __future__ import annotations

from attnmt.analysis.formatting import ONE_SEED, format_p, interval
from attnmt.compare import stochastic_order

PAIR_HEADERS = [
  'pair',
  'difference',
  'simultaneous interval',
  'p',
  'adjusted p (≠ 0)',
  'adjusted p (within ±δ)',
  'verdict',
  'seeds to decide',
  'ASO ε_min',
]


def _seeds_cell(p: dict) -> str:
  """Seeds per variant that would decide an undecided contrast: at the pooled seed sd – at its upper bound."""
  plan = p.get('seeds_to_decide')
  if not plan:
    return '–'
  low, high = plan['observed'], plan['observed_upper']
  if low is None:
    return '> 1000'
  return str(low) if low == high else f'{low} to > 1000' if high is None else f'{low}–{high}'


def scores_results(comparison: dict) -> list[dict]:
  """The rows pairwise_text reads, from attnmt.compare.verdicts.compare_scores alone (no analysis)."""
  return [
    {'variant': v['variant'], 'seeds': list(range(v['seeds']))}
    | {'significance': comparison | {'pairs': [p for p in comparison['pairs'] if p['a'] == v['variant']]}}
    for v in comparison['variants']
  ]


def pair_cells(results: list[dict]) -> list[list[str]]:
  """One row of PAIR_HEADERS cells per contrast of the family, in the family's order."""
  return [contrast_cells(p) for r in results for p in r.get('significance', {}).get('pairs', [])]


def contrast_cells(p: dict) -> list[str]:
  look = f" (look {p['look']})" if p.get('look') and p['decision'] in ('greater', 'equivalent') else ''
  return [
    f"{p['a']} − {p['b']}",
    f"{p['difference']:+.2f}",
    interval(p['interval']),
    format_p(p['p_value']),
    format_p(p.get('p_adjusted')),
    format_p(p.get('p_equivalent_adjusted')),
    p['verdict'] + look,
    _seeds_cell(p),
    '–' if not p.get('aso') else f"{p['aso']['eps_min']:.2f}",
  ]


def family_text(s: dict) -> str:
  """One sentence: the page's family and its error budget."""
  spec = s.get('contrasts', 'all')
  which = 'every pair of the variants' if spec == 'all' else f'the declared contrasts {spec}'
  text = (
    f"The family is {which} ({s['family_size']} contrast(s)), declared before the results; the chance of any "
    f"wrong verdict on this page is at most {s['alpha']:g}"
  )
  if s.get('length_level'):
    text += (
      f" ({s['level']:g} for the corpus contrasts, {s['length_level']:g} for the longest-sentence contrasts "
      'against the baseline)'
    )
  return text


def pairs_note(results: list[dict], one_seed_note: bool = True) -> str:
  """What the pair table's columns mean: the test, its family, the answers and the seed plan; with one seed,
  ONE_SEED unless `one_seed_note` is False (the analysis table's legend already says it)."""
  s = results[0]['significance']
  seeds = sorted({len(r['seeds']) for r in results})
  test_set = (
    "with the test set's variance (jackknife over the test sentences; degrees of freedom the seeds', at most "
    'sentences − 1) added'
    if 'test set held fixed' not in s.get('method', '')
    else 'from the per-seed scores alone, the test set held fixed (its variance is not in the interval)'
  )
  level = s['level'] / max(s['family_size'], 1)
  how = (
    f"simultaneous interval: {design_text(s)} {test_set}, at level {level:.2g} per contrast (Bonferroni: "
    f"{s['level']:g} over {s['family_size']}), so all intervals hold together with probability "
    f"{1 - s['level']:.3g} or more"
    if seeds[0] >= 2
    else 'interval and p from the test sentences alone (one seed: the seeds cannot be tested)'
  )
  text = (
    f'{family_text(s)}. Greedy test BLEU, {"/".join(map(str, seeds))} seed(s) per variant; difference of the '
    f'means over seeds; {how}. Verdicts: A > B when the interval excludes 0; A ≈ B when the two one-sided tests '
    f"(Schuirmann), each at {level:.2g}, put the difference within ±{s['delta']:g} BLEU (the {1 - 2 * level:.4g} "
    'interval inside the margin); else undecided. p: two-sided, unadjusted; adjusted p (≠ 0) is below 0.05 exactly '
    'when the interval excludes 0, adjusted p (within ±δ) exactly when the equivalence holds. Seeds to decide: '
    "seeds per variant that would decide the contrast with 80 % probability at the family's level, if the true "
    "difference is the observed one, at the page's seed sd (every variant's pooled) – at its 95 % upper bound, with "
    'K − 1 degrees of freedom; fresh seeds, a new experiment (this look has spent its alpha). ASO ε_min: almost '
    'stochastic order of A over B (del Barrio et al. 2018, Dror et al. 2019, as deep-significance computes it; '
    f'attnmt/compare/stochastic_order.py), the upper bound at {level:.2g} on the share of the squared W2 distance '
    "between the two seed distributions in which A's scores are below B's; below "
    f'{stochastic_order.THRESHOLD:g}, A is almost stochastically better. It ignores the pairing, needs '
    f'{stochastic_order.MIN_SEEDS} seeds per variant (– with fewer) and stands beside the verdicts, outside their '
    'error budget'
  )
  if seeds[0] < 2 and one_seed_note:
    text += '. ' + ONE_SEED
  return text + '.'


def design_text(s: dict) -> str:
  """How the contrasts of an analysis were tested (its 'designs'): paired by seed, unpaired, or both."""
  words = {
    'paired': 'the paired t over the same-numbered seeds (K − 1 df; seed k of every variant shares its data order '
    'and keys)',
    'unpaired': 'the unpaired t over seeds (min(K_A, K_B) − 1 df, valid at any ratio of the seed variances)',
  }
  used = [words[d] for d in ('paired', 'unpaired') if d in s.get('designs', ['unpaired'])]
  return ', and '.join(used) or words['unpaired']


def seeds_option(n: int, as_runs: bool = False, first: int = 0) -> str:
  """The option that trains seeds first..first+n-1 (a shell expansion when the list is long): train.seeds, or
  with `as_runs` the sweep axis that trains each seed as its own run."""
  last = first + n - 1
  seeds = ','.join(map(str, range(first, last + 1))) if n <= 12 else f'$(seq -s, {first} {last})'
  return f'--config.sweep.axes="train.seeds={seeds}"' if as_runs else f'--config.train.seeds={seeds}'


def seed_plan_text(results: list[dict]) -> str:
  """Under undecided verdicts: the seeds per variant that would decide every one of them (naming the contrast
  that needs the most), a range from the seed sd's estimate to its upper bound, and how to train them."""
  pairs = [p for r in results for p in r.get('significance', {}).get('pairs', [])]
  open_pairs = [p for p in pairs if p.get('seeds_to_decide')]
  if not open_pairs:
    return ''
  plans = [p['seeds_to_decide'] for p in open_pairs]
  as_runs = all(r.get('seeds_as_runs') for r in results)
  first = 1 + max((s for r in results for s in (r['seeds'] if isinstance(r['seeds'], list) else [])), default=-1)
  lines = [f'Seeds to decide the {len(open_pairs)} undecided contrast(s) (80 % probability each, at the family level):']
  for key, label in (('observed', 'if the observed differences are true'), ('hardest', 'whatever the differences')):
    reach = [(pl[key], pl[key + '_upper'], p) for pl, p in zip(plans, open_pairs)]
    if any(lo is None for lo, _, _ in reach):
      out = [f"{p['a']} − {p['b']}" for lo, _, p in reach if lo is None]
      lines.append(f'  {label}: out of reach of 1000 seeds per variant in ' + ', '.join(out))
      continue
    lo, hi, p = max(reach, key=lambda x: (x[0], x[1] or 10**9))
    span = f'{lo} to more than 1000' if hi is None else f'{lo}–{hi}'
    lines.append(
      f"  {label}: {span} seeds per variant ({p['a']} − {p['b']} needs the most; seed sd "
      f"{p['seeds_to_decide']['sd']:.2f}, upper bound {p['seeds_to_decide']['sd_upper']:.2f})"
      + (f': {seeds_option(lo, as_runs, first)}' if lo <= 50 else '')
    )
  lines.append(
    f'  These are a new experiment: this look has spent its alpha, so more seeds pooled with seeds 0–{first - 1} '
    'would be a second look that no error budget covers. Train fresh seeds (from seed '
    f'{first}, as above) in a new --workdir and analyse them alone' + _rounds_option(plans, first) + '.'
  )
  return '\n'.join(lines)


def _rounds_option(plans: list[dict], first: int, per_round: int = 5) -> str:
  """The declared continuation in rounds of fresh seeds that reaches the largest plan (its upper bound where
  known), or '' when that is out of reach."""
  wanted = [pl.get('observed_upper') or pl.get('observed') for pl in plans]
  if not wanted or any(w is None for w in wanted) or max(wanted) > 200:
    return ''
  rounds = -(-max(wanted) // per_round)
  return (
    f'; or as rounds that stop once every contrast is decided, their looks sharing one alpha: --config.sweep.rounds='
    f'{rounds} --config.sweep.seeds_per_round={per_round} --config.sweep.first_seed={first} (docs/design.md, '
    '"Seeds until decided")'
  )


def pairwise_text(results: list[dict], one_seed_note: bool = True) -> str:
  """The contrasts of the analysis as a Markdown table, its note (pairs_note), and the seed plan."""
  rows = pair_cells(results)
  if not rows:
    return ''
  lines = ['| ' + ' | '.join(PAIR_HEADERS) + ' |', '|' + '---|' * len(PAIR_HEADERS)]
  lines += ['| ' + ' | '.join(cells) + ' |' for cells in rows]
  plan = seed_plan_text(results)
  return '\n'.join(lines) + '\n\n' + pairs_note(results, one_seed_note) + ('\n\n' + plan if plan else '')
