"""The faithfulness pages. The four papers' tests: explanations.md (tables per test, each column defined),
explanations.json (per-seed lists), explanations.png, and the verdicts of the declared measures (`contrasts`), from
the results attnmt/faithfulness/runner.py computes. attnmt's own counterfactual measures
(attnmt/faithfulness/counterfactual.py): `counterfactual_markdown`. Their plots: attnmt/faithfulness/figures.py.
"""

from __future__ import annotations

import json
import os

import numpy as np

from attnmt.analysis import files
from attnmt.compare import pair_tests
from attnmt.faithfulness import figures
from attnmt.faithfulness.contrasts import COLUMNS, contrasts as family_contrasts, verdicts_markdown
from attnmt.faithfulness.runner import CITATIONS, MEASURES, TESTS, nan_none, parse_tests
from attnmt.faithfulness.summaries import MAX_ATTENTION_BINS, bin_label


def measures(tests) -> list:
  """The declared measures (`MEASURES`) of the tests run."""
  return [m for t in parse_tests(tests) for m in MEASURES[t]]


def contrasts(results: list[dict], reference: str, tests=TESTS) -> dict:
  """One family over the declared measures of `tests` x the attending cells against `reference`
  (contrasts.contrasts: the paired t over seeds, the test sentences' variance in by the jackknife, Bonferroni)."""
  return family_contrasts(results, measures(tests), reference)


# Writing ---------------------------------------------------------------------------------------------------------


def _values(node, path: str):
  for key in path.split('/'):
    if not isinstance(node, dict) or key not in node:
      return None
    node = node[key]
  return node


def _cell(values, scale: float = 1.0, digits: int = 3) -> str:
  """mean ± sd over the seeds with a value (one: the value alone); '—' where none has one."""
  if values is None:
    return '—'
  if not isinstance(values, list):
    values = [values]
  v = np.array([x for x in values if x is not None and np.isfinite(x)], float) * scale
  if not v.size:
    return 'n/a'
  if v.size == 1:
    return f'{v[0]:.{digits}f}'
  return f'{v.mean():.{digits}f} ± {v.std(ddof=1):.{digits}f}'


