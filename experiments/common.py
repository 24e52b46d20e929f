"""What the entry points share: one-line errors for bad input, and result formatting."""
import os
import sys

import numpy as np


def define_distributed_flags():
  """Flags of a multi-host run; each falls back to JAX's own environment variable."""
  from absl import flags
  flags.DEFINE_string('coordinator_address', '', 'Multi-host: host:port of process 0 (else $JAX_COORDINATOR_ADDRESS).')
  flags.DEFINE_integer('num_processes', 0, 'Multi-host: number of processes (else $JAX_NUM_PROCESSES).')
  flags.DEFINE_integer('process_id', -1, 'Multi-host: this process, 0..num_processes-1 (else $JAX_PROCESS_ID).')
  flags.DEFINE_bool('distributed', False, 'Multi-host with cluster auto-detection (TPU pod slices, SLURM, '
                    'Open MPI): no address needed.')


def initialize_distributed():
  """jax.distributed.initialize when the flags or environment ask for it; prints where the run is."""
  from absl import flags
  from attnmt import parallel
  f = flags.FLAGS
  if parallel.initialize(f.coordinator_address, f.num_processes, f.process_id, auto=f.distributed):
    import jax
    print(f'process {jax.process_index()} of {jax.process_count()}: {parallel.describe()}', flush=True)


def run_guarded(fn):
  """Runs fn; a bad-input error becomes one line on stderr and exit status 2 (3 for a non-finite loss;
  128 + signal number after a graceful stop).

  Settings and data problems surface as ConfigError, CheckpointError, FileNotFoundError or the
  ValueErrors of attnmt.data (unknown names, malformed files). Set ATTNMT_DEBUG=1 for the traceback.
  """
  from absl import logging
  from attnmt.checkpoints import CheckpointError
  from attnmt.config import ConfigError
  from attnmt.guards import NonFiniteError, TrainingStopped
  if logging.get_verbosity() == logging.INFO and '--verbosity' not in ' '.join(sys.argv):
    logging.set_verbosity(logging.WARNING)   # Orbax logs every file it writes at INFO
  try:
    return fn()
  except TrainingStopped as e:
    _exit(str(e), e.exit_code)
  except NonFiniteError as e:
    _exit(f'error: {e}', 3)
  except (ConfigError, CheckpointError, FileNotFoundError, ValueError) as e:
    if os.environ.get('ATTNMT_DEBUG'):
      raise
    _exit(f'error: {e}', 2)


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
  return (f"{s['variant']}: test BLEU {mean_std(s['test_bleu'])}, chrF {mean_std(s['test_chrf'])}, "
          f"perplexity {mean_std(s['test_perplexity'])} over seeds {s['seeds']} "
          f"(best step {s['best_step']}, {s['parameters']:,} parameters)")


def analysis_table(results: list[dict]) -> str:
  """Markdown: test BLEU/chrF per run, and BLEU on the longest source-length bucket every run shares."""
  longest = _longest_shared_bucket(results)
  has_beam = all('beam_bleu' in r for r in results)
  has_aer = all('aer' in r for r in results)
  head = ['variant', 'greedy BLEU', 'greedy chrF'] + (['beam BLEU'] if has_beam else []) + (
      [f'BLEU, sources {longest} words'] if longest else []) + (['AER'] if has_aer else [])
  lines = ['| ' + ' | '.join(head) + ' |', '|' + '---|' * len(head)]
  for r in results:
    row = [r['variant'], mean_std(r['greedy_bleu']), mean_std(r['greedy_chrf'])]
    row += [mean_std(r['beam_bleu'])] if has_beam else []
    if longest:
      row.append(f"{next(b['bleu'] for b in r['greedy_bleu_by_length'] if b['bucket'] == longest):.2f}")
    row += [mean_std(r['aer'])] if has_aer else []
    lines.append('| ' + ' | '.join(row) + ' |')
  return '\n'.join(lines)


def _longest_shared_bucket(results):
  shared = None
  for r in results:
    buckets = [b['bucket'] for b in r['greedy_bleu_by_length']]
    shared = buckets if shared is None else [b for b in shared if b in buckets]
  return shared[-1] if shared else None


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
  head = ['variant', 'seeds'] + [f'{k}_{s}' for _, k in RESULT_COLUMNS for s in ('mean', 'std')] + [
      'parameters', 'tokens_per_s_per_seed', 'train_seconds']
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
  """One sentence on the point of attention: `none` against the others on the longest shared bucket."""
  longest = _longest_shared_bucket(results)
  if not longest:
    return ''
  score = {r['variant']: next(b['bleu'] for b in r['greedy_bleu_by_length'] if b['bucket'] == longest)
           for r in results}
  none = {k: v for k, v in score.items() if k.startswith('none/')}
  others = {k: v for k, v in score.items() if k not in none}
  if not none or not others:
    return ''
  best = max(others, key=others.get)
  (none_name, none_bleu), = none.items()
  return (f'\nLongest sentences (sources of {longest} words): {none_name} reaches BLEU {none_bleu:.2f}; '
          f'the attention variants {min(others.values()):.2f} to {others[best]:.2f} (best: {best}).')
