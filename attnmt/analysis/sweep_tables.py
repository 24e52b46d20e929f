"""The sweep's tables, from every variant's results.json: test BLEU per seed with mean, sd and interval, chrF,
chrF++, perplexity, size and speed, as Markdown, CSV and the seed strip's rows, with the seeds of a variant
trained as separate runs pooled into one row; and the line a finished training run prints (format_summary)."""

from __future__ import annotations

import numpy as np

from attnmt.analysis import stored
from attnmt.analysis.formatting import ONE_SEED, interval, mean_sd, per_seed
from attnmt.compare import pair_tests


def format_summary(s: dict) -> str:
  """One line for a finished training run (experiments/train.py)."""
  return (
    f"{s['variant']}: test BLEU {mean_sd(s['test_bleu'])}, chrF {mean_sd(s['test_chrf'])}, "
    f"chrF++ {mean_sd(s['test_chrfpp'])}, "
    f"perplexity {mean_sd(s['test_perplexity'])} over seeds {s['seeds']} "
    f"(best step {s['best_step']}, {s['parameters']:,} parameters)"
  )


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
