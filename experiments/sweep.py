"""An ablation: every combination of the swept values, each trained for all seeds in one vmapped program;
then one results table (Markdown and CSV), a bar chart, the validation curves and, if asked, the analysis
of every variant (BLEU by length plot, heatmaps, significance against `none`).

    python -m experiments.sweep --config=experiments/configs/main_ablation.py --workdir=runs/ablation \
        --config.sweep.scores=none,additive,dot --config.train.seeds=0,1
    python -m experiments.sweep --config=experiments/configs/main_ablation.py --workdir=runs/window \
        --config.sweep.axes="model.window=local_m(size=4),local_p(size=4),local_p(size=8)" --config.sweep.scores=general

Any config key is an axis (`sweep.axes`: `key=v1,v2;key=v1,v2`); `scores`, `query_timings` and `windows`
are shorthands for the model's three attention axes. A component's options are written after its name,
`model.window=local_p(size=4),local_p(size=8)`; a variant's name shows the options that differ between the
sweep's variants. Each variant's run directory is named by its values. Re-running with the same --workdir reuses a variant only if its stored config equals
the requested one, resumes an unfinished one, and refuses one whose settings changed (naming them)
before anything trains.
"""

import copy
import itertools
import json
import math
import os
import sys

import jax
from absl import app, flags
from ml_collections import config_flags

from attnmt import data, plots, schema
from attnmt.analysis import curves as curves_lib, html_report, report, stored, tables
from attnmt.compare import family
from attnmt.errors import ConfigError, UnknownChoice
from attnmt.model.config import COMPONENTS, FORMER, ModelConfig, canonical_section
from attnmt.model.registry import parse, split_top
from attnmt.training import checkpoints, lock, parallel, settings, trainer
from attnmt.training.lock import LockHeld
from experiments import common, cores, rounds
from experiments.configs import default

FLAGS = flags.FLAGS
config_flags.DEFINE_config_file(
  'config', 'experiments/configs/main_ablation.py', 'Config file with a sweep section.', lock_config=True
)
flags.DEFINE_string(
  'workdir', None, 'Root directory of this sweep (required): one run directory per variant, tables, plots.'
)
common.define_distributed_flags()

# The shorthands, in the order their values make up a run's name (score/timing/window).
SHORTHANDS = (
  ('scores', 'model.score'),
  ('query_timings', 'model.query_timing'),
  ('windows', 'model.window'),
)


def _get(config, key):
  node = config
  for part in key.split('.'):
    if not hasattr(node, 'keys') or part not in node:
      raise KeyError(part)
    node = node[part]
  return node


def _typed(key: str, text: str, like):
  """`text` as the type of the config value it replaces; booleans only from true/false (1/0, yes/no)."""

  text = text.strip()
  if isinstance(like, bool):
    low = text.lower()
    if low in ('true', '1', 'yes'):
      return True
    if low in ('false', '0', 'no'):
      return False
    raise ConfigError(f"sweep value '{text}' for {key} is not a boolean; use true or false")
  try:
    if isinstance(like, int):
      return int(text)
    if isinstance(like, float):
      return float(text)
  except ValueError:
    raise ConfigError(
      f"sweep value '{text}' for {key} is not {'an integer' if isinstance(like, int) else 'a number'}"
    ) from None
  return text


def axes(config, case: str = '') -> list[tuple[str, list]]:
  """The swept keys and their typed values: the shorthands, then `sweep.axes`, then `case` (one entry of
  `sweep.cases`, in the syntax of `sweep.axes`); a later one overrides an earlier one of the same key."""

  s = config.sweep
  out = {key: getattr(s, short) for short, key in SHORTHANDS}
  if s.input_feeding:  # the former shorthand: the former model setting, which luong reads as its option
    print(
      f"notice: sweep.input_feeding='{s.input_feeding}' is luong's option now; write "
      "sweep.query_timings='luong(input_feeding=true),luong(input_feeding=false)' instead",
      file=sys.stderr,
    )
    out['model.input_feeding'] = s.input_feeding
  parts = str(s.axes).split(';') + str(case).split(';')
  for part in filter(None, (p.strip() for p in parts)):
    key, eq, values = part.partition('=')
    if not eq or not values.strip():
      raise ConfigError(
        f"sweep.axes entry '{part}' is not key=value1,value2; e.g. "
        "sweep.axes='model.score=none,additive;model.window=local_m,local_p(size=4)'"
      )
    out[key.strip()] = values
  typed = []
  for key, values in out.items():
    if key.split('.')[0] not in ('model', 'data', 'train'):
      raise ConfigError(f"sweep axis '{key}' is not a model, data or train setting; write it as e.g. model.window")
    try:
      like = _get(config, key)
      if like is None and key.startswith('model.') and key[6:] in FORMER:  # a former setting, unset: its type
        like = FORMER[key[6:]]()
    except KeyError:
      raise ConfigError(
        f"sweep axis '{key}' names no config setting; valid keys are those of the config's "
        'model, data and train sections (e.g. model.window, train.learning_rate)'
      ) from None
    vals = [_typed(key, v, like) for v in split_top(str(values)) if v.strip()]
    if not vals:
      raise ConfigError(f'sweep axis {key} has no values')
    if len(set(map(repr, vals))) != len(vals):
      raise ConfigError(f'sweep axis {key} repeats a value: {values}')
    typed.append((key, vals))
  return typed


