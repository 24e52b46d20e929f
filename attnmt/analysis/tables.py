"""The analysis table researchers read (analysis.md, the cells of report.html), from report.analyze_runs' results:
per run greedy BLEU per seed, mean ± sd, 95% interval and p against the baseline, chrF, beam BLEU, BLEU on the
longest sentences, attention statistics, repetition and AER, with notes saying what each means, then the pair table
(pair_table); and the verdict on the longest sentences against `none` (attention_verdict). One seed shows its value
alone (never "± 0.00"), and the verdicts say the variants are not ranked."""

from __future__ import annotations

from attnmt.analysis import stored
from attnmt.analysis.formatting import ONE_SEED, format_p, interval, mean_sd, per_seed
from attnmt.analysis.pair_table import pairwise_text


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
