"""Runs compared over seeds and sentences, as data: attnmt.compare's result (`Comparison`), the table
experiments/analyze.py writes, from report.analyze_runs' results."""

from __future__ import annotations

import dataclasses

from attnmt.analysis import report, tables


@dataclasses.dataclass
class Comparison:
  """Runs compared over seeds and sentences (experiments/analyze.py's table, as data).

  A run is compared only with runs that translated the same sentences of `split` (the same corpus and test
  set): `groups` lists them, one list of run directories per set of sentences, and with more than one group
  markdown() starts with a line saying so."""

  results: list[dict]  # report.analyze_runs' result per run: what analysis.json holds
  split: str

  @property
  def groups(self) -> list[list[str]]:
    """The runs' directories by the sentences they translated (run_verdicts.add_significance's groups), in order."""
    groups = {}
    for r in self.results:
      groups.setdefault(r['significance'].get('group', 0), []).append(r['workdir'])
    return list(groups.values())

  def groups_note(self) -> str:
    """One line naming the groups of runs compared only among themselves; '' when every run translated the
    same sentences."""
    if len(self.groups) < 2:
      return ''
    names = [r['variant'] for r in self.results]
    unique = len(set(names)) == len(names)
    label = {r['workdir']: r['variant'] if unique else f"{r['variant']} ({r['workdir']})" for r in self.results}
    listed = '; '.join(f'group {k}: ' + ', '.join(label[w] for w in g) for k, g in enumerate(self.groups, 1))
    return (
      f'Not every run translated the same {self.split} sentences (another corpus or test set): each run is '
      f'compared only with the runs of its own group; {listed}.'
    )

  @property
  def variants(self) -> list[dict]:
    """Per run: its greedy BLEU per seed, mean, sd and Student's t interval over seeds with the test set's
    variance ('ci', 'interval'; with one seed ci is None and 'interval' covers the sentences only), and chrF and
    chrF++ per seed."""
    return [
      {
        'variant': r['variant'],
        **r['significance']['corpus'],
        'chrf_per_seed': r['greedy_chrf'],
        'chrfpp_per_seed': r['greedy_chrfpp'],
      }
      for r in self.results
    ]

  @property
  def pairs(self) -> list[dict]:
    """Every contrast of the family: the difference of mean BLEU, its simultaneous interval, the two-sided p,
    the adjusted p, the answer ('decision') and verdict and, when undecided, the seeds that would decide it."""
    return [p for r in self.results for p in r['significance']['pairs']]

  def cells(self) -> tuple[list[str], list[list[str]], list[str]]:
    """The table as analysis.md prints it: headers, one row of cells per run, the notes."""
    return tables.analysis_cells(self.results)

  def markdown(self) -> str:
    note = self.groups_note()
    return (note + '\n\n' if note else '') + tables.analysis_table(self.results)

  def _repr_markdown_(self) -> str:  # a notebook shows the table
    return self.markdown()

  def bleu_by_length(self):
    """The figure of BLEU by source length (mean over seeds, 95% intervals), as a matplotlib Figure."""
    return report.length_figure(self.results, self.split)
