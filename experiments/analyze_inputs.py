"""What `analyze` refuses before it decodes or writes anything: a run directory named twice, an --out that is a
file or holds the analysis of other runs, and a recomputation that would replace what it cannot give back."""

import json
import os

from attnmt.analysis import stored


def output_dir(out, runs=(), what: str = 'the analysis') -> str:
  """--out, or <first run>/../analysis where it is empty and `runs` are given (else None); refused when a file."""
  out = out or (os.path.join(os.path.dirname(os.path.abspath(runs[0])), 'analysis') if runs else None)
  if out and os.path.exists(out) and not os.path.isdir(out):
    raise ValueError(f'--out {out} is a file; pass a directory for {what} (created if missing)')
  return out


def check_runs_once(runs: list[str]) -> None:
  """Refuses a run directory given twice in --runs (the same directory after normalising the paths): it would
  be compared with itself and its files written twice."""
  seen = {}
  for run in runs:
    key = os.path.realpath(run)
    if key in seen:
      raise ValueError(f'--runs names the run directory {key} twice (as {seen[key]} and {run}); give each run once')
    seen[key] = run


def check_out_holds_these_runs(runs: list[str], out: str) -> None:
  """An --out that holds the analysis of other runs (or a recomputation, or an analysis.json that cannot be
  read) is refused before anything is decoded: analysing the same runs again replaces their analysis, another
  set of runs must not."""
  existing = os.path.join(out, 'analysis.json')
  if not os.path.exists(existing):
    return
  try:
    with open(existing, encoding='utf-8') as f:
      held = {os.path.realpath(w) for r in json.load(f) for w in r.get('workdirs', [r['workdir']])}
  except (OSError, ValueError, TypeError, KeyError):
    held = None
  if held != {os.path.realpath(r) for r in runs}:
    raise ValueError(
      f'--out {out} holds the analysis of other runs (its analysis.json), which this one would replace; give '
      'another --out (a new folder), or the same --runs to analyse those runs again'
    )


def check_recomputation(path: str, out: str, pool_seeds: bool) -> None:
  """--from_translations writes analysis.md and analysis.json into --out: refused when --out holds an analysis
  that is not a from-translations recomputation of this same file (a --runs analysis has AER, attention
  statistics and beam scores the stored translations cannot give back), and with --pool_seeds when the pooled
  file would replace the input itself. Nothing is written when refused."""
  fix = 'give another --out (a new folder) for the recomputation'
  if pool_seeds and _same_file(path, os.path.join(out, stored.FILE)):
    raise ValueError(f'--out {out} holds {path} itself, which the pooled {stored.FILE} would replace; {fix}')
  existing = os.path.join(out, 'analysis.json')
  if not os.path.exists(existing):
    for name in ('analysis.md',) + ((stored.FILE,) if pool_seeds else ()):
      if os.path.exists(os.path.join(out, name)):
        raise ValueError(f'--out {out} holds {name}, which this recomputation would replace; {fix}')
    return
  try:
    with open(existing, encoding='utf-8') as f:
      rows = json.load(f)
  except (OSError, ValueError):
    rows = None
  ours = (
    isinstance(rows, list)
    and bool(rows)
    and all(isinstance(r, dict) and 'workdir' not in r and _same_file(str(r.get('source')), path) for r in rows)
  )
  if not ours:
    raise ValueError(
      f'--out {out} holds an analysis (analysis.json) that is not a recomputation of {path} and would be replaced, '
      f'losing what it has beyond the stored translations (AER, attention, beam); {fix}'
    )


def _same_file(a: str, b: str) -> bool:
  try:
    return os.path.samefile(a, b)
  except OSError:
    return False
