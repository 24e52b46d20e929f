"""Metrics as JSON lines and TensorBoard event files (tensorboardX: no TensorFlow), and a progress line."""

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

  def close(self) -> None:
    if self.enabled:
      self._file.close()
      self._tb.close()


def _plain(v):
  if isinstance(v, np.ndarray) or hasattr(v, 'tolist'):
    v = np.asarray(v).tolist()
  return v


class Progress:
  """A one-line progress bar with steps/s and tokens/s (redrawn on a terminal, one line per update otherwise)."""

  def __init__(self, total: int, start: int = 0, stream=sys.stderr, enabled: bool = True):
    self.total, self.stream = total, stream if enabled else open(os.devnull, 'w')  # only process 0 prints
    self.tty = hasattr(stream, 'isatty') and stream.isatty()
    self._t, self._step = time.perf_counter(), start

  def update(self, step: int, tokens: float, **scalars) -> dict:
    now = time.perf_counter()
    dt = max(now - self._t, 1e-9)
    rates = {'steps_per_s': (step - self._step) / dt, 'tokens_per_s': tokens / dt}
    self._t, self._step = now, step
    width = 24
    filled = int(width * step / max(self.total, 1))
    parts = ' | '.join(f'{k} {v:.4g}' for k, v in scalars.items())
    line = (
      f'[{"#" * filled}{"." * (width - filled)}] {step}/{self.total} | {parts} | '
      f'{rates["steps_per_s"]:.2f} steps/s | {rates["tokens_per_s"]:.0f} tok/s'
    )
    self.stream.write(('\r' + line) if self.tty else line + '\n')
    self.stream.flush()
    return rates

  def message(self, text: str) -> None:
    self.stream.write(('\n' if self.tty else '') + text + '\n')
    self.stream.flush()
