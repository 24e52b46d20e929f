"""What the entry points share: one-line errors for bad input, and result formatting."""

import os
import sys

import numpy as np
from absl import flags, app, logging
from attnmt.training import parallel
import jax
from attnmt.training.checkpoints import CheckpointError
from attnmt.errors import ConfigError
from attnmt.training.guards import NonFiniteError, TrainingStopped
from attnmt.training.lock import LockHeld
import re
import json
from attnmt.analysis import html_report, report


def define_distributed_flags():
  """Flags of a multi-host run; each falls back to JAX's own environment variable."""

  flags.DEFINE_string('coordinator_address', '', 'Multi-host: host:port of process 0 (else $JAX_COORDINATOR_ADDRESS).')
  flags.DEFINE_integer('num_processes', 0, 'Multi-host: number of processes (else $JAX_NUM_PROCESSES).')
  flags.DEFINE_integer('process_id', -1, 'Multi-host: this process, 0..num_processes-1 (else $JAX_PROCESS_ID).')
  flags.DEFINE_bool(
    'distributed', False, 'Multi-host with cluster auto-detection (TPU pod slices, SLURM, Open MPI): no address needed.'
  )


def initialize_distributed():
  """jax.distributed.initialize when the flags or environment ask for it; prints where the run is."""

  f = flags.FLAGS
  if parallel.initialize(f.coordinator_address, f.num_processes, f.process_id, auto=f.distributed):
    print(f'process {jax.process_index()} of {jax.process_count()}: {parallel.describe()}', flush=True)


def parse_flags(argv):
  """absl's flag parsing (usage errors as absl prints them), with a --config file that cannot be loaded
  (ml_collections raises OSError while applying --config.x overrides) reported as one line, status 2."""

  try:
    return app.parse_flags_with_usage(argv)
  except OSError as e:
    if os.environ.get('ATTNMT_DEBUG'):
      raise
    _exit(f'error: {describe_os_error(e)}', 2)


def run_guarded(fn):
  """Runs fn; a bad-input error becomes one line on stderr and exit status 2 (3 for a non-finite loss;
  128 + signal number after a graceful stop).

  Settings and data problems surface as ConfigError, CheckpointError, the ValueErrors of attnmt.data
  (unknown names, malformed files), LockHeld (another run holds the workdir) and OSError on a path the
  user gave (a missing, unreadable or unwritable file or directory, or the --config file). Set
  ATTNMT_DEBUG=1 for the traceback.
  """

  if logging.get_verbosity() == logging.INFO and '--verbosity' not in ' '.join(sys.argv):
    logging.set_verbosity(logging.WARNING)  # Orbax logs every file it writes at INFO
  try:
    return fn()
  except TrainingStopped as e:
    _exit(str(e), e.exit_code)
  except NonFiniteError as e:
    _exit(f'error: {e}', 3)
  except (ConfigError, CheckpointError, LockHeld, ValueError, OSError) as e:
    if os.environ.get('ATTNMT_DEBUG'):
      raise
    _exit(f'error: {describe_os_error(e) if isinstance(e, OSError) else e}', 2)


def describe_os_error(e: OSError) -> str:
  """One line for an OSError: the --config file that failed to load, or the path and what is wrong."""

  text = str(e)
  if 'Configuration is not available' in text or 'Failed loading config file' in text:
    reason = re.search(r'\[Errno \d+\] ([^:\n]+)', text)
    attempted = re.search(r'Attempted \[[^\]]*\]:\s*\n\s*(\S+)', text)
    path = (
      attempted.group(1)
      if attempted
      else (getattr(flags.FLAGS['config'], 'config_filename', None) if 'config' in flags.FLAGS else None)
    )
    return (
      f'cannot load the --config file {path or ""} ({reason.group(1) if reason else text.splitlines()[0]}); '
      'pass a config file such as experiments/configs/default.py'
    )
  if e.filename is not None and e.strerror:
    return f'{e.filename}: {e.strerror}; check the path and its permissions'
  return ' '.join(text.split())


