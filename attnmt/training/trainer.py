"""train_and_evaluate: one variant, one or more seeds trained together in a single vmapped program.

Every seed has its own initialisation, dropout stream and data order; their train states are stacked
on a leading seed axis and one jitted `vmap(train_step)` updates them all. The program runs
data-parallel over a `jax.sharding.Mesh` of `train.num_devices` devices (0: all, every host's): the
state is replicated, the global batch of `data.batch_size` sentences is split over the devices, and
each process builds only its own rows of it. A run restarted on the same workdir resumes from its
latest checkpoint, data iterators included, on any number of devices.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import time

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax

from attnmt.training import checkpoints, evaluation, guards, lock, parallel, train_step, tensorboard_heatmaps, settings
from attnmt import data
from attnmt.errors import ConfigError, pause_point
from attnmt.model import attention, forms, scores
from attnmt.model.config import ModelConfig
from attnmt.training.metrics_io import MetricsWriter, Progress

BATCH_KEYS = ('src', 'src_len', 'tgt_in', 'tgt_out', 'tgt_len')


def model_config(config: ml_collections.ConfigDict, prepared: data.PreparedData) -> ModelConfig:
  """The validated ModelConfig of `config.model`, vocabulary sizes taken from the tokenizers."""
  return ModelConfig.from_dict(
    {
      **config.model.to_dict(),
      'source_vocab_size': prepared.src_tokenizer.vocab_size,
      'target_vocab_size': prepared.tgt_tokenizer.vocab_size,
    }
  )


def parse_seeds(seeds) -> list[int]:
  try:
    out = [int(s) for s in str(seeds).split(',') if s.strip()]
  except ValueError:
    hint = " ('auto' is resolved by a sweep: pass the seeds to a single run)" if str(seeds).strip() == 'auto' else ''
    raise ConfigError(f"train.seeds must be comma-separated integers like '0,1,2', got '{seeds}'{hint}") from None
  if not out or len(set(out)) != len(out):
    raise ConfigError(f"train.seeds must list distinct integers, got '{seeds}'")
  big = [s for s in out if not -(2**31) <= s < 2**31]
  if big:
    raise ConfigError(f'train.seeds must be 32-bit integers (-2147483648 to 2147483647), got {big[0]}')
  return out


# What the learning rate does after the warm-up, per train.schedule.
AFTER_WARMUP = {
  'constant': lambda t, warmup: optax.constant_schedule(t.learning_rate),
  'cosine': lambda t, warmup: optax.cosine_decay_schedule(t.learning_rate, max(t.num_steps - warmup, 1)),
  'rsqrt': lambda t, warmup: lambda s: t.learning_rate * jnp.sqrt(warmup / (s + warmup)),
}


def learning_rate_schedule(t: ml_collections.ConfigDict) -> optax.Schedule:
  warmup = max(int(t.warmup_steps), 1)
  ramp = optax.linear_schedule(0.0, t.learning_rate, warmup)
  after = AFTER_WARMUP[t.schedule](t, warmup)  # train.schedule's choices (settings.TRAIN) are these keys
  return optax.join_schedules([ramp, after], [warmup])


def stack_batches(batches: list[dict], keys: tuple[str, ...] = BATCH_KEYS) -> dict:
  """Pads the seeds' batches to common widths and stacks them on a leading seed axis (`keys` only; the
  gold `alignment`, B x T x S, pads to the target and source widths)."""
  widths = {k: max(b[k].shape[1] for b in batches) for k in ('src', 'tgt_in', 'tgt_out')}

  def pad(x, k):
    if k == 'alignment':
      return np.pad(x, ((0, 0), (0, widths['tgt_out'] - x.shape[1]), (0, widths['src'] - x.shape[2])))
    return np.pad(x, ((0, 0), (0, widths[k] - x.shape[1]))) if k in widths else x

  rows = max(len(b['src_len']) for b in batches)

  def pad_rows(x):  # an epoch's smaller last batch: extra rows have length 0 and count for nothing
    return np.pad(x, ((0, rows - len(x)),) + ((0, 0),) * (x.ndim - 1))

  return {k: np.stack([pad_rows(pad(b[k], k)) for b in batches]) for k in keys}


def seed_functions(
  cfg: ModelConfig,
  optimizer: optax.GradientTransformation,
  label_smoothing: float = 0.0,
  skip_nonfinite: bool = False,
  coverage_loss_weight: float = 0.0,
  mesh: jax.sharding.Mesh | None = None,
  alignment_loss_weight: float = 0.0,
):
  """(init, step) for K seeds in one program: init(seeds) -> TrainState stacked over seeds; step(state, batch_K)
  -> (state, metrics), jitted, vmapped over the leading seed axis of state and batch, state donated.
  `alignment_loss_weight` > 0 trains attention towards the batches' gold `alignment` (train_step.loss_fn).

  With a `mesh`, the state is replicated over its devices and the batch (K x B x ...) is split on its
  rows B: jit's SPMD partitioner turns the gradient sums into all-reduces.
  """
  init = functools.partial(train_step.init_train_states, cfg, optimizer)
  one = functools.partial(
    train_step.train_step,
    cfg,
    optimizer,
    label_smoothing=label_smoothing,
    coverage_loss_weight=coverage_loss_weight,
    alignment_loss_weight=alignment_loss_weight,
  )
  guarded = guards.guard_step(one, skip_nonfinite)
  vmapped = _over_seeds(guarded)
  if mesh is None:
    return init, jax.jit(vmapped, donate_argnums=0)
  everywhere = parallel.replicated(mesh)
  step = jax.jit(
    vmapped,
    in_shardings=(everywhere, parallel.batch_sharding(mesh, row_axis=1)),
    out_shardings=(everywhere, everywhere),
    donate_argnums=0,
  )
  return lambda seeds: parallel.replicate(mesh, init(seeds)), step


def _over_seeds(step):
  """`step` mapped over the leading seed axis of state and batch. One seed runs the plain step on the
  squeezed arrays: vmap over an axis of 1 turns every product into a batched one, which XLA:CPU runs
  about 25 % slower than the plain product at the main job's size (benchmarks/README.md)."""
  vmapped = jax.vmap(step)

  def mapped(state, batch):
    if jax.tree.leaves(state)[0].shape[0] != 1:
      return vmapped(state, batch)
    squeeze = functools.partial(jax.tree.map, lambda x: x[0])
    return jax.tree.map(lambda x: x[None], step(squeeze(state), squeeze(batch)))

  return mapped


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
) -> None:
  """Refuses to mix two different runs in one workdir (`checkpoints.run_differences`: settings a resumed run
  may change, such as num_steps, are allowed), with `fix` as the message's remedy. A config.json without any
  checkpoint (a run that stopped before its first one) holds no run: it is replaced."""
  if not has_checkpoint(workdir):
    return
  refused, _ = checkpoints.run_differences(workdir, config) or ([], [])
  if refused:
    raise ConfigError(f'{workdir} holds a run with a different config (differs in {", ".join(refused)}); {fix}')


