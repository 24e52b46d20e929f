"""Metrics as JSON lines and TensorBoard event files (tensorboardX: no TensorFlow; scalars and images), and a
progress line."""

from __future__ import annotations

import json
import os
import sys
import time

import numpy as np


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
    """A matplotlib figure as a TensorBoard image (rendered with Agg, stored as PNG); the figure is closed."""
    if self.enabled:
      self._tb.add_figure(tag, figure, step, close=True)
    else:
      import matplotlib.pyplot as plt

      plt.close(figure)

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
  """A one-line progress bar with steps/s, tokens/s and an ETA (redrawn on a terminal, one line per update
  otherwise).

  Without a time budget the bar and the ETA count steps against `total`. With `budget_seconds` (training
  ends at whichever comes first: step `total` or the budget's end, `deadline`) they count against the one
  expected to end it at the average rate so far: under a budget that runs out first, the bar is the
  fraction of the budget spent, the ETA the budget left, and the line gives the step the rate reaches by
  then."""

  def __init__(
    self,
    total: int,
    start: int = 0,
    stream=sys.stderr,
    enabled: bool = True,
    budget_seconds: float = 0.0,
    clock=time.monotonic,
  ):
    self.total, self.stream = total, stream if enabled else open(os.devnull, 'w')  # only process 0 prints
    self.tty = hasattr(stream, 'isatty') and stream.isatty()
    self._t, self._step = time.perf_counter(), start
    self._clock, self._begin, self._start = clock, clock(), start
    self.budget_seconds = budget_seconds
    self.deadline = self._begin + budget_seconds if budget_seconds else None

  def update(self, step: int, tokens: float, **scalars) -> dict:
    now = time.perf_counter()
    dt = max(now - self._t, 1e-9)
    rates = {'steps_per_s': (step - self._step) / dt, 'tokens_per_s': tokens / dt}
    self._t, self._step = now, step
    parts = [self._position(step)] + [f'{k} {v:.4g}' for k, v in scalars.items()]
    parts += [f'{rates["steps_per_s"]:.2f} steps/s', f'{rates["tokens_per_s"]:.0f} tok/s']
    line = ' | '.join(parts)
    self.stream.write(('\r' + line) if self.tty else line + '\n')
    self.stream.flush()
    return rates

  def _position(self, step: int) -> str:
    """The bar, where training stands and its ETA: against the budget when it ends training first."""
    elapsed = max(self._clock() - self._begin, 1e-9)
    rate = (step - self._start) / elapsed  # steps per second since this run (re)started, evaluation included
    steps_left = max(self.total - step, 0)
    eta = steps_left / rate if rate > 0 else float('inf')
    if self.deadline is not None:
      budget_left = max(self.deadline - self._clock(), 0.0)
      if budget_left < eta:
        reached = min(self.total, step + int(rate * budget_left))
        return (
          f'{_bar(elapsed / self.budget_seconds)} {elapsed / 60:.1f}/{self.budget_seconds / 60:.1f} min of the '
          f'time budget | step {step} (~{reached} of {self.total} when it ends) | ETA {_clock_time(budget_left)}'
        )
    return f'{_bar(step / max(self.total, 1))} {step}/{self.total} | ETA {_clock_time(eta)}'

  def message(self, text: str) -> None:
    self.stream.write(('\n' if self.tty else '') + text + '\n')
    self.stream.flush()


def _bar(fraction: float, width: int = 24) -> str:
  filled = int(width * min(max(fraction, 0.0), 1.0))
  return f'[{"#" * filled}{"." * (width - filled)}]'


def _clock_time(seconds: float) -> str:
  """h:mm:ss, or '?' before a rate is known."""
  if seconds == float('inf'):
    return '?'
  s = int(round(seconds))
  return f'{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}'