def resolve_auto_seeds(config, backend: str) -> str:
  """train.seeds=auto for a sweep on `backend` (cores.auto_seeds), written into `config`; returns the line that
  says so. On an accelerator the seeds train vmapped in one program per variant. On a CPU each seed is a run of
  its own (a train.seeds axis, unless the sweep already has one): the per-core processes take the runs in turn,
  so no core waits idle while another trains a variant's seeds one after the other."""
  seeds = cores.auto_seeds(backend)
  if backend != 'cpu' or _seeds_swept(config):
    config.train.seeds = seeds
    return f'train.seeds=auto on {backend}: seeds {seeds} (vmapped)'
  config.train.seeds = seeds.split(',')[0]
  config.sweep.axes = ';'.join(filter(None, [str(config.sweep.axes).strip(), f'train.seeds={seeds}']))
  return f'train.seeds=auto on cpu: seeds {seeds}, a run per seed (sweep.axes gains train.seeds={seeds})'


def seed_major(runs: list) -> list:
  """The runs ordered by their seed first (a stable sort: each seed's variants in the sweep's order), for
  processes that take the runs in turn: a variant's next seed then starts after its first has compiled, and finds
  the programs in the persistent compilation cache, instead of both compiling the same programs at once."""
  order = list(dict.fromkeys(str(run.train.seeds) for _, _, run in runs))
  return sorted(runs, key=lambda r: order.index(str(r[2].train.seeds)))


def _seeds_swept(config) -> bool:
  """Whether train.seeds is an axis of the sweep (in sweep.axes or one of sweep.cases)."""
  written = str(config.sweep.axes).split(';') + str(config.sweep.cases).replace('|', ';').split(';')
  return any(part.partition('=')[0].strip() == 'train.seeds' for part in written)


def _set(config, key, value):
  *path, leaf = key.split('.')
  node = config
  for part in path:
    node = node[part]
  node[leaf] = value


def _short(v) -> str:
  return str(v).lower() if isinstance(v, bool) else str(v)


def variants(config):
  """(name, run config) of every valid combination, and the combinations refused with the reason.

  Unknown names (a score that does not exist, a typo, an option a component does not have) are errors;
  combinations that cannot work (`none` with a local window or with supervised attention, `dot` with unequal
  sizes) are skipped and reported. Combinations that select the same components with the same options (a former
  model setting that the selected component does not read) are one variant. A variant is named by its score,
  decoder form and window, each with the options that differ between the sweep's variants, then the other
  swept settings.
  """

  cases = [c.strip() for c in str(config.sweep.cases).split('|')]
  if len(cases) > 1 and not all(cases):
    raise ConfigError(f"sweep.cases has an empty case: '{config.sweep.cases}'; separate cases with one '|'")
  grids = [axes(config, case) for case in cases]
  extra_keys = []
  for swept in grids:
    extra_keys += [
      k
      for k, _ in swept
      if k not in dict((key, 0) for _, key in SHORTHANDS)
      and k not in extra_keys
      and not (k.startswith('model.') and k[6:] in FORMER)  # a former setting: shown in its component's options
    ]
  keep, refused, seen = [], [], set()
  for swept in grids:
    _combinations(config, swept, keep, refused, seen)
  return _heatmaps_of_first_seeds(_named(keep, extra_keys)), refused