def evaluate(
  cfg: ModelConfig,
  config,
  params,
  prepared,
  split: str,
  num_seeds: int,
  max_sentences: int = 0,
  beam_size: int = 0,
  mesh: jax.sharding.Mesh | None = None,
) -> dict:
  """Loss, perplexity, attention statistics (evaluation.teacher_forced_metrics), BLEU and chrF of every seed
  on `split`, as lists over seeds (data-parallel on `mesh`)."""
  t, d = config.train, config.data
  _, references = data.raw_texts(prepared, split)
  batches = list(data.batches(prepared, split, d, max_examples=max_sentences))  # built once, for every seed
  out = {}
  for i in range(num_seeds):
    p = evaluation.seed_params(params, i)
    metrics = evaluation.teacher_forced_metrics(cfg, p, batches, mesh=mesh)
    trans = evaluation.translate(
      cfg,
      p,
      batches,
      prepared.tgt_tokenizer,
      beam_size,
      t.beam_alpha,
      t.max_decode_factor,
      mesh=mesh,
      beta=t.beam_coverage_penalty,
    )
    metrics.update(evaluation.bleu_chrf([x.text for x in trans], [references[x.index] for x in trans]))
    for k, v in metrics.items():
      out.setdefault(k, []).append(v)
  out['bleu_signature'] = out['bleu_signature'][0]
  out['skipped_long'] = data.removed_by_length(prepared, split, d)  # left out by data.eval_max_*_length
  return out


def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str) -> dict:
  """Trains the configured variant for every seed in `config.train.seeds`; returns the results summary.

  Raises guards.TrainingStopped after SIGTERM / Ctrl-C (a checkpoint saved first) and guards.NonFiniteError
  on a NaN or infinite loss (unless train.nonfinite='skip'; no checkpoint is written after one).
  """
  seeds = check_config(config)
  mesh = make_mesh(config)
  with lock.hold(workdir, 'train', enabled=parallel.is_main_process()):
    return _train_and_evaluate(config, workdir, seeds, mesh)


