"""The tables and verdicts researchers read: the sweep's results (from every variant's results.json) and the
analysis (from report.analyze_runs), as Markdown, CSV and the cells of report.html.

Every comparison shows the seeds: per-seed values, mean, standard deviation and a 95% interval; one seed
shows its value alone (never "± 0.00") and the verdicts say the variants are not ranked. The statistics
are attnmt.compare.pair_tests's.
"""

from __future__ import annotations

import numpy as np

from attnmt.analysis import stored
from attnmt.compare import pair_tests, stochastic_order

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


def format_summary(s: dict) -> str:
  """One line for a finished training run (experiments/train.py)."""
  return (
    f"{s['variant']}: test BLEU {mean_sd(s['test_bleu'])}, chrF {mean_sd(s['test_chrf'])}, "
    f"chrF++ {mean_sd(s['test_chrfpp'])}, "
    f"perplexity {mean_sd(s['test_perplexity'])} over seeds {s['seeds']} "
    f"(best step {s['best_step']}, {s['parameters']:,} parameters)"
  )


# ---- the sweep: results.json of every variant -------------------------------------------------------------

# Runs trained before chrF++ was reported have no 'test_chrfpp': their cell is '–'.
RESULT_COLUMNS = (('test chrF', 'test_chrf'), ('test chrF++', 'test_chrfpp'), ('test perplexity', 'test_perplexity'))


def results_table(rows: list[dict]) -> str:
  """Markdown: test BLEU per seed, mean, sd and Student's t 95% interval over seeds; chrF, chrF++ and perplexity
  (mean ± sd); parameters and training speed; rows ordered as given, then a note on what ranks."""
  head = ['variant', 'seeds', 'test BLEU per seed', 'mean', 'sd', '95% CI (t, seeds)']
  head += [c for c, _ in RESULT_COLUMNS] + ['parameters', 'train tok/s per seed', 'train min']
  lines = ['| ' + ' | '.join(head) + ' |', '|' + '---|' * len(head)]
  for r in rows:
    s = pair_tests.seed_summary(r['test_bleu'])
    cells = [r['variant'], str(len(r['seeds'])), per_seed(s['per_seed']), f"{s['mean']:.2f}"]
    cells += ['–' if s['sd'] is None else f"{s['sd']:.2f}", interval(s['ci'])]
    cells += [mean_sd(r[k]) if k in r else '–' for _, k in RESULT_COLUMNS]
    cells += [f"{r['parameters']:,}", f"{r['tokens_per_s_per_seed']:.0f}", f"{r['train_seconds'] / 60:.1f}"]
    lines.append('| ' + ' | '.join(cells) + ' |')
  return '\n'.join(lines) + '\n\n' + results_note(rows)


def pool_seed_rows(rows: list[dict]) -> list[dict]:
  """The sweep's results.json rows with the seeds of a variant trained as separate runs (train.seeds as a
  sweep axis) pooled into one row per variant (stored.pooled_name), in first-seen order: per-seed lists
  concatenated, train_seconds summed (the cell's compute), tokens/s per seed averaged. A row whose pooled name
  is its own is kept as it is; a seed found twice is an error."""
  pooled: dict[str, dict] = {}
  for r in rows:
    name = stored.pooled_name(r)
    if name not in pooled:
      pooled[name] = {**r, 'variant': name, 'seeds': list(r['seeds']), 'runs': 1}
      pooled[name].update({k: list(r[k]) for k in POOLED_LISTS if k in r})
      continue
    into = pooled[name]
    stored.add_seeds(name, into['seeds'], r['seeds'])
    for k in POOLED_LISTS:
      if k in into and k in r:
        into[k] += list(r[k])
      else:
        into.pop(k, None)  # a run that predates the metric: the pooled cell is '–'
    into['train_seconds'] += r['train_seconds']
    into['tokens_per_s_per_seed'] = (into['tokens_per_s_per_seed'] * into['runs'] + r['tokens_per_s_per_seed']) / (
      into['runs'] + 1
    )
    into['runs'] += 1
  return list(pooled.values())


