"""What the entry points share: distributed flags, and one-line errors for bad input."""

import os
import re
import signal
import sys

import jax
from absl import flags, logging

from attnmt import schema
from attnmt.errors import ConfigError
from attnmt.model.config import former_option
from attnmt.training import checkpoints, guards, parallel
from attnmt.training.settings import SECTIONS
from attnmt.training.checkpoints import CheckpointError
from attnmt.training.guards import NonFiniteError, TrainingStopped
from attnmt.training.lock import LockHeld


def define_distributed_flags():
  """Flags of a multi-host run; each falls back to JAX's own environment variable."""

  flags.DEFINE_string('coordinator_address', '', 'Multi-host: host:port of process 0 (else $JAX_COORDINATOR_ADDRESS).')
  flags.DEFINE_integer('num_processes', 0, 'Multi-host: number of processes (else $JAX_NUM_PROCESSES).')
  flags.DEFINE_integer('process_id', -1, 'Multi-host: this process, 0..num_processes-1 (else $JAX_PROCESS_ID).')
  flags.DEFINE_bool(
    'distributed', False, 'Multi-host with cluster auto-detection (TPU pod slices, SLURM, Open MPI): no address needed.'
  )


def define_flags(rows, **docs):
  """One absl flag per declared setting (schema.Setting rows): the row's key, default, meaning (or docs[key], how
  the entry point says it) and kind, so a flag that is a declared setting is that setting, declared once.
  `flag_values` reads them back checked against their rows."""

  for row in rows:
    doc = docs.get(row.key, row.doc)
    doc = doc[:1].upper() + doc[1:].rstrip('.') + '.'
    if row.kind == 'str' and row.choices:
      flags.DEFINE_enum(row.key, row.default, list(row.choices), doc)
    else:
      define = {'bool': flags.DEFINE_bool, 'int': flags.DEFINE_integer, 'float': flags.DEFINE_float}
      define.get(row.kind, flags.DEFINE_string)(row.key, row.default, doc)


def flag_values(rows) -> dict:
  """{key: value} of the flags `define_flags` made from `rows`, each checked against its row: a value out of
  range (a negative count, a margin that is not a finite number > 0) is one ConfigError naming the flag and
  what it accepts."""

  values = {}
  for row in rows:
    values[row.key] = flags.FLAGS[row.key].value
    schema.check_value('', row, values[row.key], f'--{row.key}')
  return values


def initialize_distributed():
  """jax.distributed.initialize when the flags or environment ask for it; prints where the run is."""

  f = flags.FLAGS
  if parallel.initialize(f.coordinator_address, f.num_processes, f.process_id, auto=f.distributed):
    print(f'process {jax.process_index()} of {jax.process_count()}: {parallel.describe()}', flush=True)


def config_path(argv) -> str | None:
  """The --config file named on the command line (its ':arguments' left off), or None."""
  for i, arg in enumerate(argv):
    if arg.startswith('--config='):
      return arg.split('=', 1)[1].split(':', 1)[0]
    if arg == '--config' and i + 1 < len(argv):
      return argv[i + 1].split(':', 1)[0]
  return None


def parse_flags(argv):
  """absl's flag parsing, a flag absl cannot read reported as one line naming it, status 2, and a --config file
  that cannot be loaded likewise: missing or a directory, one that raises while it is imported, one
  without get_config(), with or without --config.x overrides."""

  path = config_path(argv)
  if path is not None and os.path.isdir(path):  # ml_collections fails later, and differently with overrides
    _exit(
      f'error: cannot load the --config file {path} (Is a directory); pass a config file such as {DEFAULT_CONFIG}', 2
    )
  try:
    return flags.FLAGS(argv)
  except flags.Error as e:  # a value absl cannot read (--delta=abc), an unknown flag: one line, as every error
    _exit(f'error: {e}; see --helpshort for the flags', 2)
  except OSError as e:
    if os.environ.get('ATTNMT_DEBUG'):
      raise
    _exit(f'error: {describe_os_error(e)}', 2)
  except (AttributeError, KeyError) as e:  # ml_collections: an override naming no setting of the config
    if os.environ.get('ATTNMT_DEBUG'):
      raise
    if raised_in_file(e, path):  # the config file's own code (a typo such as config.modle.x = 1), not an override
      _exit(_raised_while_loading(path, type(e).__name__, exception_text(e)), 2)
    if isinstance(e, AttributeError) and e.name == 'get_config':  # the config module has no get_config
      _exit(
        f'error: the --config file {path} defines no get_config(); a config file is Python with get_config() '
        f'returning an ml_collections.ConfigDict, such as {DEFAULT_CONFIG}',
        2,
      )
    _exit(f'error: {describe_unknown_override(e, argv)}', 2)
  except Exception as e:  # the config file's own code raised while it was imported or called
    if os.environ.get('ATTNMT_DEBUG'):
      raise
    _exit(_raised_while_loading(path, type(e).__name__, e), 2)


