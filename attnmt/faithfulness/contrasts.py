"""The verdicts of both faithfulness pages: declared measures (key paths into a result's per-seed lists), each cell
against a reference cell, all in ONE family (attnmt.compare.family): the paired t over same-numbered seeds (K - 1
df), with the test sentences' variance in where the measure is kept per sentence (the jackknife over them, as
attnmt.compare adds it to BLEU) and the test set held fixed otherwise, simultaneous Bonferroni intervals over
measures x cells, alpha 0.05 over the whole family. The measures' units differ, so no equivalence margin is
declared: a contrast is ranked or undecided.
"""

from __future__ import annotations

import numpy as np

from attnmt.analysis import stored
from attnmt.compare import family, verdicts
from attnmt.errors import ConfigError, InputError

# The columns of the counterfactual page (attnmt/faithfulness/counterfactual.py's per-intervention measures):
# (key, label, scale shown, digits).
COLUMNS = (
  ('jsd', 'JSD (bits)', 1.0, 3),
  ('tvd', 'TVD', 1.0, 3),
  ('argmax_changed', 'argmax changed %', 100.0, 1),
  ('bleu', 'BLEU', 1.0, 2),
  ('bleu_own', 'BLEU vs own', 1.0, 2),
  ('chrf_own', 'chrF vs own', 1.0, 1),
  ('function_kept', 'function words kept %', 100.0, 1),
  ('content_kept', 'content words kept %', 100.0, 1),
)


# The measures the page ranks, declared before the data: key paths into a result's per-seed lists.
MEASURES = ('interventions/uniform/jsd', 'interventions/zero_max/argmax_changed', 'erasure/changed_max')
_OTHER_MEASURES = {
  'erasure/changed_max': ('erasure: most attended, output changed %', 100.0, 1),
  'erasure/changed_random': ('erasure: random token, output changed %', 100.0, 1),
  'erasure/bleu_own_output': ('own BLEU', 1.0, 2),
  'agreement/spearman': ('attention-gradient Spearman', 1.0, 3),
  # the four papers' declared measures (attnmt/faithfulness/runner.py MEASURES)
  'tests/moradi/shares/uniform/tokens': ('Moradi: uniform keeps the token %', 100.0, 1),
  'tests/serrano_smith/orders/attention/fraction': ('Serrano & Smith: fraction removed, attention order', 1.0, 3),
  'tests/jain_wallace/adversarial/jsd': ('Jain & Wallace: adversarial JSD', 1.0, 4),
  'tests/wiegreffe_pinter/accuracy_uniform': ('Wiegreffe & Pinter: accuracy, uniform weights %', 100.0, 1),
}


def measure_format(path: str) -> tuple[str, float, int]:
  """A measure's label, the scale its values are shown in (shares as %) and the digits shown."""
  part = path.split('/')
  if len(part) == 3 and part[0] == 'interventions':
    for key, label, scale, digits in COLUMNS:
      if key == part[2]:
        return f'{part[1]}: {label}', scale, digits
  return _OTHER_MEASURES.get(path, (path, 1.0, 3))


def measure_values(result: dict, path: str) -> list:
  """A result's per-seed list at `path` ('interventions/uniform/jsd', 'erasure/changed_max', ...)."""
  node = result
  for key in path.split('/'):
    if not isinstance(node, dict) or key not in node:
      raise InputError(
        f"{result['variant']}: no measure '{path}' (no '{key}'); measures are key paths into the results, "
        "e.g. 'interventions/uniform/jsd', 'interventions/zero_max/argmax_changed', 'erasure/changed_max'"
      )
    node = node[key]
  if not isinstance(node, list) or len(node) != len(result['seeds']):
    raise InputError(f"{result['variant']}: '{path}' is not a list of one value per seed")
  return node


def reference_name(names: list[str], reference: str) -> str:
  """The cell `reference` names: a variant's full name, or the score its name starts with when one cell alone
  has it ('additive' for 'additive/bahdanau/global')."""
  if reference in names:
    return reference
  found = [n for n in names if n.split('/')[0] == reference]
  if len(found) != 1:
    raise ConfigError(
      f"reference '{reference}' is not {'one' if not found else 'exactly one'} of the measured cells "
      f"({', '.join(names)}); give a cell's full name"
    )
  return found[0]