def _exit(message: str, code: int):
  """Prints the one line and leaves at once. Checkpoint writers are closed or waited for before these
  errors are raised; a normal interpreter teardown would let Orbax's background tensorstore reads
  (after a failed restore) print asyncio tracebacks under the message.

  Such a thread can also be printing while we do, so stderr (the file descriptor, for every thread)
  is pointed at /dev/null first and the message goes to a copy of the original: nothing lands after
  or inside the line.
  """
  sys.stdout.flush()
  sys.stderr.flush()
  original = os.dup(2)
  devnull = os.open(os.devnull, os.O_WRONLY)
  os.dup2(devnull, 2)
  os.write(original, (message + '\n').encode('utf-8', 'replace'))
  os._exit(code)


def mean_std(values) -> str:
  v = np.asarray(values, float)
  return f'{v.mean():.2f} ± {v.std(ddof=1) if len(v) > 1 else 0.0:.2f}'


def format_summary(s: dict) -> str:
  return (
    f"{s['variant']}: test BLEU {mean_std(s['test_bleu'])}, chrF {mean_std(s['test_chrf'])}, "
    f"perplexity {mean_std(s['test_perplexity'])} over seeds {s['seeds']} "
    f"(best step {s['best_step']}, {s['parameters']:,} parameters)"
  )


def analysis_table(results: list[dict]) -> str:
  """Markdown: analysis_cells, then its notes as a legend."""
  headers, rows, notes = analysis_cells(results)
  lines = ['| ' + ' | '.join(headers) + ' |', '|' + '---|' * len(headers)]
  lines += ['| ' + ' | '.join(cells) + ' |' for cells in rows]
  return '\n'.join(lines) + ''.join(f'\n\n{n}.' if i == 0 else f'\n{n}.' for i, n in enumerate(notes))


def analysis_cells(results: list[dict]) -> tuple[list[str], list[list[str]], list[str]]:
  """Column headers, one row of cells per run, and notes explaining them: greedy BLEU with its 95% bootstrap interval and p-value against `none`,
  chrF, beam BLEU, BLEU on the two longest source-length buckets every run shares, attention monotonicity,
  entropy, maximum weight and coverage deviation, repetition, AER. Columns whose data a run lacks are left out."""
  buckets = _longest_shared_buckets(results)
  has_ci = all('significance' in r for r in results)
  baseline = next((r['significance']['baseline'] for r in results if has_ci and r['significance']['baseline']), None)
  many_seeds = any(len(r['greedy_bleu']) > 1 for r in results)
  columns = [('variant', lambda r: r['variant'])]
  if has_ci:
    columns.append(('greedy BLEU ± 95% CI', lambda r: _bleu_ci(r['significance']['corpus'])))
    if baseline:
      columns.append(('p vs none', lambda r: _p_cell(r['significance']['corpus'], r['variant'] == baseline)))
  if many_seeds or not has_ci:
    columns.append(('greedy BLEU, seeds' if has_ci else 'greedy BLEU', lambda r: _over_seeds(r['greedy_bleu'])))
  columns.append(('chrF', lambda r: _over_seeds(r['greedy_chrf'])))
  if all('beam_bleu' in r for r in results):
    columns.append(('beam BLEU', lambda r: _over_seeds(r['beam_bleu'])))
  for bucket in buckets:
    columns.append((f'BLEU, sources {bucket} words', lambda r, b=bucket: _bleu_ci(_bucket_score(r, b), star=True)))
  if any('attention' in r for r in results):
    columns.append(('monotonicity', lambda r: _monotonicity_cell(r.get('attention'))))
    columns.append(('entropy (norm.)', lambda r: _entropy_cell(r.get('attention'))))
    columns.append(('max weight', lambda r: _attention_cell(r.get('attention'), 'max_weight')))
    columns.append(('coverage dev.', lambda r: _attention_cell(r.get('attention'), 'coverage_deviation')))
  if all('greedy_repetition' in r for r in results):
    columns.append(('repetition %', lambda r: _over_seeds([100 * x for x in r['greedy_repetition']], 1)))
  if all('aer' in r for r in results):
    columns.append(('AER', lambda r: _over_seeds(r['aer'])))
  headers = [h for h, _ in columns]
  return headers, [[cell(r) for _, cell in columns] for r in results], _legend(results, has_ci, baseline, many_seeds)