DEFINITIONS = {
  'moradi': (
    'At each decoder step of the model\'s own greedy output, the step\'s attention is replaced by a counterfactual '
    '(at that step only, from the same decoder state); a step is preserved when its most probable token does not '
    'change. Cells: the preserved share of steps (%); function and content words by the step\'s token.',
    'Their counterfactuals: uniform, permute_moved (RandomPermute: a new order per step, redrawn until the largest '
    'weight moves), zero_max (ZeroOutMax), last (LastEncoderState), only_max, keep_max_uniform_others and zero_out '
    '(ZeroOut: the output layer\'s hidden vector zeroed, so the token is the output bias\'s choice); \'any\' '
    'pools uniform, zero_max and the permute as their code does. Function tokens as their list classes them: end '
    'of sentence, punctuation and the list\'s words (a sentencepiece piece that begins a word counts as that word, '
    'a continuation piece as content). Differences from the paper: the word list is Spanish where theirs is English '
    '(a target language the list does not cover gets overall shares only).',
  ),
  'serrano_smith': (
    'At each decoder step, the attention weights are zeroed one at a time in a ranking\'s order (the rest '
    'renormalised) until the most probable token changes. Cells: the mean fraction of the source positions '
    'removed at the first flip (over the steps that flip), the share of steps that never flip (%), for random '
    'pooled over its 5 draws as their avg_random pools them, and the share of steps at which no order flips; the '
    'single-weight test (the ranking\'s top weight zeroed against one other drawn at random: the mean difference of '
    'the output JSDs, top minus other, the share of steps where the top\'s is larger, and the 2 x 2 shares of '
    'decision flips); attention against each gradient ranking step by step (over the steps where either flips, '
    'which needs fewer removals).',
    'As theirs, steps whose source has one position are left out. Differences from the paper: each decoder step is '
    'one decision (theirs: a document classifier\'s label); the gradient ranking is d p(decision) / d weight, the '
    'rest of the step held; their avg_random keeps the instances where their from-bottom order flips, an order not '
    'run here.',
  ),
  'jain_wallace': (
    'Kendall\'s tau-b at each decoder step between the attention weights and an importance measure (the '
    'gradient x input of the source embeddings with the attention held, and the output distribution\'s TVD when '
    'a source token is deleted); the permutation test (the words\' weights permuted 100 times at that step: the '
    'median output TVD, overall and by the step\'s largest weight, and the share of permutations that change the '
    'token); the adversarial search: the largest JSD (nats, <= ln 2) from the model\'s attention of an attention '
    'at that step whose output stays within a bound of the model\'s (theirs: TVD <= 0.05, the JSD over the words; '
    'strict: TVD <= epsilon, every position).',
    'Differences from the paper: one decision per decoder step, the output the next-token distribution and its '
    'difference the TVD (their one sigmoid\'s |dy| for two classes); the adversarial search runs on the first '
    'sentences only (settings below the table); its JSD counts 0 where no candidate holds the bound (the model\'s '
    'own attention does).',
  ),
  'wiegreffe_pinter': (
    'Token accuracy teacher-forced on the reference with the model\'s own attention and with uniform weights at '
    'every step (the state follows them), how often the uniform step chooses the own step\'s token, and the seed '
    'variance: per step of the first seed\'s output, the median JSD (nats) of the other seeds\' attention from '
    'the first seed\'s, averaged over steps and by the first seed\'s largest weight. From the first seed: the '
    'non-contextual diagnostic (a model of source embeddings, an MLP per token and no recurrence, trained with the '
    'model\'s attention frozen in, with uniform weights and with its own learned attention; token accuracy on '
    'the reference) and the adversary (the same architecture trained to match the model\'s outputs, TVD, while '
    'moving its attention away, minus lambda x KL: how far the attention moved, JSD, for how much output change).',
    'Differences from the paper: the uniform rows here are the same model with uniform weights, not retrained (a '
    'variant of score none is the retrained one); one decision per decoder step; the diagnostic also reads the '
    'previous target token; objectives and figures are means over steps (theirs: sums); the lambdas are attnmt\'s '
    '(their code fixes none); a fixed number of steps, no epoch selection (wiegreffe_pinter.py says each).',
  ),
}


def _bins(prefix: str, digits: int = 4) -> list[tuple]:
  return [
    (f'max weight {bin_label(i)}', f'{prefix}/{bin_label(i)}/mean', 1.0, digits)
    for i in range(len(MAX_ATTENTION_BINS) - 1)
  ]


def _tables(results: list[dict], test: str) -> list[tuple[str, list[tuple]]]:
  """(title, columns) of a test's tables, each column (header, key path under the test, scale, digits), from the
  attending results."""
  done = [r['tests'][test] for r in results if test in r.get('tests', {}) and 'not_applicable' not in r['tests'][test]]
  return _TABLES[test](done)


def _moradi_tables(done: list[dict]) -> list[tuple[str, list[tuple]]]:
  labels = list(dict.fromkeys(label for d in done for label in d['shares']))
  cols = [
    (f'{label}{title} %', f'shares/{label}/{kind}', 100.0, 1)
    for kind, title in (('tokens', ''), ('function', ' function'), ('content', ' content'))
    for label in labels
    if any(kind in d['shares'].get(label, {}) for d in done)
  ]
  return [('', cols)]