def check_config(config: ml_collections.ConfigDict) -> list[int]:
  """Validates every setting (attnmt.training.settings, ModelConfig) without writing anything; returns the seeds."""
  settings.validate(config)
  seeds = parse_seeds(config.train.seeds)
  cfg = ModelConfig.from_dict({**config.model.to_dict(), 'source_vocab_size': 8, 'target_vocab_size': 8})
  if any(':' in str(getattr(cfg, kind)) for kind in ('score', 'window', 'normalizer')):
    attention.check_user_code(cfg)  # a user's class: its output shapes, before the data are prepared
  if config.train.coverage_loss_weight > 0 and not scores.build(cfg).attends:
    raise ConfigError(
      f"train.coverage_loss_weight penalises attending a source position twice, and model.score '{cfg.score}' has "
      'no attention; set the weight to 0 or choose a score'
    )
  learning_rate_schedule(config.train)
  return seeds


def _train_and_evaluate(config: ml_collections.ConfigDict, workdir: str, seeds: list[int], mesh) -> dict:
  t = config.train
  check_workdir(workdir, config)
  prepared = prepare_data(config.data)
  data.check_batches(prepared, config.data, t.num_steps)
  cfg = model_config(config, prepared)
  supervised = t.alignment_loss_weight > 0
  if supervised and prepared.tokenized['train'].links is None:  # validation refuses such corpora by name
    raise ConfigError(
      f'train.alignment_loss_weight={t.alignment_loss_weight} needs gold alignments, and {config.data.name} has '
      'none; set the weight to 0'
    )
  batch_keys = BATCH_KEYS + (('alignment',) if supervised else ())
  optimizer = train_step.make_optimizer(learning_rate_schedule(t), t.clip_norm)
  init_fn, step_fn = seed_functions(
    cfg,
    optimizer,
    t.label_smoothing,
    skip_nonfinite=t.nonfinite == 'skip',
    mesh=mesh,
    coverage_loss_weight=t.coverage_loss_weight,
    alignment_loss_weight=t.alignment_loss_weight,
  )
  print(f'{variant_name(config)}: {len(seeds)} seed(s) on {parallel.describe(mesh)}', flush=True)
  state = init_fn(seeds)
  ckpt = checkpoints.RunCheckpoints(workdir)
  writer = MetricsWriter(workdir, enabled=jax.process_index() == 0)
  meta = {
    'iterators': [None] * len(seeds),
    'best_bleu': None,
    'train_seconds': 0.0,
    'train_tokens': 0,
    'skipped_updates': 0,
  }
  resumed = ckpt.resume(state)
  if resumed is not None:
    state, restored, _ = resumed
    meta = {**meta, **restored}  # a field added after the checkpoint was written reads as its default
    print(f'Resumed {workdir} at step {int(parallel.to_numpy(state.step)[0])}', flush=True)
  # config.json and the vocabulary are written with the first checkpoint: a run that fails before it
  # leaves no config that would refuse the corrected command.
  described = resumed is not None
  # Rows padded to the full global batch (a multiple of the device count), so an epoch's smaller last
  # batch keeps the compiled shape; token-budget batches only pad to divide over the devices.
  row_multiple = parallel.num_shards(mesh) if config.data.batch_tokens else config.data.batch_size
  iterators = [
    data.batches(
      prepared,
      'train',
      config.data,
      seed=config.data.shuffle_seed + s,
      state=st,
      row_multiple=row_multiple,
      shard=(jax.process_index(), jax.process_count()),
    )
    for s, st in zip(seeds, meta['iterators'])
  ]
  start = int(parallel.to_numpy(state.step)[0])
  progress = Progress(t.num_steps, start, enabled=parallel.is_main_process(), budget_seconds=60 * t.time_budget_minutes)
  if start >= t.num_steps:
    print(f'{workdir} already trained to step {start}; computing its results', flush=True)
  first_bad, bad_count, tokens = jnp.int32(-1), jnp.int32(0), jnp.int32(0)
  heatmaps = None
  if t.tensorboard_heatmaps:
    heatmaps = tensorboard_heatmaps.ValidationHeatmaps(
      cfg, config, prepared, t.tensorboard_heatmaps, seeds[0], variant_name(config), mesh
    )
  skipped_before = meta['skipped_updates']

  def check_finite(step):
    """Host check, at log and checkpoint points only: stop (or count) non-finite updates."""
    meta['skipped_updates'] = skipped_before + int(bad_count)
    if t.nonfinite == 'stop' and int(first_bad) >= 0:
      ckpt.wait()
      raise guards.NonFiniteError(
        f'non-finite loss, gradient or parameters at step {int(first_bad)}; stopped without saving (last good '
        f'checkpoint: step {ckpt.latest_step()}); lower train.learning_rate or set train.nonfinite=skip to skip '
        'such updates'
      )

  def save(step, best=False):
    nonlocal described
    check_finite(step)
    if not described and parallel.is_main_process():
      checkpoints.save_config(workdir, config, dataclasses.asdict(cfg))
      data.save_tokenizers(prepared, os.path.join(workdir, 'vocab'))
    described = True
    meta['iterators'] = [it.state() for it in iterators]
    ckpt.save(step, state, meta, best=best)

  tokens_since_log, t0 = 0, time.perf_counter()
  deadline = progress.deadline  # the time budget's end (None without one)
  with guards.StopSignals() as stop:
    for step in range(start + 1, t.num_steps + 1):
      try:
        batch = stack_batches([next(it) for it in iterators], batch_keys)  # this process's rows of each seed's batch
      except StopIteration:  # data.check_batches refuses such settings up front
        ckpt.close()
        raise ValueError(
          f'the training data ran out at step {step} of train.num_steps={t.num_steps}; raise '
          'data.num_epochs or set it to 0 (repeat forever)'
        ) from None
      state, metrics = step_fn(state, parallel.shard_batch(mesh, batch, row_axis=1, local=True))
      if step == start + 1:  # compiled: the ETA's rate is measured from here
        jax.block_until_ready(metrics['loss'])
        progress.compiled(step)
      first_bad, bad_count = guards.track_nonfinite(first_bad, bad_count, metrics['finite'], step)
      tokens = tokens + jnp.sum(metrics['tokens'])  # global count, summed on the device: no sync per step
      is_last = step == t.num_steps or (deadline is not None and time.monotonic() > deadline)
      if step % t.log_every == 0 or is_last:
        loss = parallel.to_numpy(metrics['loss'])  # the only regular host sync in the loop
        tokens_since_log, tokens = int(parallel.to_numpy(tokens)), jnp.int32(0)
        check_finite(step)
        shown = {'loss': float(loss.mean())}
        scalars = {'loss': loss.tolist(), 'grad_norm': parallel.to_numpy(metrics['grad_norm']).tolist()}
        if supervised:  # the mean alignment_loss of the step's batch, per seed
          scalars['alignment_loss'] = parallel.to_numpy(metrics['alignment_loss']).tolist()
          shown['align'] = float(np.mean(scalars['alignment_loss']))
        if 'coverage_loss' in metrics:
          scalars['coverage_loss'] = parallel.to_numpy(metrics['coverage_loss']).tolist()
          shown['coverage'] = float(np.mean(scalars['coverage_loss']))
        rates = progress.update(step, tokens_since_log, **shown)
        writer.write(
          step,
          'train',
          {
            **scalars,
            **rates,
            'learning_rate': float(learning_rate_schedule(t)(step)),
            'skipped_updates': meta['skipped_updates'],
          },
        )
        meta['train_seconds'] += time.perf_counter() - t0
        meta['train_tokens'] += tokens_since_log
        tokens_since_log, t0 = 0, time.perf_counter()
      if (t.eval_every and step % t.eval_every == 0) or is_last:
        check_finite(step)
        jax.block_until_ready(state)
        meta['train_seconds'] += time.perf_counter() - t0  # training time only: evaluation is not counted
        ev = evaluate(
          cfg, config, state.params, prepared, 'validation', len(seeds), t.eval_max_sentences, t.eval_beam_size, mesh
        )
        writer.write(step, 'validation', {**ev, 'train_seconds': meta['train_seconds']})
        if heatmaps is not None:
          heatmaps.write(writer, step, state.params)
        skipped = (
          f'; {ev["skipped_long"]} sentence(s) longer than data.eval_max_*_length skipped' if ev['skipped_long'] else ''
        )
        progress.message(
          f'step {step} validation: BLEU {np.mean(ev["bleu"]):.2f} chrF {np.mean(ev["chrf"]):.2f} '
          f'ppl {np.mean(ev["perplexity"]):.2f} (mean of {len(seeds)} seed(s)){skipped}'
        )
        if meta['best_bleu'] is None or np.mean(ev['bleu']) > meta['best_bleu']:
          meta['best_bleu'] = float(np.mean(ev['bleu']))
          save(step, best=True)
        t0 = time.perf_counter()
      if step % t.checkpoint_every == 0 or is_last or stop.requested:
        save(step)
      if is_last:
        break
      if stop.requested:
        progress.close()
        ckpt.close()
        writer.close()
        raise guards.TrainingStopped(
          f'stopped by signal {stop.requested} at step {step}; checkpoint saved in {workdir}; '
          'run the same command again to resume',
          stop.requested,
        )
  progress.close()
  ckpt.close()
  check_trained(meta, int(parallel.to_numpy(state.step)[0]), len(seeds), state.params)
  summary = final_results(cfg, config, workdir, prepared, seeds, meta, mesh)
  final_step = int(parallel.to_numpy(state.step)[0])
  writer.write(final_step, 'test', {k: v for k, v in summary.items() if k not in ('seeds', 'variant')})
  writer.hparams(hparams(config), hparams_metrics(summary), final_step)
  writer.close()
  return summary