def write_html_report(results: list[dict], out_dir: str) -> str:
  """<out_dir>/report.html (attnmt.analysis.html_report) from analyze_runs' results and the sentences.json it wrote
  beside them: analysis_table's columns and notes, the attention verdict, BLEU by length, the sentences."""

  headers, rows, notes = analysis_cells(results)
  with open(os.path.join(out_dir, report.SENTENCES_FILE)) as f:
    sentences = json.load(f)
  table = {'headers': headers, 'rows': rows, 'notes': notes, 'verdict': attention_verdict(results).strip()}
  return html_report.write(os.path.join(out_dir, 'report.html'), results, table, sentences)


def _legend(results, has_ci, baseline, many_seeds) -> list[str]:
  notes = []
  if has_ci:
    n = results[0]['significance']['n_samples']
    notes.append(
      f'BLEU ± half-width of its 95% interval over {n} paired bootstrap resamples of the test '
      'sentences (sacrebleu; greedy, first seed)'
      + (f'; p: paired bootstrap against {baseline}; * p < 0.05 against it' if baseline else '')
    )
  if many_seeds:
    notes.append('seeds, chrF, beam BLEU, repetition, AER: mean ± sd over seeds')
  if any('attention' in r for r in results):
    notes.append(
      'monotonicity: mean over sentences of the Spearman correlation of output position and '
      'attention peak (1 diagonal, -1 reversed; "k/n const.": sentences with one peak position, '
      'counted 0); entropy: attention entropy in nats (divided by log source length: 1 uniform); max weight: '
      'mean over output tokens of the largest weight; coverage dev.: mean over source positions of the '
      'distance from 1 of the total weight each received over the whole output (0: every position attended '
      'once in total). Greedy output of the first seed; the EOS row is left out of all but coverage'
    )
  if all('greedy_repetition' in r for r in results):
    notes.append('repetition: greedy outputs in which some 4-gram occurs 3 or more times')
  return notes


def _over_seeds(values, digits: int = 2) -> str:
  """The value of one seed, or mean ± sd over several."""
  return f'{values[0]:.{digits}f}' if len(values) == 1 else mean_std(values)


def _bleu_ci(score: dict, star: bool = False) -> str:
  cell = f"{score['bleu']:.2f}" + (f" ± {score['ci']:.2f}" if score.get('ci') is not None else '')
  return cell + (' *' if star and score.get('p_value') is not None and score['p_value'] < 0.05 else '')


def _format_p(p: float) -> str:
  return '< 0.001' if p < 0.001 else f'{p:.3f}'


def _p_cell(score: dict, is_baseline: bool) -> str:
  if is_baseline:
    return 'baseline'
  return '–' if score.get('p_value') is None else _format_p(score['p_value'])


def _monotonicity_cell(attention) -> str:
  if not attention or attention.get('monotonicity') is None:
    return '–'
  const = f" ({attention['undefined']}/{attention['sentences']} const.)" if attention['undefined'] else ''
  return f"{attention['monotonicity']:.2f}{const}"


def _entropy_cell(attention) -> str:
  if not attention or attention.get('entropy') is None:
    return '–'
  normalized = attention.get('normalized')
  return f"{attention['entropy']:.2f}" + ('' if normalized is None else f' ({normalized:.2f})')


def _attention_cell(attention, key: str) -> str:
  if not attention or attention.get(key) is None:
    return '–'
  return f'{attention[key]:.2f}'


def _longest_shared_buckets(results, count: int = 2) -> list[str]:
  """The `count` longest source-length buckets in every run's greedy BLEU by length."""
  shared = None
  for r in results:
    buckets = [b['bucket'] for b in r['greedy_bleu_by_length']]
    shared = buckets if shared is None else [b for b in shared if b in buckets]
  return shared[-count:] if shared else []


def _bucket_score(result: dict, bucket: str) -> dict:
  """{'bleu', 'ci', 'p_value'} of a run on a length bucket (greedy, first seed); ci and p_value are None
  without significance results."""
  for b in result.get('significance', {}).get('by_length', []):
    if b['bucket'] == bucket:
      return b
  bleu = next(b['bleu'] for b in result['greedy_bleu_by_length'] if b['bucket'] == bucket)
  return {'bleu': bleu, 'ci': None, 'p_value': None}