def same_test_set(results: list[dict]) -> None:
  """Refuses results measured on different sentences (their split, count and, where kept, the fingerprint of
  the sentences: attnmt/faithfulness/chunks.py), naming the ones that differ: a verdict compares cells on the
  same sentences or not at all."""
  by = {}
  for r in results:
    by.setdefault((r.get('split'), r.get('sentences'), r.get('test_set')), []).append(r['variant'])
  if len(by) > 1:
    groups = '; '.join(
      f"{', '.join(v)}: {n} sentences" + (f' of {split}' if split else '') + (f' ({fp})' if fp else '')
      for (split, n, fp), v in by.items()
    )
    raise InputError(
      f'the results were measured on different test sentences ({groups}); measure every cell on the same split '
      'and sentences before comparing or merging them'
    )


def jackknife_rows(result: dict, path: str):
  """K x N: a per-sentence measure of each seed with each sentence left out in turn (the delete-one jackknife of a
  ratio: (sum - sum_i) / (count - count_i)), from the per-sentence sums and counts the runner keeps for the
  declared measures ('tests/<test>/per_sentence/<key>'); None where the result keeps none for `path` (the measure
  is not per sentence, or was computed before they were kept) or a leave-one-out count is 0."""
  part = path.split('/', 2)
  if len(part) < 3 or part[0] != 'tests':
    return None
  kept = result.get('tests', {}).get(part[1], {}).get('per_sentence', {}).get(part[2])
  if kept is None:
    return None
  sums, counts = np.asarray(kept['sum'], float), np.asarray(kept['count'], float)
  if sums.ndim != 2 or sums.shape[1] < 2 or sums.shape != counts.shape or sums.shape[0] != len(result['seeds']):
    raise InputError(f"{result['variant']}: the per-sentence sums of '{path}' are not one row of sentences per seed")
  left = counts.sum(1, keepdims=True) - counts
  if (left <= 0).any():
    return None
  return (sums.sum(1, keepdims=True) - sums) / left


def _jack(cells: list[dict], path: str, scale: float):
  rows = [jackknife_rows(r, path) for r in cells]
  if any(j is None for j in rows) or len({j.shape[1] for j in rows}) != 1:
    return None
  return [j * scale for j in rows]