# The final metrics the HParams dashboard shows, means over seeds (a metric a summary lacks is left out).
HPARAMS_METRICS = ('test_bleu', 'test_chrf', 'test_chrfpp', 'test_perplexity', 'tokens_per_s_per_seed')


def hparams(config) -> dict:
  """Every declared setting of the model, data and train sections by its dotted key (settings.SECTIONS), the
  values this run used."""
  return {f'{name}.{row.key}': config[name][row.key] for name, rows in settings.SECTIONS.items() for row in rows}


def hparams_metrics(summary: dict) -> dict:
  return {k: float(np.mean(summary[k])) for k in HPARAMS_METRICS if k in summary}


def check_trained(meta: dict, steps: int, num_seeds: int, params) -> None:
  """Refuses to report a run that never trained: every update skipped as non-finite (train.nonfinite=skip),
  or final parameters that are not finite. Raised before results.json, so no table counts it a success."""
  updates = steps * num_seeds
  if updates and meta.get('skipped_updates', 0) >= updates:
    raise guards.NonFiniteError(
      f'every one of the {updates} updates ({num_seeds} seed(s) x {steps} steps) was non-finite and skipped '
      '(train.nonfinite=skip): the model never trained; lower train.learning_rate'
    )
  if not all(bool(jnp.all(jnp.isfinite(x))) for x in jax.tree.leaves(params)):
    raise guards.NonFiniteError('the final parameters are not finite; no results were written')