RESULT_COLUMNS = (('test BLEU', 'test_bleu'), ('test chrF', 'test_chrf'), ('test perplexity', 'test_perplexity'))


def results_table(rows: list[dict]) -> str:
  """Markdown: mean ± sd over seeds of test BLEU, chrF and perplexity, parameters and training speed."""
  head = ['variant', 'seeds'] + [c for c, _ in RESULT_COLUMNS] + ['parameters', 'train tok/s per seed', 'train min']
  lines = ['| ' + ' | '.join(head) + ' |', '|' + '---|' * len(head)]
  for r in rows:
    cells = [r['variant'], str(len(r['seeds']))] + [mean_std(r[k]) for _, k in RESULT_COLUMNS]
    cells += [f"{r['parameters']:,}", f"{r['tokens_per_s_per_seed']:.0f}", f"{r['train_seconds'] / 60:.1f}"]
    lines.append('| ' + ' | '.join(cells) + ' |')
  return '\n'.join(lines)


def results_csv(rows: list[dict]) -> str:
  head = (
    ['variant', 'seeds']
    + [f'{k}_{s}' for _, k in RESULT_COLUMNS for s in ('mean', 'std')]
    + ['parameters', 'tokens_per_s_per_seed', 'train_seconds']
  )
  out = [','.join(head)]
  for r in rows:
    cells = [r['variant'], ' '.join(map(str, r['seeds']))]
    for _, k in RESULT_COLUMNS:
      v = np.asarray(r[k], float)
      cells += [f'{v.mean():.4f}', f'{v.std(ddof=1) if len(v) > 1 else 0.0:.4f}']
    cells += [str(r['parameters']), f"{r['tokens_per_s_per_seed']:.1f}", f"{r['train_seconds']:.1f}"]
    out.append(','.join(cells))
  return '\n'.join(out) + '\n'


def attention_verdict(results: list[dict]) -> str:
  """Whether each attention variant beats `none` on the two longest source-length buckets every run shares.

  Rule: a variant beats `none` on a bucket when its BLEU is higher and sacrebleu's paired bootstrap
  against `none` gives p < 0.05 (the paired test weighs both systems' noise on the same sentences; a
  rule on the variant's interval alone would ignore that of `none`). Significantly lower is reported
  as below `none`, anything else as within the uncertainty. Without significance results, the BLEUs
  alone are compared."""
  buckets = _longest_shared_buckets(results)
  none = [r for r in results if r['variant'].startswith('none/')]
  others = [r for r in results if not r['variant'].startswith('none/')]
  if not buckets or not none or not others:
    return ''
  base = none[0]
  lines = []
  for bucket in buckets:
    base_score = _bucket_score(base, bucket)
    scores = {r['variant']: _bucket_score(r, bucket) for r in others}
    head = f"Sources of {bucket} words: {base['variant']} reaches BLEU {_bleu_ci(base_score)}"
    if any(s['p_value'] is None for s in scores.values()):
      best = max(scores, key=lambda k: scores[k]['bleu'])
      low = min(s['bleu'] for s in scores.values())
      lines.append(f"{head}; the attention variants {low:.2f} to {scores[best]['bleu']:.2f} (best: {best}).")
      continue
    groups = {'beat it (p < 0.05)': [], 'within the uncertainty': [], 'below it (p < 0.05)': []}
    for name, s in sorted(scores.items(), key=lambda kv: -kv[1]['bleu']):
      label = (
        'within the uncertainty'
        if s['p_value'] >= 0.05
        else 'beat it (p < 0.05)'
        if s['bleu'] > base_score['bleu']
        else 'below it (p < 0.05)'
      )
      groups[label].append(f"{name} {_bleu_ci(s)} (p {_format_p(s['p_value'])})")
    lines.append(head + ''.join(f'; {label}: ' + ', '.join(names) for label, names in groups.items() if names) + '.')
  return '\nLongest sentences, greedy BLEU of the first seed against none:\n' + '\n'.join(lines)