def _serrano_smith_tables(done: list[dict]) -> list[tuple[str, list[tuple]]]:
  orders = list(dict.fromkeys(o for d in done for o in d['orders']))
  flips = [
    c
    for o in orders
    for c in (
      (f'{o}: fraction removed', f'orders/{o}/fraction', 1.0, 3),
      (f'{o}: never flips %', f'orders/{o}/never_flipped', 100.0, 1),
    )
  ] + [('no order flips %', 'no_order_flips', 100.0, 1)]
  single = [
    c
    for o in orders
    if o != 'random'
    for c in (
      (f'{o}: JSD top - other', f'orders/{o}/single/jsd_diff', 1.0, 4),
      (f'{o}: top larger %', f'orders/{o}/single/jsd_top_larger', 100.0, 1),
      (f'{o}: only top flips %', f'orders/{o}/single/flips_only_top', 100.0, 1),
      (f'{o}: only other flips %', f'orders/{o}/single/flips_only_other', 100.0, 1),
      (f'{o}: both flip %', f'orders/{o}/single/flips_both', 100.0, 1),
    )
  ]
  names = list(dict.fromkeys(n for d in done for n in d.get('paired', {})))
  paired = [
    c
    for n in names
    for c in (
      (f'{n}: attention sooner %', f'paired/{n}/a_sooner', 100.0, 1),
      (f'{n}: {n.split("_vs_")[1]} sooner %', f'paired/{n}/b_sooner', 100.0, 1),
      (f'{n}: same %', f'paired/{n}/same', 100.0, 1),
    )
  ]
  return [
    ('Weights removed until the decision flips', flips),
    ('Single weight: the top weight zeroed against a random other', single),
    ('Step by step: which ranking flips sooner', paired),
  ]


_JAIN_WALLACE = [
  (
    'Rank correlation',
    [
      ('τ(attention, gradient)', 'tau_gradient', 1.0, 3),
      ('τ(attention, leave-one-out)', 'tau_loo', 1.0, 3),
      ('gradient: p < 0.05 %', 'significant_gradient', 100.0, 1),
      ('leave-one-out: p < 0.05 %', 'significant_loo', 100.0, 1),
    ],
  ),
  (
    'Permuted attention: median output TVD',
    [
      ('all steps', 'permutation/median_difference', 1.0, 4),
      ('token changes %', 'permutation/flipped', 100.0, 1),
      *_bins('permutation/by_max_attention'),
    ],
  ),
  (
    'Adversarial attention',
    [
      ('JSD (theirs: TVD <= 0.05, words)', 'adversarial/jsd', 1.0, 4),
      ('JSD where held', 'adversarial/jsd_held', 1.0, 4),
      ('held %', 'adversarial/held', 100.0, 1),
      ('strict JSD (TVD <= ε, all)', 'adversarial/strict_jsd', 1.0, 4),
      ('strict held %', 'adversarial/strict_held', 100.0, 1),
      ('steps', 'adversarial/steps', 1.0, 0),
    ],
  ),
]

_WIEGREFFE_PINTER = [
  (
    'Uniform weights',
    [
      ('accuracy, own attention %', 'accuracy_own', 100.0, 1),
      ('accuracy, uniform %', 'accuracy_uniform', 100.0, 1),
      ('uniform chooses own token %', 'agreement', 100.0, 1),
    ],
  ),
  (
    'Seed variance: median JSD of the other seeds\' attention',
    [
      ('all steps', 'seed_variance/jsd_median', 1.0, 4),
      ('output TVD', 'seed_variance/output_tvd', 1.0, 4),
      *_bins('seed_variance/by_max_attention'),
    ],
  ),
  (
    'Non-contextual diagnostic (first seed): token accuracy',
    [
      ("the model's attention frozen in %", 'diagnostic/accuracy/frozen', 100.0, 1),
      ('uniform %', 'diagnostic/accuracy/uniform', 100.0, 1),
      ('its own learned attention %', 'diagnostic/accuracy/learned', 100.0, 1),
      ('steps', 'diagnostic/tokens', 1.0, 0),
    ],
  ),
]

_TABLES = {  # each test's tables from its attending results
  'moradi': _moradi_tables,
  'serrano_smith': _serrano_smith_tables,
  'jain_wallace': lambda done: _JAIN_WALLACE,
  'wiegreffe_pinter': lambda done: _WIEGREFFE_PINTER,
}