def _heatmaps_of_first_seeds(named):
  """A run of several seeds draws its TensorBoard heatmaps (train.tensorboard_heatmaps) with its first seed's
  parameters; where a sweep trains the seeds as runs (a train.seeds axis), likewise only the first run of each
  pooled variant draws them: its other seeds' runs set train.tensorboard_heatmaps=0. In the CPU main job this
  saves drawing 4 figures at each of the 15 validations of the second seeds' runs."""
  first = set()
  for _, run in named:
    if run.pool == run.variant:  # the seeds are not an axis
      continue
    if run.pool in first:
      run.train.tensorboard_heatmaps = 0
    first.add(run.pool)
  return named


def _named(runs, extra_keys):
  """(name, run config) of each run: its components' labels, showing only the options whose values differ
  among the runs that select the same component, then the extra axes' values. The run config records the
  name (`variant`) and the name its seeds pool under (`pool`: less a train.seeds axis)."""
  values = {}
  for run in runs:
    for kind in ('score', 'query_timing', 'window'):
      name, options = parse(kind, run.model[kind])
      for key, value in options:
        values.setdefault((kind, name, key), set()).add(repr(value))
  leaves = [k.split('.')[-1] for k in extra_keys]
  named = []
  for run in runs:
    labels = []
    for kind in ('score', 'query_timing', 'window'):
      name = parse(kind, run.model[kind])[0]
      shown = [key for (k, n, key), vals in values.items() if (k, n) == (kind, name) and len(vals) > 1]
      labels.append(COMPONENTS[kind].label(run.model[kind], shown))
    suffix = [
      f'{k if leaves.count(k.split(".")[-1]) > 1 else k.split(".")[-1]}={_short(_get(run, k))}' for k in extra_keys
    ]
    name = '/'.join(labels + suffix)
    with run.unlocked():
      run.variant = name
      # what the analysis pools: the name less the seeds axis (seeds trained as runs are one variant's seeds)
      run.pool = '/'.join(labels + [part for k, part in zip(extra_keys, suffix) if k != 'train.seeds'])
    named.append((name, run))
  return named


def _combinations(config, swept, keep, refused, seen):
  """Appends every valid combination of one grid's axes to `keep` (skipping those already seen)."""

  for combo in itertools.product(*(v for _, v in swept)):
    run = copy.deepcopy(config)
    with run.unlocked():
      del run['sweep']
      for (key, _), value in zip(swept, combo):
        _set(run, key, value)
      try:
        run.model = canonical_section(
          run.model.to_dict(), live=True
        )  # every option written out: equal runs compare equal
        ModelConfig.from_dict(run.model.to_dict())
        settings.validate_supervision(run)  # e.g. none with train.alignment_loss_weight > 0
      except UnknownChoice:  # a name that does not exist is a mistake in the sweep, not a combination to skip
        raise
      except ConfigError as e:
        refused.append((dict(zip((k for k, _ in swept), combo)), str(e)))
        continue
    frozen = json.dumps(run.to_dict(), sort_keys=True, default=str)
    if frozen in seen:
      continue
    seen.add(frozen)
    keep.append(run)


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f'unexpected arguments {argv[1:]}')
  common.run_guarded(_sweep, 'finished variants and saved checkpoints are kept: run the same command again to resume')


