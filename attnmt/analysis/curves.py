"""Learning curves read back from run directories: validation records against training time."""

from __future__ import annotations

import json
import os

import numpy as np


def validation_records(workdir: str) -> list[dict]:
  """The validation lines of a run's metrics.jsonl that carry training time ('train_seconds', evaluation
  excluded), one per step in step order; [] if the run has none."""
  path = os.path.join(workdir, 'metrics.jsonl')
  if not os.path.isfile(path):
    raise FileNotFoundError(f'{path} does not exist; pass run directories that have trained')
  with open(path) as f:
    records = [json.loads(line) for line in f if line.strip()]
  by_step = {r['step']: r for r in records if r.get('split') == 'validation' and 'train_seconds' in r}
  return [by_step[s] for s in sorted(by_step)]


def bleu_at(records: list[dict], minutes: float) -> float:
  """Mean validation BLEU of the last evaluation at or before `minutes` of training (nan if none)."""
  before = [r for r in records if r['train_seconds'] <= 60 * minutes + 1e-6]
  return float(np.mean(before[-1]['bleu'])) if before else float('nan')


def curves_table(curves: dict[str, list[dict]], tests: dict[str, dict], minutes: list[float]) -> str:
  """Markdown: validation BLEU at fixed training minutes, the last evaluation, and test BLEU if known."""
  head = (
    ['run']
    + [f'val BLEU at {m:g} min' for m in minutes]
    + ['last step', 'train min', 'val BLEU', 'val ppl', 'test BLEU']
  )
  lines = ['| ' + ' | '.join(head) + ' |', '|' + '---|' * len(head)]
  for name, records in curves.items():
    last, test = records[-1], tests.get(name)
    cells = [name] + [_number(bleu_at(records, m)) for m in minutes]
    cells += [
      str(last['step']),
      f"{last['train_seconds'] / 60:.1f}",
      f"{np.mean(last['bleu']):.2f}",
      f"{np.mean(last['perplexity']):.2f}",
      f"{np.mean(test['test_bleu']):.2f}" if test else '-',
    ]
    lines.append('| ' + ' | '.join(cells) + ' |')
  return '\n'.join(lines)


def _number(x: float) -> str:
  return '–' if np.isnan(x) else f'{x:.2f}'