POOLED_LISTS = ('test_bleu', 'test_chrf', 'test_chrfpp', 'test_perplexity')


def results_note(rows: list[dict]) -> str:
  if min(len(r['seeds']) for r in rows) < 2:
    return ONE_SEED + '.'
  return (
    "sd: sample standard deviation over seeds; 95% CI: Student's t interval of the mean over seeds. The "
    "analysis (analysis/analysis.md) decides every contrast of its family by a t test over seeds (paired by seed "
    "number where the variants share their seeds) with the test set's variance, simultaneous intervals over the "
    'family.'
  )


def results_csv(rows: list[dict]) -> str:
  """One row per variant: per-seed test BLEU (space-separated), mean, sd and t interval (empty for one
  seed), chrF, chrF++ and perplexity mean and sd, size and speed, and whether its score attends (false: the
  baseline, which `analyze --from_scores` tests the others against by default)."""
  head = ['variant', 'seeds', 'test_bleu_per_seed', 'test_bleu_mean', 'test_bleu_sd', 'test_bleu_ci_low']
  head += ['test_bleu_ci_high'] + [f'{k}_{s}' for _, k in RESULT_COLUMNS for s in ('mean', 'sd')]
  head += ['parameters', 'tokens_per_s_per_seed', 'train_seconds', 'attends']
  out = [','.join(head)]
  for r in rows:
    s = pair_tests.seed_summary(r['test_bleu'])
    cells = [r['variant'], ' '.join(map(str, r['seeds'])), ' '.join(f'{v:.4f}' for v in s['per_seed'])]
    cells += [f"{s['mean']:.4f}", '' if s['sd'] is None else f"{s['sd']:.4f}"]
    cells += ['', ''] if s['ci'] is None else [f'{x:.4f}' for x in s['ci']]
    for _, k in RESULT_COLUMNS:
      v = np.asarray(r.get(k, []), float)  # empty cells for a metric the run predates
      cells += [f'{v.mean():.4f}' if v.size else '', f'{v.std(ddof=1):.4f}' if v.size > 1 else '']
    cells += [str(r['parameters']), f"{r['tokens_per_s_per_seed']:.1f}", f"{r['train_seconds']:.1f}"]
    cells.append('true' if stored.attends(r) else 'false')
    out.append(','.join(cells))
  return '\n'.join(out) + '\n'


def results_strip(rows: list[dict]) -> list[dict]:
  """plots.seed_strip's rows from the sweep's results: per-seed test BLEU, mean, t interval."""
  return [{'variant': r['variant'], **pair_tests.seed_summary(r['test_bleu'])} for r in rows]


# ---- the analysis: report.analyze_runs' results -----------------------------------------------------------


def analysis_table(results: list[dict]) -> str:
  """Markdown: analysis_cells, its notes as a legend, then the pairwise verdicts."""
  headers, rows, notes = analysis_cells(results)
  lines = ['| ' + ' | '.join(headers) + ' |', '|' + '---|' * len(headers)]
  lines += ['| ' + ' | '.join(cells) + ' |' for cells in rows]
  legend = ''.join(f'\n\n{n}.' if i == 0 else f'\n{n}.' for i, n in enumerate(notes))
  pairs = pairwise_text(results, one_seed_note=False)  # the legend above says what one seed means
  return '\n'.join(lines) + legend + ('\n\n' + pairs if pairs else '')