def contrasts(
  results: list[dict],
  measures=MEASURES,
  reference: str = 'additive',
  alpha: float = family.ALPHA,
  delta=None,
  plan: bool = True,
) -> dict:
  """The page's verdicts: for each declared measure (a key path, `measure_values`), every cell whose score
  attends against `reference`, all measures x cells in one family with family-wise error <= alpha. Each
  measure is one verdicts.compare_scores call spending alpha / number of measures (Bonferroni: each contrast
  tested at alpha / m, its interval the simultaneous one, adjusted p = min(1, p m)), by the paired t over the
  cells' same-numbered seeds (K - 1 df; unpaired, min(K) - 1 df, where their seeds differ). Where every cell
  keeps the measure per sentence (`jackknife_rows`), the test sentences' variance is in, as attnmt.compare adds
  it to BLEU (pair_tests.test_set_variance of the jackknife rows; df capped at N - 1): the verdict then claims
  another test set of this kind too. Otherwise the test set is held fixed (every cell is measured on the same
  sentences, so they add no variance to a difference between cells). No equivalence margin is declared (the
  measures' units differ): `delta` None is 0, so a contrast is 'greater' (its interval excludes 0, the sign says
  which way) or 'undecided', never 'equivalent'. `plan`
  False leaves out the seed plans (verdicts.compare_scores; the A/A checks read only the decisions). Returns {'reference', 'measures', 'alpha', 'family_size',
  'level', 'method', 'rows'}, a row per contrast: compare_scores' pair (a the cell, b the reference, difference
  a - b in the shown scale) with 'measure', 'label' and 'sentences' (whether the sentences' variance is in)."""
  cells = [r for r in results if stored.attends(r)]
  names = [r['variant'] for r in cells]
  if len(names) < 2:
    raise InputError(f'verdicts need a reference and at least one other cell whose score attends; got {names}')
  same_test_set(cells)
  ref = reference_name(names, reference)
  measures = list(measures)
  if not measures or len(set(measures)) != len(measures):
    raise ConfigError(f'declare each measure of the family once, at least one; got {measures}')
  delta = 0.0 if delta is None else float(delta)
  level = alpha / len(measures)
  rows, over_sentences = [], []
  for path in measures:
    label, scale, _ = measure_format(path)
    observed = [[v * scale for v in measure_values(r, path)] for r in cells]
    seeds = [r['seeds'] for r in cells]  # same-numbered seeds pair (pair_tests.pair_test)
    jack = _jack(cells, path, scale)
    compared = verdicts.compare_scores(
      names, observed, ref, jack=jack, contrasts=ref, delta=delta, alpha=alpha, level=level, seeds=seeds, plan=plan
    )
    rows += [{'measure': path, 'label': label, 'sentences': jack is not None, **pair} for pair in compared['pairs']]
    if jack is not None:
      over_sentences.append(path)
  sentences = sorted({r['sentences'] for r in cells})
  held = [m for m in measures if m not in over_sentences]
  test_set = (
    (
      f'the test sentences\' variance in by the jackknife over them for {len(over_sentences)} measure(s)'
      if over_sentences
      else ''
    )
    + ('; ' if over_sentences and held else '')
    + (
      f'the test set held fixed for {len(held)} measure(s) (every cell measured on the same sentences)' if held else ''
    )
  )
  return {
    'reference': ref,
    'measures': measures,
    'over_sentences': over_sentences,
    'cells': len(names) - 1,
    'alpha': alpha,
    'delta': delta,
    'family_size': len(rows),
    'level': alpha / len(rows),
    'method': (
      f"the paired t over same-numbered seeds (K - 1 df; unpaired where the seeds differ), two-sided, {test_set} "
      f"({'/'.join(map(str, sentences))} sentences); one family of {len(measures)} measure(s) x {len(names) - 1} "
      f'cell(s) against {ref} = {len(rows)} contrasts, simultaneous Bonferroni intervals (each at level '
      f'{alpha:g} / {len(rows)}), family-wise error <= {alpha:g} over all of them'
    ),
    'rows': rows,
  }


def _p(p) -> str:
  if p is None:
    return '—'
  return '< 0.0001' if p < 1e-4 else f'{p:.4f}'


def _test_set(v: dict) -> str:
  over = set(v.get('over_sentences', ()))
  if not over:
    return 'the test set held fixed (the sentences are the same for every cell)'
  held = [m for m in v['measures'] if m not in over]
  return "with the test sentences' variance in (the delete-one jackknife over them, df at most N − 1)" + (
    f"; the test set held fixed for {', '.join(held)}" if held else ''
  )


def verdicts_markdown(verdicts: dict) -> str:
  """The verdicts of `contrasts` as a table, after one sentence stating the family."""
  v = verdicts
  lines = [
    f"Verdicts: one family of {len(v['measures'])} measures × {v['cells']} cells against `{v['reference']}` = "
    f"{v['family_size']} contrasts, alpha {v['alpha']:g} over all of them: the paired t over same-numbered seeds (K − 1 df), "
    + _test_set(v)
    + ", two-sided, Bonferroni (adjusted p = min(1, "
    f"{v['family_size']} p)), simultaneous intervals (each of coverage 1 − {v['alpha']:g}/{v['family_size']}), "
    'so a contrast is ranked exactly when its interval excludes 0; no equivalence margin is declared (the '
    "measures' units differ): each contrast is ranked or undecided.",
    '',
    '| measure | cell − reference | difference | simultaneous interval | p | adjusted p | verdict |',
    '|---|---|---|---|---|---|---|',
  ]
  for r in v['rows']:
    _, _, digits = measure_format(r['measure'])
    interval = '—' if r['interval'] is None else f"[{r['interval'][0]:+.{digits}f}, {r['interval'][1]:+.{digits}f}]"
    lines.append(
      f"| {r['label']} | {r['a']} − {r['b']} | {r['difference']:+.{digits}f} | {interval} | {_p(r['p_value'])} | "
      f"{_p(r['p_adjusted'])} | {r['verdict']} |"
    )
  return '\n'.join(lines) + '\n'