def _rows(results: list[dict], test: str, cols: list[tuple], first: bool = True) -> list[str]:
  """A table's lines; a variant the test does not apply to has its one line in the test's first table only."""
  headers = [h for h, _, _, _ in cols]
  lines = ['| variant | seeds | ' + ' | '.join(headers) + ' |', '|---|---|' + '---|' * len(headers)]
  for r in results:
    got = r.get('tests', {}).get(test)
    if got is None:
      continue
    if 'not_applicable' in got:
      if not first:
        continue
      trained = got.get('trained_uniform_accuracy')  # Wiegreffe & Pinter's baseline: trained with uniform weights
      first = (
        f'{_cell(trained, 100.0, 1)} (trained with uniform weights)'
        if trained
        else f"not applicable: {got['not_applicable']}"
      )
      lines.append(f"| {r['variant']} | {len(r['seeds'])} | {first} |" + ' |' * (len(headers) - 1))
      continue
    unmeasured = got.get('seed_variance', {}).get('not_measured')
    cells = [
      unmeasured if unmeasured and path.startswith('seed_variance/') else _cell(_values(got, path), scale, digits)
      for _, path, scale, digits in cols
    ]
    lines.append(f"| {r['variant']} | {len(r['seeds'])} | " + ' | '.join(cells) + ' |')
  return lines


def _adversary_rows(results: list[dict]) -> list[str]:
  """Wiegreffe & Pinter's adversary, one row per variant and lambda (the first seed's)."""
  rows = [
    (r, a, got['adversary'])
    for r in results
    if 'adversary' in (got := r.get('tests', {}).get('wiegreffe_pinter', {}))
    for a in got['adversary']['adversaries']
  ]
  if not rows:
    return []
  lines = [
    '',
    '### Adversarially trained attention (first seed)',
    '',
    '| variant | λ | attention JSD from the model\'s | output TVD | accuracy % | the model\'s accuracy % |',
    '|---|---|---|---|---|---|',
  ]
  for r, a, adv in rows:
    lines.append(
      f"| {r['variant']} | {a['lambda']:g} | {_cell(a['jsd'], 1.0, 4)} | {_cell(a['tvd'], 1.0, 4)} | "
      f"{_cell(a['accuracy'], 100.0, 1)} | {_cell(adv['base_accuracy'], 100.0, 1)} |"
    )
  return lines


def markdown(results: list[dict], frozen_results=(), verdicts: dict | None = None) -> str:
  """explanations.md: per test, its paper, its definition and the differences from the paper, then its tables (rows
  the variants, cells mean ± sd over seeds); the frozen-attention table; the verdicts where given."""
  tests = list(dict.fromkeys(t for r in results for t in r.get('tests', {})))
  sentences = sorted({r['sentences'] for r in results})
  lines = [
    '# Is attention an explanation?',
    '',
    f"Sentences: {'/'.join(map(str, sentences))} (the first of the split); cells are the mean ± sd over seeds (one "
    'seed: the value alone; n/a: not defined for any seed).',
  ]
  for test in tests:
    definition, differences = DEFINITIONS[test]
    lines += ['', f'## {CITATIONS[test]}', '', definition, '', differences]
    tables = [(title, cols) for title, cols in _tables(results, test) if cols]
    for k, (title, cols) in enumerate(tables):
      lines += ['', *([f'### {title}', ''] if title else []), *_rows(results, test, cols, k == 0)]
    if test == 'wiegreffe_pinter':
      lines += _adversary_rows(results)
    settings = [r['settings'][test] for r in results if test in r.get('settings', {})]
    if settings:
      lines += ['', 'Settings: ' + json.dumps(settings[0], ensure_ascii=False)]
  if frozen_results:
    lines += [
      '',
      f"## {CITATIONS['wiegreffe_pinter']}: frozen attention",
      '',
      'Run B\'s decoder reads run A\'s attention (A\'s first seed) at every step along each B seed\'s own greedy '
      'output; cells: the share of steps where B still chooses its own token (%), with A\'s attention and with '
      'uniform weights (with its own attention: 100 by construction).',
      '',
      '| A (attention given) | B (decoder) | B seeds | A\'s attention % | uniform % |',
      '|---|---|---|---|---|',
    ]
    for f in frozen_results:
      lines.append(
        f"| {f['a']} | {f['b']} | {len(f['seeds'])} | {_cell(f['agrees'], 100.0, 1)} | "
        f"{_cell(f['agrees_uniform'], 100.0, 1)} |"
      )
  if verdicts is not None:
    lines += ['', verdicts_markdown(verdicts).rstrip('\n')]
  else:
    lines += ['', 'No reference cell: no verdicts (the per-seed lists are in explanations.json).']
  return '\n'.join(lines) + '\n'