def analysis_cells(results: list[dict]) -> tuple[list[str], list[list[str]], list[str]]:
  """Column headers, one row of cells per run, and notes explaining them: greedy BLEU per seed, mean ± sd
  and 95% interval over seeds and sentences, p against `none`; chrF, beam BLEU; BLEU on the two longest
  source-length buckets every run shares; attention monotonicity, entropy, maximum weight and coverage
  deviation (pooled over seeds); repetition; AER. Columns whose data a run lacks are left out."""
  buckets = longest_shared_buckets(results)
  has_sig = all('significance' in r for r in results)
  baseline = next((r['significance']['baseline'] for r in results if has_sig and r['significance']['baseline']), None)
  columns = [('variant', lambda r: r['variant']), ('seeds', lambda r: str(len(r['greedy_bleu'])))]
  columns.append(('greedy BLEU per seed', lambda r: per_seed(r['greedy_bleu'])))
  columns.append(('greedy BLEU', lambda r: mean_sd(r['greedy_bleu'])))
  if has_sig:
    columns.append(('95% interval', lambda r: interval(r['significance']['corpus']['interval'])))
    if baseline:
      every = [p for r in results for p in r['significance']['pairs']]
      columns.append(
        (f'p vs {baseline}', lambda r: 'baseline' if r['variant'] == baseline else _p_against(every, r, baseline))
      )
  columns.append(('chrF', lambda r: mean_sd(r['greedy_chrf'])))
  if all('greedy_chrfpp' in r for r in results):
    columns.append(('chrF++', lambda r: mean_sd(r['greedy_chrfpp'])))
  if all('beam_bleu' in r for r in results):
    columns.append(('beam BLEU', lambda r: mean_sd(r['beam_bleu'])))
  ranks = min(len(r['greedy_bleu']) for r in results) >= 2  # one seed ranks nothing: no * either
  for bucket in buckets:
    columns.append((f'BLEU, sources {bucket} words', lambda r, b=bucket: _bucket_cell(r, b, ranks)))
  if any('attention' in r for r in results):
    columns.append(('monotonicity', lambda r: _monotonicity_cell(r.get('attention'))))
    columns.append(('entropy (norm.)', lambda r: _entropy_cell(r.get('attention'))))
    columns.append(('max weight', lambda r: _number(r.get('attention'), 'max_weight')))
    columns.append(('coverage dev.', lambda r: _number(r.get('attention'), 'coverage_deviation')))
  if all('greedy_repetition' in r for r in results):
    columns.append(('repetition %', lambda r: mean_sd([100 * x for x in r['greedy_repetition']], 1)))
  if all('aer' in r for r in results):
    columns.append(('AER', lambda r: mean_sd(r['aer'])))
  headers = [h for h, _ in columns]
  return headers, [[cell(r) for _, cell in columns] for r in results], _legend(results, has_sig, baseline)


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


def attention_verdict(results: list[dict]) -> str:
  """Whether each attention variant beats `none` on the two longest source-length buckets every run shares:
  its contrast against the baseline on the bucket's sentences, at the length share of the page's alpha
  (Bonferroni over every bucket and variant tested). With one seed nothing is ranked: each variant's score and
  p are shown, and the text says so, as the pairwise table does."""
  buckets = longest_shared_buckets(results)
  none = [r for r in results if not stored.attends(r)]
  others = [r for r in results if stored.attends(r)]
  if not buckets or not none or not others or not all('significance' in r for r in results):
    return ''
  base, lines = none[0], []
  seeds = min(len(r['seeds']) for r in results)
  for bucket in buckets:
    base_score = _bucket(base, bucket)
    head = f"Sources of {bucket} words: {base['variant']} reaches BLEU {base_score['bleu']:.2f}"
    scored = [(r['variant'], _bucket(r, bucket)) for r in others]
    scored.sort(key=lambda vs: -vs[1]['bleu'])
    shown = [f"{v} {s['bleu']:.2f} (adjusted p {format_p(s.get('p_adjusted'))})" for v, s in scored]
    if seeds < 2:
      lines.append(f'{head}; {", ".join(shown)}; not ranked with 1 seed.')
      continue
    groups = {'beat it': [], 'undecided': [], 'below it': [], 'equivalent to it': []}
    for (_, s), text in zip(scored, shown):
      kind = s.get('decision')
      label = (
        'equivalent to it'
        if kind == 'equivalent'
        else ('beat it' if s['bleu'] > base_score['bleu'] else 'below it')
        if kind == 'greater'
        else 'undecided'
      )
      groups[label].append(text)
    lines.append(head + ''.join(f'; {label}: ' + ', '.join(names) for label, names in groups.items() if names) + '.')
  s = results[0]['significance']
  what = (
    'one seed: the test covers the sentences only, not the seeds, so nothing is ranked'
    if seeds < 2
    else f'mean over seeds ({"/".join(map(str, sorted({len(r["seeds"]) for r in results})))} per variant), '
    "a t over seeds (paired where the seeds match) with the bucket's test-set variance, simultaneous intervals"
  )
  what += (
    f"; {s.get('length_level', 0):g} of the page's alpha, Bonferroni over every bucket and variant tested against none"
  )
  return f'\nLongest sentences, greedy BLEU against none ({what}):\n' + '\n'.join(lines)


