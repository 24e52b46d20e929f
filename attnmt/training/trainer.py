"""train_and_evaluate: one variant, one or more seeds trained together in a single vmapped program.

This module checks the config and the workdir and assembles the run; `seeds` stacks the seeds on a leading
axis and builds the vmapped step, `loop` trains, `results` reports. Every seed has its own initialisation,
dropout stream and data order; their train states are stacked on a leading seed axis and one jitted
`vmap(train_step)` updates them all. The program runs data-parallel over a `jax.sharding.Mesh` of
`train.num_devices` devices (0: all, every host's): the state is replicated, the global batch of
`data.batch_size` sentences is split over the devices, and each process builds only its own rows of it. A run restarted on the same workdir resumes from its
latest checkpoint, data iterators included, on any number of devices.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os

import jax
import ml_collections

from attnmt.training import checkpoints, lock, loop, parallel, results, row_threads, settings, shapes, train_step
from attnmt.training import seeds as seed_axis
from attnmt import data
from attnmt.errors import ConfigError
from attnmt.model import preflight, scores
from attnmt.model.config import ModelConfig
from attnmt.training.metrics_io import MetricsWriter


def with_vocabulary(cfg: ModelConfig, prepared: data.PreparedData) -> ModelConfig:
  """The checked ModelConfig with its vocabulary sizes taken from the trained tokenizers (no rule of the model
  reads them, so it is not checked again)."""
  return dataclasses.replace(
    cfg, source_vocab_size=prepared.src_tokenizer.vocab_size, target_vocab_size=prepared.tgt_tokenizer.vocab_size
  )


def model_config(config: ml_collections.ConfigDict, prepared: data.PreparedData) -> ModelConfig:
  """The validated ModelConfig of `config.model`, vocabulary sizes taken from the tokenizers."""
  return with_vocabulary(ModelConfig.from_dict(config.model.to_dict()), prepared)


def has_checkpoint(workdir: str) -> bool:
  """Whether `workdir` holds a finished checkpoint step (latest or best)."""
  return any(
    name.isdigit()
    for sub in ('checkpoints', 'best')
    if os.path.isdir(os.path.join(workdir, sub))
    for name in os.listdir(os.path.join(workdir, sub))
  )


def check_workdir(
  workdir: str,
  config: ml_collections.ConfigDict,
  fix: str = 'use another --workdir, or pass --fresh to move the old run aside and start anew',
) -> list[str]:
  """Refuses to mix two different runs in one workdir (`checkpoints.run_differences`: settings a resumed run
  may change, such as num_steps, are allowed), with `fix` as the message's remedy. A config.json without any
  checkpoint (a run that stopped before its first one) holds no run: it is replaced. Returns the settings the
  resumed run changes ('section.key'; none for a new run)."""
  if not has_checkpoint(workdir):
    return []
  refused, resumable = checkpoints.run_differences(workdir, config) or ([], [])
  if refused:
    raise ConfigError(f'{workdir} holds a run with a different config (differs in {", ".join(refused)}); {fix}')
  return resumable


def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str, corpora: dict | None = None) -> dict:
  """Trains the configured variant for every seed in `config.train.seeds`; returns the results summary.
  `corpora` (data.prepare_once): a sweep's runs in one process read their corpus once.

  Raises guards.TrainingStopped after SIGTERM / Ctrl-C (a checkpoint saved first) and guards.NonFiniteError
  on a NaN or infinite loss (unless train.nonfinite='skip'; no checkpoint is written after one).
  """
  config = settings.canonical(config, live=True)  # the one way in: the CLI, the API and the sweep pass here
  seeds, cfg = check_config(config)
  mesh = make_mesh(config)
  with lock.hold(workdir, 'train', enabled=parallel.is_main_process()):
    return _train_and_evaluate(config, workdir, seeds, cfg, mesh, corpora)


def _train_and_evaluate(
  config: ml_collections.ConfigDict, workdir: str, seeds: list[int], cfg, mesh, corpora: dict | None
) -> dict:
  t = config.train
  changed = check_workdir(workdir, config)
  prepared = prepare_data(config.data, corpora)
  data.check_batches(prepared, config.data, t.num_steps)
  cfg = with_vocabulary(cfg, prepared)
  supervised = t.alignment_loss_weight > 0
  if supervised and prepared.tokenized['train'].links is None:  # validation refuses such corpora by name
    raise ConfigError(
      f'train.alignment_loss_weight={t.alignment_loss_weight} needs gold alignments, and {config.data.name} has '
      'none; set the weight to 0'
    )
  settings_json = json.dumps(t.to_dict(), sort_keys=True)
  threads = step_threads(config, mesh)
  init_fn, step_fn = _seed_functions(cfg, settings_json, mesh, threads)
  on = parallel.describe(mesh) + (f', the rows in {threads} blocks on {threads} threads' if threads > 1 else '')
  print(f'{results.variant_name(config)}: {len(seeds)} seed(s) on {on}', flush=True)
  widths, cost = shapes.choose_widths(prepared, config.data, seeds, t.num_steps, parallel.num_shards(mesh))
  if cost and parallel.is_main_process():
    print(cost, flush=True)
  state, meta = init_fn(seeds), loop.initial_meta(len(seeds))
  ckpt = checkpoints.RunCheckpoints(workdir)
  writer = MetricsWriter(workdir, enabled=jax.process_index() == 0)
  resumed = ckpt.resume(state)
  if resumed is not None:
    state, restored, _ = resumed
    meta = {**meta, **restored}  # a field added after the checkpoint was written reads as its default
    print(f'Resumed {workdir} at step {int(parallel.to_numpy(state.step)[0])}', flush=True)
  # config.json and the vocabulary are written with the first checkpoint: a run that fails before it
  # leaves no config that would refuse the corrected command.
  run = loop.Loop(
    config,
    cfg,
    workdir,
    prepared,
    seeds,
    mesh,
    step_fn,
    seed_axis.BATCH_KEYS + (('alignment',) if supervised else ()),
    ckpt,
    writer,
    # config.json is written at the first save of a new run, and again after a resumable change (more steps), so
    # that it always holds the config the run finished with (the sweep's `finished` compares it)
    loop.LoopState(state, meta, described=resumed is not None and not changed),
    widths,
  )
  run.run()
  state, meta = run.state.train, run.state.meta
  results.check_trained(meta, run.state.step, len(seeds), state.params)
  summary = results.final_results(cfg, config, workdir, prepared, seeds, meta, mesh)
  writer.write(run.state.step, 'test', {k: v for k, v in summary.items() if k not in ('seeds', 'variant')})
  writer.hparams(results.hparams(config), results.hparams_metrics(summary), run.state.step)
  writer.close()
  return summary


def step_threads(config: ml_collections.ConfigDict, mesh: jax.sharding.Mesh) -> int:
  """train.step_threads resolved for this process (row_threads.resolve)."""
  return row_threads.resolve(
    config.train.get('step_threads', 'auto'),
    row_threads.rows_per_batch(config.data),
    jax.default_backend(),
    mesh.devices.size,
  )


@functools.lru_cache(maxsize=4)
def _seed_functions(cfg: ModelConfig, train_json: str, mesh: jax.sharding.Mesh, threads: int = 1):
  """seeds.seed_functions for a model and a train section (as sorted JSON), the step as `threads` row blocks on
  threads when > 1 (row_threads). Cached: a process that trains the same variant again (a notebook, the Python
  API, the tests) reuses the traced and compiled programs instead of tracing them anew (about 5 s of CPU for the
  tiny config)."""
  t = ml_collections.ConfigDict(json.loads(train_json))
  optimizer = train_step.make_optimizer(train_step.learning_rate_schedule(t), t.clip_norm)
  return seed_axis.seed_functions(
    cfg,
    optimizer,
    t.label_smoothing,
    skip_nonfinite=t.nonfinite == 'skip',
    mesh=mesh,
    coverage_loss_weight=t.coverage_loss_weight,
    alignment_loss_weight=t.alignment_loss_weight,
    threads=threads,
  )


def check_config(config: ml_collections.ConfigDict) -> tuple[list[int], ModelConfig]:
  """Validates every setting (attnmt.training.settings, ModelConfig) without writing anything, and traces a user's
  own components on a tiny model (model.preflight); returns the seeds and the ModelConfig (its vocabulary sizes
  the defaults until `with_vocabulary`)."""
  settings.validate(config)
  seeds = seed_axis.parse_seeds(config.train.seeds)
  cfg = ModelConfig.from_dict(config.model.to_dict())
  preflight.check(cfg)  # a user's class: shapes, names and methods, before the data are prepared
  preflight.check_size(cfg, int(config.data.vocab_size), len(seeds))
  if config.train.coverage_loss_weight > 0 and not scores.build(cfg).attends:
    raise ConfigError(
      f"train.coverage_loss_weight penalises attending a source position twice, and model.score '{cfg.score}' has "
      'no attention; set the weight to 0 or choose a score'
    )
  train_step.learning_rate_schedule(config.train)
  return seeds, cfg


def make_mesh(config: ml_collections.ConfigDict) -> jax.sharding.Mesh:
  """The data-parallel mesh of `train.num_devices`; refuses a global batch that does not split evenly."""
  try:
    mesh = parallel.make_mesh(config.train.num_devices)
  except ValueError as e:
    raise ConfigError(str(e)) from None
  n, b = parallel.num_shards(mesh), config.data.batch_size
  if not config.data.batch_tokens and b % n:
    raise ConfigError(
      f'data.batch_size={b} (the global batch) does not split over {n} devices; use a multiple '
      f'of {n}, e.g. {max(n, b - b % n)} or {b + n - b % n}, or set train.num_devices'
    )
  return mesh


def prepare_data(data_config: ml_collections.ConfigDict, corpora: dict | None = None) -> data.PreparedData:
  """data.prepare, process 0 first: on a shared filesystem the others then read its cache instead of
  racing to build the same files (the build is deterministic, so private disks work too). `corpora`
  (data.prepare_once): the corpus this process prepared before for the same data config is used again, as
  every process of a run holds it alike (no barrier is needed)."""
  if corpora is not None and data.corpus_key(data_config) in corpora:
    return corpora[data.corpus_key(data_config)]
  if not parallel.is_main_process():
    parallel.barrier('attnmt-data-prepared')
  prepared = data.prepare_once(data_config, corpora)
  if parallel.is_main_process():
    parallel.barrier('attnmt-data-prepared')
  return prepared