def _sweep():
  common.initialize_distributed()
  config, root = FLAGS.config, FLAGS.workdir
  if 'sweep' not in config:
    raise ConfigError(
      f'{FLAGS["config"].value} has no sweep section; use a sweep config such as '
      'experiments/configs/main_ablation.py, or experiments/train.py for one run'
    )
  schema.check('sweep', default.SWEEP, config.sweep)  # and a config written before a sweep setting existed:
  with config.sweep.unlocked():  # it does what the setting's declared value_before does
    config.sweep.update(schema.fill_missing(default.SWEEP, config.sweep.to_dict()))
  if config.sweep.rounds:  # the rounds' family must name variants that exist, before anything trains
    family.contrast_pairs(_pooled_names(variants(config)[0]), config.sweep.contrasts)
    return rounds.run(config, root)
  if str(config.train.seeds).strip().lower() == 'auto':
    print(resolve_auto_seeds(config, jax.default_backend()))
  keep, refused = variants(config)
  for over, why in refused:
    print(f'skipping {over}: {why}')
  if not keep:
    raise ConfigError(
      f'no valid variant among the swept values ({len(refused)} combination(s) refused, see above); '
      'nothing was trained or written'
    )
  if _seeds_swept(config):
    print(
      f'{len(keep)} run(s), a run per seed: {len(_pooled_names(keep))} variant(s); {len(refused)} combination(s) skipped'
    )
  else:
    print(f'{len(keep)} variant(s) x seeds {config.train.seeds}; {len(refused)} combination(s) skipped')
  if len(keep) > 1:  # the analysis's family, checked before anything trains (seeds as runs: the pooled names)
    family.contrast_pairs(_pooled_names(keep), config.sweep.contrasts)
  runs = [(name, os.path.join(root, name.replace('/', '-')), run) for name, run in keep]
  shard = shard_of(config.sweep.shard, len(runs))
  if shard == AUTO:
    print('shard auto: training every unfinished variant that no other process holds, in order')
    if _seeds_swept(config):
      runs = seed_major(runs)
  elif shard is not None:
    runs = runs[shard[0] :: shard[1]]
    print(f'shard {shard[0]}/{shard[1]}: {len(runs)} variant(s): {", ".join(n for n, _, _ in runs)}')
  if config.sweep.report_only:
    return _report_finished(config, root, runs, shard)
  done = {}
  for _, workdir, run in runs:  # a variant whose settings changed is refused before anything trains
    done[workdir] = _finished(workdir, run)
    if done[workdir] is None:
      trainer.check_config(run)
      trainer.check_workdir(workdir, run, 'use another --workdir for this sweep, or move that variant directory aside')
  processes = 1 if shard is not None else cores.plan(config.sweep.processes, list(done.values()).count(None))
  if processes > 1:
    return _on_cores(config, root, runs, processes, [run for _, workdir, run in runs if done[workdir] is None])
  # A shard shares the root with the other shards: each variant's own training lock keeps them apart.
  with lock.hold(root, 'sweep', enabled=parallel.is_main_process() and shard is None):
    rows, dirs = [], []
    corpora = {}  # the runs' corpus, read once by this process (data.prepare_once)
    for name, workdir, run in runs:
      print(f'\n=== {name} -> {workdir}', flush=True)
      done[workdir] = done[workdir] or _finished(workdir, run)  # another shard may have finished it meanwhile
      if done[workdir] is not None:
        print(f'(finished earlier with this config: reusing {workdir}/results.json)')
      elif shard is not None:  # a variant another process holds is theirs to train
        try:
          done[workdir] = trainer.train_and_evaluate(run, workdir, corpora)
        except LockHeld as e:  # a sibling process of this sweep is normal; anyone else's is named
          print('(the other core is training it)' if os.environ.get(cores.CHILD_ENV) else f'(skipped: {e})')
          continue
      rows.append(done[workdir] or trainer.train_and_evaluate(run, workdir, corpora))
      dirs.append(workdir)
    if not parallel.is_main_process():
      return  # process 0 writes the tables and plots and runs the analysis
    if shard is not None and not os.environ.get(cores.CHILD_ENV):
      print(
        f'\nshard {config.sweep.shard} finished {len(rows)} variant(s); when every shard has finished, run the '
        'same command with --config.sweep.report_only=true (and no shard) to write the tables and the analysis'
      )
      return
    if shard is None:
      _report(config, root, rows, dirs, corpora)