# The counterfactual page (attnmt/faithfulness/counterfactual.py's measures) ------------------------------------


def _interval(values: list, scale: float, digits: int) -> str:
  s = pair_tests.seed_summary([v * scale for v in values])
  if s['ci'] is None:
    return f"{s['mean']:.{digits}f}"
  return f"{s['mean']:.{digits}f} [{s['ci'][0]:.{digits}f}, {s['ci'][1]:.{digits}f}]"


def counterfactual_markdown(results: list[dict], verdicts: dict | None = None) -> str:
  """The tables of `analyze_run` results: mean over seeds with Student's t 95 % interval (one seed: the value
  alone, said above the table), and with `verdicts` (from `contrasts`) the table of the page's verdicts."""
  seeds = sorted({len(r['seeds']) for r in results})
  lines = [
    f"Seeds per variant: {', '.join(map(str, seeds))}; cells are the mean over seeds and Student's t 95 % interval"
    + (' (one seed: the value alone, no interval)' if 1 in seeds else '')
    + f"; sentences: {', '.join(sorted({str(r['sentences']) for r in results}))}.",
    '',
    '| variant | intervention | ' + ' | '.join(h for _, h, _, _ in COLUMNS) + ' |',
    '|---|---|' + '---|' * len(COLUMNS),
  ]
  for r in results:
    if not r['attends']:
      lines.append(f"| {r['variant']} | (its score does not attend: no counterfactual) |" + ' |' * len(COLUMNS))
      continue
    for name, m in r['interventions'].items():
      lines.append(f"| {r['variant']} | {name} | " + ' | '.join(_interval(m[k], s, d) for k, _, s, d in COLUMNS) + ' |')
  lines += [
    '',
    '| variant | own BLEU | erasure: most attended, output changed % | random token % | attention-gradient Spearman |',
    '|---|---|---|---|---|',
  ]
  for r in results:
    if r['attends']:
      e, a = r['erasure'], r['agreement']
      lines.append(
        f"| {r['variant']} | {_interval(e['bleu_own_output'], 1, 2)} | {_interval(e['changed_max'], 100, 1)} | "
        f"{_interval(e['changed_random'], 100, 1)} | {_interval(a['spearman'], 1, 3)} |"
      )
  if verdicts is not None:
    lines += ['', verdicts_markdown(verdicts).rstrip('\n')]
  return '\n'.join(lines) + '\n'


def write(results: list[dict], out_dir: str, frozen_results=(), verdicts: dict | None = None) -> list[str]:
  """explanations.json ({'runs': results, 'frozen': ..., 'verdicts': ...}), explanations.md and explanations.png
  under `out_dir`; returns their paths."""
  os.makedirs(out_dir, exist_ok=True)
  doc = {'runs': results, 'frozen': list(frozen_results), 'verdicts': verdicts}
  paths = [os.path.join(out_dir, f'explanations.{ext}') for ext in ('json', 'md', 'png')]
  files.write_text(paths[0], json.dumps(nan_none(doc), indent=1, ensure_ascii=False) + '\n')
  files.write_text(paths[1], markdown(results, frozen_results, verdicts))
  figures.explanations_plot(results, paths[2])
  return paths
