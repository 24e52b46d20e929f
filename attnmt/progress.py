"""Progress bars (tqdm) for training, corpus preparation and the analysis's decoding.

On a terminal a bar is redrawn in place. In a log file (any stream that is not a terminal) carriage
returns would pile up on one line, so the bar prints a plain line instead, at most one per
`every_percent` of the total or per `every_seconds`, and a last one when it closes.

The rate behind the ETA can be restarted (`Bar.start_rate`): training starts it after its first step, so
that the compilation of the step, which takes as long as many steps, does not inflate the ETA.
"""

from __future__ import annotations

import sys
from typing import Iterable, Iterator, Optional, Sequence

import tqdm

STAGES_FORMAT = '{desc}: {n_fmt}/{total_fmt} stages [{elapsed}]{postfix}'  # no ETA: stages differ in length


class Bar(tqdm.tqdm):
  """tqdm with a restartable rate: after `start_rate()` the rate (and so the ETA) counts only what follows."""

  def __init__(self, *args, clock=None, **kwargs):
    self._rate_start = None
    super().__init__(*args, **kwargs)
    if clock is not None:  # tests drive the bar with a fake clock
      self._time = clock
      self.start_t = self.last_print_t = clock()

  def start_rate(self) -> None:
    """Measure the rate from now on (from the current count)."""
    self._rate_start = (self._time(), self.n)

  def exclude(self, seconds: float) -> None:
    """Leave `seconds` just spent (a one-off, such as a compilation) out of the rate."""
    if self._rate_start is not None:
      t0, n0 = self._rate_start
      self._rate_start = (min(t0 + seconds, self._time()), n0)

  def rate(self, n: Optional[float] = None) -> Optional[float]:
    """Units per second from start_rate to now, were the count `n` (default: the count); None before any."""
    if self._rate_start is None:
      return None
    (t0, n0), n = self._rate_start, self.n if n is None else n
    dt = self._time() - t0
    return (n - n0) / dt if dt > 0 and n > n0 else None

  @property
  def format_dict(self):
    d = super().format_dict
    if self._rate_start is not None and not self.disable:
      d['rate'] = self.rate()
    return d


class LogBar(Bar):
  """A Bar for a stream that is not a terminal: whole lines, no carriage returns, no redraws."""

  def __init__(self, *args, every_percent: float = 10.0, every_seconds: float = 60.0, **kwargs):
    self.every_percent, self.every_seconds = every_percent, every_seconds
    self._printed = None  # (time, n, percent step) of the last line
    kwargs.setdefault('ascii', True)
    super().__init__(*args, miniters=1, mininterval=0, **kwargs)
    if self._printed is not None:  # the first line, timed by the bar's own clock
      self._printed = (self._time(), *self._printed[1:])

  def _percent_step(self) -> int:
    return int(100 * self.n / self.total // self.every_percent) if self.total else 0

  def display(self, msg=None, pos=None):
    now, step = self._time(), self._percent_step()
    if msg == '' or now - getattr(self, 'start_t', now) < self.delay:  # tqdm clearing the bar; or not shown yet
      return False
    if self._printed is not None:
      last_t, last_n, last_step = self._printed
      due = now - last_t >= self.every_seconds or step > last_step or (self.total and self.n >= self.total)
      if self.n == last_n or not due:
        return False
    self.fp.write(self.__str__().rstrip() + '\n')
    self.fp.flush()
    self._printed = (now, self.n, step)
    return True

  def clear(self, nolock=False):
    pass

  def close(self):
    if self.disable:
      return
    if self._time() - getattr(self, 'start_t', 0.0) >= self.delay and (
      self._printed is None or self._printed[1] != self.n
    ):
      self.fp.write(self.__str__().rstrip() + '\n')
      self.fp.flush()
    self.leave = False  # tqdm's own close would end the bar with a newline or a carriage return
    super().close()


def bar(
  total: Optional[float],
  desc: str,
  unit: str = 'it',
  stream=None,
  enabled: bool = True,
  **options,
) -> Bar:
  """A progress bar on `stream` (stderr by default): tqdm redrawn in place on a terminal, a LogBar in a log.
  `options` go to tqdm (initial, delay, bar_format, ...) or LogBar (every_percent, every_seconds) and to
  Bar (clock); `enabled=False` gives a bar that prints nothing (processes other than the first)."""
  stream = sys.stderr if stream is None else stream
  tty = interactive(stream)
  if tty:
    options.pop('every_percent', None)
    options.pop('every_seconds', None)
  cls = Bar if tty else LogBar
  return cls(total=total, desc=desc, unit=unit, file=stream, disable=not enabled, dynamic_ncols=tty, **options)


def interactive(stream=None) -> bool:
  """Whether `stream` (stderr by default) is a terminal, where bars are redrawn in place."""
  stream = sys.stderr if stream is None else stream
  return hasattr(stream, 'isatty') and stream.isatty()


def stages(names: Sequence[str], desc: str, stream=None, delay: float = 1.0) -> Bar:
  """A bar over named stages of unequal length (no ETA): `bar.set_postfix_str(name)` as each starts,
  `bar.update()` as it ends. Shown only once `delay` seconds have passed, so a quick pass prints nothing."""
  return bar(len(names), desc, 'stage', stream, bar_format=STAGES_FORMAT, delay=delay, every_percent=100 / len(names))


def counted(items: Iterable, progress: Bar, size=lambda item: 1) -> Iterator:
  """The items of `items`, advancing `progress` by size(item) after each one has been used."""
  for item in items:
    yield item
    progress.update(size(item))


def write(text: str, stream=None) -> None:
  """A line of text above the bars on `stream` (tqdm.write: the bars are redrawn below it on a terminal)."""
  tqdm.tqdm.write(text, file=sys.stderr if stream is None else stream)