def _on_cores(config, root, runs, processes, unfinished):
  """The unfinished variants (`unfinished`: their run configs) trained by `processes` single-threaded processes, one
  per core (experiments/cores.py), then the tables and analysis of the whole sweep, as one process would write
  them."""
  print(
    f'training on {processes} cores, one single-threaded process per core (--config.sweep.processes=1 trains in one)'
  )
  with lock.hold(root, 'sweep'):
    # The corpus is built here, on every core (the two tokenizers on two threads), before the single-core processes
    # start and read it; the analysis uses it again.
    corpora = {}
    for run in unfinished:
      data.prepare_once(run.data, corpora)
    dirs, ahead = [workdir for _, workdir, _ in runs], {}

    def analyze_finished(training):  # on the core of the first process to finish, while the others train
      if config.sweep.analyze:
        finished = [workdir for _, workdir, run in runs if _finished(workdir, run) is not None]
        out, which, seeds_as_runs, options = _analysis_arguments(config, root, _seeds_as_runs(runs))
        stop = lambda: not training()  # the rest on every core, after training
        done = report.analyze_ahead(ahead, dirs, finished, out, which, seeds_as_runs, corpora, stop, **options)
        print(f'analysed {len(done)} finished run(s) on the idle core while the last ones train')

    args = ['--config.sweep.shard=auto', '--config.sweep.processes=1']
    failed = cores.run_children(args, processes, while_waiting=analyze_finished)
    rows = [_finished(workdir, run) for _, workdir, run in runs]
    missing = [name for (name, _, _), row in zip(runs, rows) if row is None]
    if failed:  # the child's own lines have said why
      resume = bool(missing) or cores.stopped(failed)
      print(cores.failure_line(failed, resume), file=sys.stderr)
      if resume:
        sys.exit(failed[0][1])
    if missing:
      raise ConfigError(f'variant(s) {", ".join(missing)} did not finish; run the same command again to resume them')
    _report(config, root, rows, dirs, corpora, ahead)


def _seeds_as_runs(runs) -> bool:
  """Whether the sweep trains seeds as runs (train.seeds as an axis), so that its runs pool into fewer variants."""
  return len({run.pool for _, _, run in runs}) < len(runs)


def _analysis_arguments(config, root: str, seeds_as_runs: bool) -> tuple[str, str, bool, dict]:
  """(out_dir, which, seeds_as_runs, options) of the sweep's analyze_runs, which analyze_ahead takes alike."""
  options = dict(
    beam_size=config.sweep.beam_size,
    num_heatmaps=config.sweep.num_heatmaps,
    heatmap_min_words=config.sweep.heatmap_min_words,
  )
  return os.path.join(root, 'analysis'), 'best', seeds_as_runs, options


def _report(config, root, rows, dirs, corpora=None, ahead=None):
  # Seeds trained as separate runs (train.seeds as a sweep axis) are one variant in the tables.
  pooled = tables.pool_seed_rows(rows)
  table = tables.results_table(pooled)
  if len(pooled) < len(rows):
    table += (
      f'\n\nThe {len(rows)} runs are {len(pooled)} variants: a run per seed (train.seeds as a sweep axis), pooled '
      "here; train min sums a variant's runs."
    )
  _write(os.path.join(root, 'results.md'), table + '\n')
  _write(os.path.join(root, 'results.csv'), tables.results_csv(pooled))
  strip = plots.seed_strip(tables.results_strip(pooled), os.path.join(root, 'results_seeds.png'), 'Test BLEU by seed')
  print('\n' + table)
  outputs = [os.path.join(root, 'results.md'), os.path.join(root, 'results.csv'), strip]
  curves = {r['variant']: curves_lib.validation_records(d) for r, d in zip(rows, dirs)}
  if all(curves.values()):
    outputs.append(
      plots.learning_curves(
        curves,
        os.path.join(root, 'results_curves.png'),
        'Validation during training (mean over seeds)',
        dashed={r['variant'] for r in rows if not stored.attends(r)},
      )
    )
  if config.sweep.analyze:
    out, which, seeds_as_runs, options = _analysis_arguments(config, root, len(pooled) < len(rows))
    results = report.analyze_runs(
      dirs,
      out,
      which,
      contrasts=config.sweep.contrasts,
      delta=config.sweep.delta,
      seeds_as_runs=seeds_as_runs,
      corpora=corpora,
      ahead=ahead,
      **options,
    )
    analysis_md = tables.analysis_table(results)  # seeds trained as runs: one row per variant they pool into
    _write(os.path.join(out, 'analysis.md'), analysis_md + '\n')
    outputs.append(html_report.write_report(results, out))
    print('\nAnalysis of the test split (every seed decoded):\n' + analysis_md)
    print(tables.attention_verdict(results))
    outputs += [
      os.path.join(out, 'analysis.md'),
      os.path.join(out, 'bleu_by_seed.png'),
      os.path.join(out, 'bleu_by_length.png'),
      os.path.join(out, '<variant>/heatmap_<i>.png'),
    ]
  print('\nWrote:\n  ' + '\n  '.join(outputs))