def longest_shared_buckets(results, count: int = 2) -> list[str]:
  """The `count` longest source-length buckets in every run's greedy BLEU by length."""
  shared = None
  for r in results:
    buckets = [b['bucket'] for b in r['greedy_bleu_by_length']]
    shared = buckets if shared is None else [b for b in shared if b in buckets]
  return shared[-count:] if shared else []


def _p_against(pairs: list[dict], r: dict, baseline: str):
  pair = next((p for p in pairs if {p['a'], p['b']} == {r['variant'], baseline}), None)
  return '–' if pair is None else format_p(pair['p_value'])


def _bucket(result: dict, bucket: str) -> dict:
  """{'bleu', 'interval', 'p_value'} of a run on a length bucket (mean over seeds)."""
  for b in result.get('significance', {}).get('by_length', []):
    if b['bucket'] == bucket:
      return b
  bleu = next(b['bleu'] for b in result['greedy_bleu_by_length'] if b['bucket'] == bucket)
  return {'bleu': bleu, 'interval': None, 'p_value': None, 'p_adjusted': None, 'decision': None}


def _bucket_cell(r: dict, bucket: str, ranks: bool) -> str:
  s = _bucket(r, bucket)
  star = ranks and s.get('decision') == 'greater'
  return f"{s['bleu']:.2f}" + (' *' if star else '')


def _monotonicity_cell(attention) -> str:
  if not attention or attention.get('monotonicity') is None:
    return '–'
  const = f" ({attention['undefined']}/{attention['sentences']} const.)" if attention.get('undefined') else ''
  return f"{attention['monotonicity']:.2f}{const}"


def _entropy_cell(attention) -> str:
  if not attention or attention.get('entropy') is None:
    return '–'
  normalized = attention.get('normalized')
  return f"{attention['entropy']:.2f}" + ('' if normalized is None else f' ({normalized:.2f})')


def _number(attention, key: str) -> str:
  return '–' if not attention or attention.get(key) is None else f'{attention[key]:.2f}'


def _legend(results, has_sig, baseline) -> list[str]:
  seeds = sorted({len(r['greedy_bleu']) for r in results})
  notes = ['greedy BLEU: the value of one seed, or mean ± sd over seeds; chrF, beam BLEU, repetition and AER likewise']
  if has_sig:
    notes.append(
      "95% interval: Student's t interval of the variant's mean over seeds, with the test set's variance "
      '(jackknife over the test sentences) added, for that variant alone (the contrasts below carry the '
      'simultaneous ones); one seed: the test sentences alone'
      + (
        f"; p: the contrast's test against {baseline} (t over seeds, two-sided), unadjusted; * in a length column: "
        'decided against it (simultaneous interval over every bucket and variant tested, excluding 0)'
        + (' (never with one seed, which ranks nothing)' if seeds[0] < 2 else '')
        if baseline
        else ''
      )
    )
  if seeds[0] < 2:
    notes.append(ONE_SEED)
  if any('attention' in r for r in results):
    notes.append(
      'monotonicity: mean over sentences of the Spearman correlation of output position and '
      'attention peak (1 diagonal, -1 reversed; "k/n const.": sentences with one peak position, '
      'counted 0); entropy: attention entropy in nats (divided by log source length: 1 uniform); max weight: '
      'mean over output tokens of the largest weight; coverage dev.: mean over source positions of the '
      'distance from 1 of the total weight each received over the whole output (0: every position attended '
      'once in total). Greedy output of every seed, each measure the mean over seeds (counts summed); the '
      'EOS row is left out of all but coverage'
    )
  if all('greedy_repetition' in r for r in results):
    notes.append('repetition: greedy outputs in which some 4-gram occurs 3 or more times')
  return notes
