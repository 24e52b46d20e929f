"""Metrics as JSON lines and TensorBoard event files (tensorboardX: no TensorFlow; scalars, images and the
HParams dashboard's session), and a progress bar."""

from __future__ import annotations

import json
import os
import sys
import time

import jax
import numpy as np

from attnmt import progress

# The durations JAX reports for a compilation (jax._src.dispatch): tracing, lowering to MLIR and the backend's
# compile. Traces nest (a jitted function traced inside another), so the time left out is the union of the spans.
COMPILE_EVENTS = (
  '/jax/core/compile/jaxpr_trace_duration',
  '/jax/core/compile/jaxpr_to_mlir_module_duration',
  '/jax/core/compile/backend_compile_duration',
)


class MetricsWriter:
  """Appends `{"step": s, "split": ..., **scalars}` lines to metrics.jsonl and mirrors them to TensorBoard."""

  def __init__(self, workdir: str, enabled: bool = True):
    self.enabled = enabled
    if not enabled:
      return
    os.makedirs(workdir, exist_ok=True)
    self._file = open(os.path.join(workdir, 'metrics.jsonl'), 'a')
    from tensorboardX import SummaryWriter  # imported here: only the writing process needs it

    self._tb = SummaryWriter(os.path.join(workdir, 'tensorboard'))

  def write(self, step: int, split: str, scalars: dict) -> None:
    if not self.enabled:
      return
    clean = {k: _plain(v) for k, v in scalars.items()}
    self._file.write(json.dumps({'step': int(step), 'split': split, **clean}) + '\n')
    self._file.flush()
    for k, v in clean.items():
      if isinstance(v, (int, float)):
        self._tb.add_scalar(f'{split}/{k}', v, step)
      elif isinstance(v, list) and v and all(isinstance(x, (int, float)) for x in v):
        for i, x in enumerate(v):
          self._tb.add_scalar(f'{split}/{k}/seed{i}', x, step)

  def figure(self, tag: str, figure, step: int) -> None:
    """A matplotlib figure as a TensorBoard image (rendered with Agg, stored as PNG)."""
    if self.enabled:
      self._tb.add_figure(tag, figure, step, close=True)

  def hparams(self, settings: dict, metrics: dict, step: int) -> None:
    """The run's settings and final metrics for TensorBoard's HParams dashboard: one session in the
    `tensorboard/hparams` folder, so that a sweep's variants (each its own workdir) line up as rows when
    TensorBoard reads the sweep's folder. Settings whose value is not a bool, number or string are written
    as text; None as 'None'."""
    if not self.enabled:
      return
    plain = {k: v if isinstance(v, (bool, int, float, str)) else str(v) for k, v in settings.items()}
    self._tb.add_hparams(
      plain, {f'hparams/{k}': float(v) for k, v in metrics.items()}, name='hparams', global_step=step
    )

  def flush(self) -> None:
    if self.enabled:
      self._tb.flush()

  def close(self) -> None:
    if self.enabled:
      self._file.close()
      self._tb.close()


def _plain(v):
  if isinstance(v, np.ndarray) or hasattr(v, 'tolist'):
    v = np.asarray(v).tolist()
  return v


class Progress:
  """Training progress: a tqdm bar of steps (attnmt.progress: redrawn on a terminal, a plain line per 10 %
  or per minute in a log) with the loss, steps/s and tokens/s, and one line per evaluation (`message`).

  The rate behind the ETA is measured from the end of the first step (`compiled`): that step compiles
  the training step and would otherwise dominate the rate. Every later compilation (the decoders', in the
  first evaluation; a new batch width) is left out of it too, as JAX reports it (`jax.monitoring`), while
  evaluations count in it: once one has happened, the ETA is the wall-clock time left. Training ends at step `total` or at the time
  budget's end (`deadline`), whichever comes first: when the budget ends it first at the rate so far, the
  bar's total is the step reached by then, and its ETA is the budget left."""

  def __init__(
    self,
    total: int,
    start: int = 0,
    stream=None,
    enabled: bool = True,
    budget_seconds: float = 0.0,
    clock=time.monotonic,
  ):
    self.total, self.enabled = total, enabled
    self.stream = sys.stderr if stream is None else stream
    self._t, self._step = time.perf_counter(), start
    self._clock = clock
    self.deadline = clock() + budget_seconds if budget_seconds else None
    self.bar = progress.bar(
      total, 'train', 'step', self.stream, enabled, initial=start, smoothing=0, clock=clock, every_seconds=300
    )
    self._spans = []  # (start, end) of the compilations left out so far
    jax.monitoring.register_event_duration_secs_listener(self._on_event)

  def _on_event(self, event: str, seconds: float, **unused) -> None:
    """JAX reports each compilation's trace, lowering and compile time as it ends: the part of that span not
    already left out (an inner trace inside an outer one) is left out of the rate behind the ETA."""
    if event not in COMPILE_EVENTS:
      return
    end = self._clock()
    start = end - seconds
    covered = sum(max(0.0, min(end, e) - max(start, s)) for s, e in self._spans)
    self.bar.exclude(seconds - covered)
    merged = []  # the spans stay disjoint: the new one absorbs those it overlaps
    for s, e in sorted(self._spans + [(start, end)]):
      if merged and s <= merged[-1][1]:
        merged[-1] = (merged[-1][0], max(merged[-1][1], e))
      else:
        merged.append((s, e))
    self._spans = merged

  def compiled(self, step: int) -> None:
    """The first step of this process is done (and compiled): the rate is measured from here."""
    self.bar.update(step - self.bar.n)
    self.bar.start_rate()

  def update(self, step: int, tokens: float, **scalars) -> dict:
    """Moves the bar to `step` (`tokens` trained since the last update, `scalars` shown beside it); returns
    the steps/s and tokens/s since the last update."""
    now = time.perf_counter()
    dt = max(now - self._t, 1e-9)
    rates = {'steps_per_s': (step - self._step) / dt, 'tokens_per_s': tokens / dt}
    self._t, self._step = now, step
    postfix = {k: f'{v:.4g}' for k, v in scalars.items()}
    postfix['tok/s'] = f'{rates["tokens_per_s"]:.0f}'
    total = self._total_at(step, self.bar.rate(step))
    if total != self.total:
      postfix['budget'] = f'ends the run at ~step {total} of {self.total}'
    self.bar.total = total
    self.bar.set_postfix(postfix, refresh=False)
    self.bar.update(step - self.bar.n)
    return rates

  def _total_at(self, step: int, rate) -> int:
    """The step training ends at: `total`, or the step `rate` reaches when the budget ends first."""
    if self.deadline is None or not rate:
      return self.total
    budget_left = max(self.deadline - self._clock(), 0.0)
    return min(self.total, step + int(rate * budget_left))

  def message(self, text: str) -> None:
    """A line above the bar (an evaluation's scores)."""
    if self.enabled:
      progress.write(text, self.stream)

  def close(self) -> None:
    try:
      jax.monitoring.unregister_event_duration_listener(self._on_event)
    except (AssertionError, ValueError):  # closed before
      pass
    self.bar.close()