def _raised_while_loading(path, kind: str, text) -> str:
  return (
    f'error: the --config file {path} raised {kind} while loading: {text}; fix that file '
    '(ATTNMT_DEBUG=1 shows the traceback)'
  )


def raised_in_file(e: BaseException, path: str | None) -> bool:
  """Whether `e` passed through code of the file `path` (its traceback has a frame there): an error of the
  --config file's own get_config() or module code, as against one ml_collections raises for an override."""
  if path is None:
    return False
  target, tb = os.path.realpath(path), e.__traceback__
  while tb is not None:
    if os.path.realpath(tb.tb_frame.f_code.co_filename) == target:
      return True
    tb = tb.tb_next
  return False


def exception_text(e: BaseException) -> str:
  """An exception's message on one line; a KeyError (which ConfigDict's AttributeError wraps) without the
  quotes str() adds around it."""
  while len(e.args) == 1 and isinstance(e.args[0], BaseException):
    e = e.args[0]
  text = e.args[0] if isinstance(e, KeyError) and len(e.args) == 1 and isinstance(e.args[0], str) else str(e)
  return ' '.join(text.split())


DEFAULT_CONFIG = 'experiments/configs/default.py'


def describe_unknown_override(e: Exception, argv) -> str:
  """One line for a --config.x.y=v that names no setting: the flag, and the nearest valid key if any."""
  text = str(e).encode().decode('unicode_escape')
  key = re.search(r"'([^'\n]+)'", text)
  near = re.search(r'Did you mean "([^"]+)"', text)
  flags_given = [a.split('=')[0] for a in argv if a.startswith('--config.')]
  flag = next((f for f in flags_given if key and key.group(1) in f[len('--config.') :].split('.')), None)
  if flag is None:
    return f"a --config override names no setting ({' '.join(text.split())})"
  parts = flag[len('--config.') :].split('.')
  if near:
    suggestion = '--config.' + '.'.join(near.group(1) if p == key.group(1) else p for p in parts)
    return f'{flag} names no setting of the config; did you mean {suggestion}?'
  if parts[0] == 'sweep':
    return f'{flag}: this config has no sweep section; use a sweep config such as experiments/configs/main_ablation.py'
  now = former_option(parts[-1]) if parts[0] == 'model' and len(parts) == 2 else None
  elsewhere = [f'{name}.{parts[-1]}' for name, rows in SECTIONS.items() if any(r.key == parts[-1] for r in rows)]
  also = f" ({' and '.join(elsewhere)} is another setting)" if elsewhere and now else ''
  if now:
    return f'{flag} is a former name of {now}{also}'
  if elsewhere and len(parts) == 2:
    return (
      f"{flag} names no setting of the {parts[0]} section; did you mean --config.{' or --config.'.join(elsewhere)}?"
    )
  return f'{flag} names no setting of the config (its sections: model, data, train)'


# The persistent compilation cache the entry points use unless the user set JAX's own variables: a program
# compiled once (a batch shape's training step, a decoder) loads from disk in later commands (what it saves:
# benchmarks/README.md).
CACHE_MIN_COMPILE_SECONDS = 0.2  # cheaper programs are not worth a file (tests/conftest.py says why)
CACHE_MAX_BYTES = 4 << 30  # the oldest entries go beyond it


CACHE_OFF = ('0', 'false', 'no', 'off')  # ATTNMT_JAX_CACHE spellings that switch the cache off (any case)
CACHE_ON = ('', '1', 'true', 'yes', 'on')  # ... and those that leave it on; anything else is refused


def compilation_cache_dir() -> str | None:
  """Where compiled programs are cached: $JAX_COMPILATION_CACHE_DIR if set (JAX reads it itself), none with
  ATTNMT_JAX_CACHE=0 (or false, no, off), else $XDG_CACHE_HOME/attnmt/jax (~/.cache/attnmt/jax). A value that is
  neither (a typo such as 'maybe') raises ConfigError instead of leaving the cache on silently."""
  if os.environ.get('JAX_COMPILATION_CACHE_DIR'):
    return os.environ['JAX_COMPILATION_CACHE_DIR']
  switch = os.environ.get('ATTNMT_JAX_CACHE', '1').strip().lower()
  if switch in CACHE_OFF:
    return None
  if switch not in CACHE_ON:
    raise ConfigError(
      f'ATTNMT_JAX_CACHE={os.environ["ATTNMT_JAX_CACHE"]!r} is neither on ({", ".join(CACHE_ON[1:])}) nor off '
      f'({", ".join(CACHE_OFF)}); set one of them, or unset it to keep the cache on'
    )
  home = os.environ.get('XDG_CACHE_HOME') or os.path.join(os.path.expanduser('~'), '.cache')
  return os.path.join(home, 'attnmt', 'jax')


