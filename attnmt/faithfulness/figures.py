"""The faithfulness pages' plots: explanations.png (the four papers' tests, `explanations_plot`) and
faithfulness.png (attnmt's counterfactual measures, `counterfactual_plot`), from the results of
attnmt/faithfulness/runner.py and counterfactual.py.
"""

from __future__ import annotations

import numpy as np

from attnmt import plots
from attnmt.analysis import stored
from attnmt.compare import pair_tests


def explanations_plot(results: list[dict], path: str) -> str:
  """Per attending variant: Moradi's preserved share per counterfactual (top) and Jain & Wallace's adversarial JSD
  (bottom), mean over seeds with the sd over seeds; a panel whose test was not run says so."""
  rows = [r for r in results if stored.attends(r)]
  panels = (
    ('moradi', 'Moradi et al.: steps whose token survives the counterfactual (%)', 100.0),
    (
      'jain_wallace',
      'Jain & Wallace: adversarial JSD from the attention, output within 0.05 TVD (nats, over the words)',
      1.0,
    ),
  )
  bars = []
  for test, title, scale in panels:
    labels, means, errs = [], [], []
    for r in rows:
      got = r.get('tests', {}).get(test)
      if not got or 'not_applicable' in got:
        continue
      picked = (
        {k: v['tokens'] for k, v in got['shares'].items()} if test == 'moradi' else {'': got['adversarial']['jsd']}
      )
      for name, values in picked.items():
        v = np.array([x for x in values if x is not None], float) * scale
        labels.append(f"{r['variant']} · {name}" if name else r['variant'])
        means.append(float(v.mean()) if v.size else float('nan'))
        errs.append(float(v.std(ddof=1)) if v.size > 1 else 0.0)
    bars.append((title, labels, means, errs))
  heights = [max(1, len(b[1])) for b in bars]
  fig = plots.mpl().figure.Figure(figsize=(10, 1.5 + 0.3 * sum(heights)))
  for ax, (title, labels, means, errs) in zip(fig.subplots(2, 1, gridspec_kw={'height_ratios': heights}), bars):
    ax.set_title(title, fontsize=9)
    if not labels:
      ax.text(0.5, 0.5, 'not measured', ha='center', va='center', transform=ax.transAxes)
      ax.set_axis_off()
      continue
    y = np.arange(len(labels))
    ax.barh(y, means, xerr=errs, capsize=3, color='0.6')
    ax.set_yticks(y, labels, fontsize=7)
    ax.invert_yaxis()
  fig.suptitle('Is attention an explanation? Mean over seeds, bars: sd over seeds', fontsize=10)
  fig.tight_layout()
  return plots.save(fig, path)


def counterfactual_plot(results: list[dict], path: str) -> str:
  """Per variant and intervention: the Jensen-Shannon divergence of the next-token distributions (left) and
  the share of the model's own content words the counterfactual output keeps (right), mean over seeds with
  Student's t 95 % intervals (analyze_run's results)."""
  rows = [r for r in results if stored.attends(r)]
  names = sorted({n for r in rows for n in r['interventions']}, key=lambda n: list(rows[0]['interventions']).index(n))
  fig = plots.mpl().figure.Figure(figsize=(11, 0.5 + 0.45 * max(1, len(rows)) * max(1, len(names))))
  for side, (ax, (key, title, scale)) in enumerate(
    zip(
      fig.subplots(1, 2),
      (('jsd', 'JSD of next-token distributions (bits)', 1.0), ('content_kept', 'content words kept (%)', 100.0)),
    )
  ):
    labels, means, errs = [], [], []
    for r in rows:
      for n in names:
        s = pair_tests.seed_summary([v * scale for v in r['interventions'][n][key]])
        labels.append(f"{r['variant']} · {n}")
        means.append(s['mean'])
        errs.append(0.0 if s['ci'] is None else s['ci'][1] - s['mean'])
    y = np.arange(len(labels))
    ax.barh(y, means, xerr=errs, capsize=3, color='0.6')
    ax.set_yticks(y, labels if side == 0 else [], fontsize=7)
    ax.invert_yaxis()
    ax.set_title(title, fontsize=9)
  seeds = sorted({len(r['seeds']) for r in rows})
  bars = "95% Student's t intervals over seeds" + ('; one seed: no interval' if 1 in seeds else '')
  fig.suptitle(f"Counterfactual attention, mean over {'/'.join(map(str, seeds))} seed(s); {bars}", fontsize=10)
  fig.tight_layout()
  return plots.save(fig, path)
