"""Which runs a sweep config asks for: the swept axes and their typed values, every valid combination as a named
run config (`variants`), train.seeds=auto, and which of the runs a shard of the sweep trains (`shard_of`)."""

import copy
import itertools
import json
import sys

from attnmt.errors import ConfigError, UnknownChoice
from attnmt.model.config import COMPONENTS, FORMER, ModelConfig, canonical_section
from attnmt.model.registry import parse, split_top
from attnmt.training import settings
from experiments import cores

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
  axis = _seed_axis(config)
  if axis:  # the axis names the seeds each run trains; auto decides nothing
    config.train.seeds = seeds
    return f"train.seeds=auto beside the sweep's train.seeds axis: the axis names the seeds ({' | '.join(axis)})"
  if backend != 'cpu':
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


def seeds_swept(config) -> bool:
  """Whether train.seeds is an axis of the sweep (in sweep.axes or one of sweep.cases)."""
  return bool(_seed_axis(config))


def _seed_axis(config) -> list[str]:
  """The values train.seeds takes as an axis of the sweep, as written, one entry per place (sweep.axes, each case)."""
  written = str(config.sweep.axes).split(';') + str(config.sweep.cases).replace('|', ';').split(';')
  return [part.partition('=')[2].strip() for part in written if part.partition('=')[0].strip() == 'train.seeds']


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


def pooled_names(keep) -> list[str]:
  """The variants' names as the analysis compares them: seeds trained as runs (a train.seeds axis) pooled."""
  return sorted({run.pool for _, run in keep})
