"""The training loop of one variant's seeds: step, log, validate, checkpoint, stop on a signal or a time budget.

`Loop` holds what the run is made of (config, model, data iterators, the jitted step, checkpoints, metrics
writer); `LoopState` holds everything that changes as it runs, in one place: the stacked train state, the
`meta` a checkpoint stores beside it, and the device-side counters read only at log points.
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from attnmt import data
from attnmt.model.config import ModelConfig
from attnmt.training import checkpoints, evaluation, guards, parallel, results, seeds as seed_axis, shapes, train_step
from attnmt.training.metrics_io import MetricsWriter, Progress
from attnmt.training.tensorboard_heatmaps import ValidationHeatmaps


def initial_meta(num_seeds: int) -> dict:
  """What a checkpoint stores beside the train state, at the start of a run."""
  return {
    'iterators': [None] * num_seeds,  # each seed's data iterator position
    'best_bleu': None,  # best mean validation BLEU so far (the `best/` checkpoint's)
    'train_seconds': 0.0,  # training time, evaluation excluded
    'train_tokens': 0,
    'skipped_updates': 0,  # non-finite updates skipped (train.nonfinite=skip)
  }


@dataclasses.dataclass
class LoopState:
  """Everything the loop changes. The device scalars are summed on the device and read at log points only."""

  train: Any  # train_step.TrainState stacked over seeds
  meta: dict  # initial_meta's keys; saved with every checkpoint
  described: bool  # config.json and the vocabulary written (with the first checkpoint)
  first_bad: jax.Array = dataclasses.field(default_factory=lambda: jnp.int32(-1))  # first non-finite step
  bad_count: jax.Array = dataclasses.field(default_factory=lambda: jnp.int32(0))  # non-finite steps since start
  tokens: jax.Array = dataclasses.field(default_factory=lambda: jnp.int32(0))  # target tokens since the last log
  tokens_since_log: int = 0
  metrics: Optional[dict] = None  # the last step's metrics (device arrays)
  t0: float = dataclasses.field(default_factory=time.perf_counter)  # start of the current timed span

  @property
  def step(self) -> int:
    return int(parallel.to_numpy(self.train.step)[0])


@dataclasses.dataclass
class Loop:
  config: ml_collections.ConfigDict
  cfg: ModelConfig
  workdir: str
  prepared: data.PreparedData
  seeds: list[int]
  mesh: Optional[jax.sharding.Mesh]
  step_fn: Callable
  batch_keys: tuple
  ckpt: checkpoints.RunCheckpoints
  writer: MetricsWriter
  state: LoopState
  widths: tuple = ()  # the widths training batches may take (data.train_shapes; shapes.choose_widths)

  def __post_init__(self):
    t, d = self.config.train, self.config.data
    self.iterators = seed_axis.training_batches(
      self.prepared,
      d,
      self.seeds,
      self.state.meta['iterators'],
      parallel.num_shards(self.mesh),
      (jax.process_index(), jax.process_count()),
      self.widths,
    )
    self.start = self.state.step
    # every shape the coming steps take (the global batch's, read from the plans), compiled ahead on background
    # threads while the loop trains
    planned = shapes.stacked_shapes(self.iterators, max(t.num_steps - self.start, 0))
    also = evaluation.programs_ahead(self.cfg, self.config, self.prepared, self.state.train, self.mesh)
    self.ahead = shapes.Ahead(self.step_fn, self.state.train, planned, self.batch_keys, also=also)
    self.progress = Progress(
      t.num_steps, self.start, enabled=parallel.is_main_process(), budget_seconds=60 * t.time_budget_minutes
    )
    if self.start >= t.num_steps:
      print(f'{self.workdir} already trained to step {self.start}; computing its results', flush=True)
    self.heatmaps = None
    if t.tensorboard_heatmaps:
      self.heatmaps = ValidationHeatmaps(
        self.cfg,
        self.config,
        self.prepared,
        t.tensorboard_heatmaps,
        self.seeds[0],
        results.variant_name(self.config),
        self.mesh,
      )
    self.skipped_before = self.state.meta['skipped_updates']
    self.schedule = jax.jit(train_step.learning_rate_schedule(t))  # the logged rate: one program, not op by op

  def run(self) -> None:
    """Trains to train.num_steps (or the time budget's end). Raises guards.TrainingStopped after a stop signal
    (a checkpoint saved first) and guards.NonFiniteError as train.nonfinite says."""
    try:
      self._run()
    except BaseException:
      self.ahead.close()
      raise
    self.ahead.close(keep_evaluation=True)  # the final evaluation comes next

  def _run(self) -> None:
    t, s = self.config.train, self.state
    s.tokens_since_log, s.t0 = 0, time.perf_counter()
    deadline = self.progress.deadline  # the time budget's end (None without one)
    with guards.StopSignals() as stop:
      for step in range(self.start + 1, t.num_steps + 1):
        self._train_step(step)
        is_last = step == t.num_steps or (deadline is not None and time.monotonic() > deadline)
        if step % t.log_every == 0 or is_last:
          self._log(step)
        if (t.eval_every and step % t.eval_every == 0) or is_last:
          self._validate(step)
        if step % t.checkpoint_every == 0 or is_last or stop.requested:
          self._save(step)
        if is_last:
          break
        if stop.requested:
          self.progress.close()
          self.ckpt.close()
          self.writer.close()
          raise guards.TrainingStopped(
            f'stopped by signal {stop.requested} at step {step}; checkpoint saved in {self.workdir}; '
            'run the same command again to resume',
            stop.requested,
          )
    self.progress.close()
    self.ckpt.close()

  def _train_step(self, step: int) -> None:
    s = self.state
    try:  # this process's rows of each seed's batch
      batch = seed_axis.stack_batches([next(it) for it in self.iterators], self.batch_keys)
    except StopIteration:  # data.check_batches refuses such settings up front
      self.ckpt.close()
      raise ValueError(
        f'the training data ran out at step {step} of train.num_steps={self.config.train.num_steps}; raise '
        'data.num_epochs or set it to 0 (repeat forever)'
      ) from None
    s.train, s.metrics = self.ahead.step(s.train, parallel.shard_batch(self.mesh, batch, row_axis=1, local=True))
    if step == self.start + 1:  # compiled: the ETA's rate is measured from here
      jax.block_until_ready(s.metrics['loss'])
      self.progress.compiled(step)
    s.first_bad, s.bad_count = guards.track_nonfinite(s.first_bad, s.bad_count, s.metrics['finite'], step)
    s.tokens = s.tokens + jnp.sum(s.metrics['tokens'])  # global count, summed on the device: no sync per step

  def _log(self, step: int) -> None:
    s = self.state
    metrics = s.metrics
    loss = parallel.to_numpy(metrics['loss'])  # the only regular host sync in the loop
    s.tokens_since_log, s.tokens = int(parallel.to_numpy(s.tokens)), jnp.int32(0)
    self._check_finite()
    shown = {'loss': float(loss.mean())}
    scalars = {'loss': loss.tolist(), 'grad_norm': parallel.to_numpy(metrics['grad_norm']).tolist()}
    for key, label in (('alignment_loss', 'align'), ('coverage_loss', 'coverage')):
      if key in metrics:  # the mean of the step's batch, per seed
        scalars[key] = parallel.to_numpy(metrics[key]).tolist()
        shown[label] = float(np.mean(scalars[key]))
    rates = self.progress.update(step, s.tokens_since_log, **shown)
    extra = {'learning_rate': float(self.schedule(step)), 'skipped_updates': s.meta['skipped_updates']}
    self.writer.write(step, 'train', {**scalars, **rates, **extra})
    s.meta['train_seconds'] += time.perf_counter() - s.t0
    s.meta['train_tokens'] += s.tokens_since_log
    s.tokens_since_log, s.t0 = 0, time.perf_counter()

  def _validate(self, step: int) -> None:
    t, s = self.config.train, self.state
    self._check_finite()
    jax.block_until_ready(s.train)
    s.meta['train_seconds'] += time.perf_counter() - s.t0  # training time only: evaluation is not counted
    ev = results.evaluate(
      self.cfg,
      self.config,
      s.train.params,
      self.prepared,
      'validation',
      len(self.seeds),
      t.eval_max_sentences,
      t.eval_beam_size,
      self.mesh,
    )
    self.writer.write(step, 'validation', {**ev, 'train_seconds': s.meta['train_seconds']})
    if self.heatmaps is not None:
      self.heatmaps.write(self.writer, step, s.train.params)
    skipped = (
      f'; {ev["skipped_long"]} sentence(s) longer than data.eval_max_*_length skipped' if ev['skipped_long'] else ''
    )
    if ev['attention_skipped_long']:  # evaluation.ATTENTION_CELLS
      skipped += f'; attention statistics without {ev["attention_skipped_long"]} very long sentence(s)'
    self.progress.message(
      f'step {step} validation: BLEU {np.mean(ev["bleu"]):.2f} chrF {np.mean(ev["chrf"]):.2f} '
      f'ppl {np.mean(ev["perplexity"]):.2f} (mean of {len(self.seeds)} seed(s)){skipped}'
    )
    if s.meta['best_bleu'] is None or np.mean(ev['bleu']) > s.meta['best_bleu']:
      s.meta['best_bleu'] = float(np.mean(ev['bleu']))
      self._save(step, best=True)
    s.t0 = time.perf_counter()

  def _check_finite(self) -> None:
    """Host check, at log and checkpoint points only: stop (or count) non-finite updates."""
    s = self.state
    s.meta['skipped_updates'] = self.skipped_before + int(s.bad_count)
    if self.config.train.nonfinite == 'stop' and int(s.first_bad) >= 0:
      self.ckpt.wait()
      raise guards.NonFiniteError(
        f'non-finite loss, gradient or parameters at step {int(s.first_bad)}; stopped without saving (last good '
        f'checkpoint: step {self.ckpt.latest_step()}); lower train.learning_rate or set train.nonfinite=skip to '
        'skip such updates'
      )

  def _save(self, step: int, best: bool = False) -> None:
    s = self.state
    self._check_finite()
    if not s.described and parallel.is_main_process():
      checkpoints.save_config(self.workdir, self.config, dataclasses.asdict(self.cfg))
      data.save_tokenizers(self.prepared, os.path.join(self.workdir, 'vocab'))
    s.described = True
    s.meta['iterators'] = [it.state() for it in self.iterators]
    self.ckpt.save(step, s.train, s.meta, best=best)