def _report_finished(config, root, runs, shard):
  """sweep.report_only: the tables and analysis of the variants that have finished (results.json of this
  exact config), training nothing; the others are listed."""
  if shard is not None:
    raise ConfigError('sweep.report_only merges every shard: leave sweep.shard empty with it')
  finished = [(name, workdir, _finished(workdir, run)) for name, workdir, run in runs]
  missing = [name for name, _, row in finished if row is None]
  finished = [(name, workdir, row) for name, workdir, row in finished if row is not None]
  if missing:
    print(f'not finished (left out): {", ".join(missing)}')
  if not finished:
    raise ConfigError(f'no variant of this sweep has finished under {root}; train first (without sweep.report_only)')
  print(f'reporting {len(finished)} finished variant(s) of {len(runs)}')
  with lock.hold(root, 'sweep', enabled=parallel.is_main_process()):
    if parallel.is_main_process():
      _report(config, root, [row for _, _, row in finished], [workdir for _, workdir, _ in finished])


AUTO = 'auto'


def shard_of(text: str, num_variants: int):
  """(i, n) from 'i/n' (0 <= i < n), 'auto', or None for ''. Shard i trains variants i, i + n, i + 2n, ...;
  'auto' trains, in order, every variant that is neither finished nor held by another live process (its
  training lock), so that processes started at any time share the work evenly. Any shard skips a variant
  that another live process holds."""
  text = str(text).strip()
  if not text:
    return None
  if text == AUTO:
    return AUTO
  i, slash, n = text.partition('/')
  try:
    i, n = int(i), int(n)
  except ValueError:
    i = n = -1
  if not slash or not 0 <= i < n:
    raise ConfigError(
      f"sweep.shard '{text}' is not i/n with 0 <= i < n, nor auto; e.g. --config.sweep.shard=0/2 and 1/2 for two shards "
      '(a SLURM array: --config.sweep.shard=$SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT)'
    )
  if i >= num_variants:
    print(f'shard {i}/{n}: only {num_variants} variant(s), so this shard has none')
  return i, n


def _pooled_names(keep) -> list[str]:
  """The variants' names as the analysis compares them: seeds trained as runs (a train.seeds axis) pooled."""
  return sorted({run.pool for _, run in keep})


def _finished(workdir, run_config):
  """The results of a finished run of exactly this config, or None (train_and_evaluate then resumes a run
  whose config differs only in resumable settings, such as more steps, and refuses any other)."""
  path = os.path.join(workdir, 'results.json')
  if not os.path.exists(path) or not os.path.exists(os.path.join(workdir, checkpoints.CONFIG_FILE)):
    return None
  if checkpoints.run_differences(workdir, run_config) != ([], []):  # any difference, resumable ones too
    return None
  fix = 'delete it and run the sweep again: the variant resumes from its checkpoint'
  try:
    with open(path) as f:
      row = json.load(f)
  except ValueError as e:
    raise ConfigError(f'{path} is damaged ({e}); {fix}') from None
  problem = _results_shape(row)
  if problem:
    raise ConfigError(f'{path} is not the results a training run writes ({problem}); {fix}')
  return row


# What the sweep's tables read from a results.json: per-seed lists as long as its seeds, and numbers.
RESULT_LISTS = ('test_bleu',) + tuple(k for _, k in tables.RESULT_COLUMNS)
RESULT_NUMBERS = ('parameters', 'tokens_per_s_per_seed', 'train_seconds')


def _results_shape(row) -> str:
  """'' for a results.json the tables can read, else what is wrong with it."""
  if not isinstance(row, dict):
    return f'a JSON {type(row).__name__}, not an object'
  if not isinstance(row.get('variant'), str):
    return "no 'variant' name"
  seeds = row.get('seeds')
  if not isinstance(seeds, list) or not seeds:
    return "no list of 'seeds'"
  for key in RESULT_LISTS:
    values = row.get(key, [0.0] * len(seeds)) if key != 'test_bleu' else row.get(key)
    if not isinstance(values, list) or len(values) != len(seeds):
      return f"'{key}' is not a list of one value per seed"
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in values):
      return f"'{key}' holds a value that is not a finite number"
  for key in RESULT_NUMBERS:
    if not isinstance(row.get(key), (int, float)) or isinstance(row.get(key), bool):
      return f"'{key}' is not a number"
  return ''


def _write(path, text):
  report.write_text(path, text)  # whole or not at all: shards and readers may look at any time


if __name__ == '__main__':
  flags.mark_flag_as_required('workdir')
  app.run(main, flags_parser=common.parse_flags)