def final_results(cfg, config, workdir, prepared, seeds, meta, mesh=None) -> dict:
  """Test-split metrics of the best checkpoint per seed, plus size and speed; written to results.json."""
  pause_point('final_evaluation')
  params, _, best_step = checkpoints.restore_params(workdir, 'best', mesh=mesh)
  ev = evaluate(cfg, config, params, prepared, 'test', len(seeds), 0, 0, mesh)
  n_params = int(sum(x.size for x in jax.tree.leaves(params)) // len(seeds))
  summary = {
    'variant': variant_name(config),
    'attends': scores.build(cfg).attends,  # False: a baseline without attention (drawn dashed, compared against)
    'seeds': seeds,
    'best_step': best_step,
    'test_bleu': ev['bleu'],
    'test_chrf': ev['chrf'],
    'test_chrfpp': ev['chrfpp'],
    'test_perplexity': ev['perplexity'],
    'bleu_signature': ev['bleu_signature'],
    'parameters': n_params,
    'train_seconds': meta['train_seconds'],
    'tokens_per_s_per_seed': meta['train_tokens'] / max(meta['train_seconds'], 1e-9) / len(seeds),
    'skipped_updates': meta.get('skipped_updates', 0),
    'test_skipped_long': ev['skipped_long'],
  }
  if parallel.is_main_process():  # written whole: the shards of a sweep read it while others train
    path = os.path.join(workdir, 'results.json')
    with open(f'{path}.tmp-{os.getpid()}', 'w') as f:
      json.dump(summary, f, indent=1)
    os.replace(f'{path}.tmp-{os.getpid()}', path)
  return summary


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


def prepare_data(data_config: ml_collections.ConfigDict) -> data.PreparedData:
  """data.prepare, process 0 first: on a shared filesystem the others then read its cache instead of
  racing to build the same files (the build is deterministic, so private disks work too)."""
  if not parallel.is_main_process():
    parallel.barrier('attnmt-data-prepared')
  prepared = data.prepare(data_config)
  if parallel.is_main_process():
    parallel.barrier('attnmt-data-prepared')
  return prepared


def variant_name(config) -> str:
  """The run's label in tables and plots: a sweep's name for it (`config.variant`, when the sweep varies
  more than the attention axes), else score/timing/window[/feed]."""
  if config.get('variant'):
    return config.variant
  m = config.model
  name = f'{m.score}/{m.query_timing}/{m.window}'
  return name + ('/feed' if forms.build(m).reads_input_feeding and m.input_feeding else '')