def use_compilation_cache() -> None:
  """Turns the persistent compilation cache on (compilation_cache_dir), before anything is compiled; the
  user's own JAX_* settings win. Either way a cache entry JAX cannot read is dropped (heal_compilation_cache)."""
  if os.environ.get('JAX_COMPILATION_CACHE_DIR'):
    heal_compilation_cache()
    return  # JAX reads the user's own settings itself
  path = compilation_cache_dir()
  if path is None:
    return
  try:
    os.makedirs(path, exist_ok=True)
  except OSError:
    return  # an unwritable home: compile every time, as without the cache
  if not os.access(path, os.W_OK):
    return
  jax.config.update('jax_compilation_cache_dir', path)
  if 'JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS' not in os.environ:
    jax.config.update('jax_persistent_cache_min_compile_time_secs', CACHE_MIN_COMPILE_SECONDS)
  if 'JAX_COMPILATION_CACHE_MAX_SIZE' not in os.environ:
    jax.config.update('jax_compilation_cache_max_size', CACHE_MAX_BYTES)
  heal_compilation_cache()


def heal_compilation_cache() -> None:
  """Makes a corrupted cache entry heal. JAX warns when it cannot read an entry ("Error reading persistent
  compilation cache entry"), compiles the program again, and then keeps the bad file (its cache never replaces
  an existing key), so every later command warns again. Here the read is wrapped: when it raises, the entry's
  files (<key>-cache, <key>-atime) are removed with one line on stderr, and JAX's own handling goes on (its
  warning, the compilation, and the write of a good entry under the same key). Nothing is patched when this
  JAX has no such reader (then delete the folder jax_compilation_cache_dir names to clear a warning that
  repeats)."""
  try:
    from jax._src import compilation_cache as cc
  except ImportError:
    return
  read = getattr(cc, 'get_executable_and_time', None)
  if read is None or getattr(read, '_attnmt_heals', False):
    return

  def get_executable_and_time(cache_key, *args, **kwargs):
    try:
      return read(cache_key, *args, **kwargs)
    except Exception as e:
      _drop_cache_entry(cache_key, e)
      raise

  get_executable_and_time._attnmt_heals = True
  cc.get_executable_and_time = get_executable_and_time


def _drop_cache_entry(key: str, error: Exception) -> None:
  """Removes the local cache files of `key` (a remote cache, gs://..., is left alone), saying so in one line."""
  folder = jax.config.jax_compilation_cache_dir
  if not folder or '://' in folder or not isinstance(key, str):
    return
  entry = os.path.join(folder, f'{key}-cache')
  if not os.path.isfile(entry):
    return
  try:
    for suffix in ('-cache', '-atime'):
      if os.path.exists(os.path.join(folder, key + suffix)):
        os.remove(os.path.join(folder, key + suffix))
  except OSError as e:
    print(
      f'attnmt: cannot remove the unreadable compilation cache entry {entry} ({e.strerror}); delete it', file=sys.stderr
    )
    return
  reason = ' '.join(f'{type(error).__name__}: {error}'.split())[:200]
  print(
    f'attnmt: removed the unreadable compilation cache entry {entry} ({reason}); it is written again', file=sys.stderr
  )


def run_guarded(fn, after_signal: str = 'run the same command again'):
  """Runs fn; a bad-input error becomes one line on stderr and exit status 2 (3 for a non-finite loss;
  128 + signal number after a graceful stop, or after SIGTERM / Ctrl-C anywhere else: checkpoints being
  written are finished first, further signals ignored, and the line ends with `after_signal`).

  Settings and data problems surface as ConfigError, CheckpointError, the ValueErrors of attnmt.data
  (unknown names, malformed files), LockHeld (another run holds the workdir) and OSError on a path the
  user gave (a missing, unreadable or unwritable file or directory, or the --config file). Set
  ATTNMT_DEBUG=1 for the traceback. Compiled programs are cached on disk (use_compilation_cache).
  """

  if logging.get_verbosity() == logging.INFO and '--verbosity' not in ' '.join(sys.argv):
    logging.set_verbosity(logging.WARNING)  # Orbax logs every file it writes at INFO
  guards.exit_on_signals()
  try:
    use_compilation_cache()
    return fn()
  except TrainingStopped as e:
    _exit(str(e), e.exit_code)
  except KeyboardInterrupt as e:  # guards.Interrupted: SIGINT or SIGTERM outside the training loop
    guards.ignore_signals()
    checkpoints.finish_saves()
    signum = getattr(e, 'signum', signal.SIGINT)
    _exit(f'stopped by signal {signum} ({signal.Signals(signum).name}); {after_signal}', 128 + signum)
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
