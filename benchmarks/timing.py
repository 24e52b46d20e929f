"""Timing helpers: the machine's matrix-multiply peak, compile time, median wall time of a call.

Every figure is a median over repeated calls, each ended by `block_until_ready`, so asynchronous
dispatch cannot hide work and one slow call (another process waking up) does not move it.

On a shared machine the peak itself moves by 10–20 % within minutes (other tenants), so a fraction
of a peak measured at another moment mixes the machine's drift into the figure. `timed_with_peak`
therefore times square products right before and right after every timed call, and a call's
fraction of peak is taken against the mean rate of its two neighbours (`paired_fractions`).
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from typing import Any, Callable

import jax
import jax.numpy as jnp


def block(tree: Any) -> Any:
  """Waits until every array in `tree` is computed."""
  return jax.block_until_ready(tree)


def compile_timed(jitted, *args, **kwargs) -> tuple[Any, float]:
  """Lowers and compiles a jitted function for these arguments; returns (executable, seconds)."""
  start = time.perf_counter()
  compiled = jitted.lower(*args, **kwargs).compile()
  return compiled, time.perf_counter() - start


def seconds_of(run_once: Callable[[], Any]) -> float:
  """Wall time of one call of `run_once()`, waited for to the end."""
  start = time.perf_counter()
  block(run_once())
  return time.perf_counter() - start


def median_seconds(run_once: Callable[[], Any], steps: int, warmup: int = 2) -> tuple[float, list[float]]:
  """Median wall time of `run_once()` over `steps` calls after `warmup` untimed ones."""
  for _ in range(warmup):
    block(run_once())
  times = [seconds_of(run_once) for _ in range(steps)]
  return statistics.median(times), times


def matmul_peak(sizes: tuple[int, ...] = (1024, 2048), repeats: int = 10, dtype: str = 'float32') -> dict:
  """The machine's matrix-multiply rate: the best, over square sizes n, of the median n x n `jnp.dot`.

  Measured in the compute dtype, in the same process and run as the model figures, so their
  fraction of this peak stays meaningful when the machine's speed or load changes.
  """
  by_size = {}
  for n in sizes:
    seconds, _ = median_seconds(PeakProbe(n, dtype).product, repeats, warmup=2)
    by_size[str(n)] = 2 * n**3 / seconds / 1e9
  return {'gflops': max(by_size.values()), 'gflops_by_size': by_size, 'dtype': dtype, 'repeats': repeats}


class PeakProbe:
  """An n x n `jnp.dot` in the compute dtype, compiled once; `gflops()` is the best of `calls` calls.

  The best of two, not one call: the first product after a training step runs a few per cent
  slower than the next ones (about 4 %, benchmarks/README.md), and a low
  probe would flatter the fraction of peak.
  """

  def __init__(self, n: int = 2048, dtype: str = 'float32', calls: int = 2):
    key_a, key_b = jax.random.split(jax.random.key(n))
    self.n, self.dtype, self.calls = n, dtype, calls
    self._a = jax.random.normal(key_a, (n, n), dtype)
    self._b = jax.random.normal(key_b, (n, n), dtype)
    self._dot = jax.jit(jnp.dot)
    block(self.product())  # compiles it

  def product(self) -> jax.Array:
    """One n x n product, dispatched (not waited for)."""
    return self._dot(self._a, self._b)

  def gflops(self) -> float:
    best = min(seconds_of(self.product) for _ in range(self.calls))
    return 2 * self.n**3 / best / 1e9


@dataclasses.dataclass
class Timed:
  """`steps` call times and the peak measured around them: peaks_gflops[i], peaks_gflops[i + 1]
  were measured right before and right after call i."""

  seconds: list[float]
  peaks_gflops: list[float]
  window: tuple[float, float] = (0.0, 0.0)  # Unix time of the first timed call's start and the last's end

  @property
  def median_s(self) -> float:
    return statistics.median(self.seconds)


class FixedPeak:
  """A probe that measures nothing: every call's peak is the one given (the start's). For runs that must
  leave the device to the timed program alone, such as several processes timed sharing one GPU, where
  every process's probes would load the others' steps."""

  def __init__(self, gflops: float, n: int = 0):
    self.n, self._gflops = n, gflops

  def gflops(self) -> float:
    return self._gflops


def timed_with_peak(run_once: Callable[[], Any], steps: int, warmup: int, probe: PeakProbe) -> Timed:
  """Times `steps` calls of `run_once()` after `warmup` untimed ones, with one peak probe between calls."""
  for _ in range(warmup):
    block(run_once())
  seconds, peaks = [], [probe.gflops()]
  start = time.time()
  for _ in range(steps):
    seconds.append(seconds_of(run_once))
    peaks.append(probe.gflops())
  return Timed(seconds, peaks, (start, time.time()))


def paired_fractions(gflop: float, timed: Timed) -> dict:
  """Each call's rate against the peak of its own moment, the mean of the probes before and after it.

  Returns the median of those per-call fractions (the figure the table shows), the median of the
  per-call peaks, and the lowest and highest fraction over the calls.
  """
  if len(timed.peaks_gflops) != len(timed.seconds) + 1 or not timed.seconds:
    raise ValueError(f'need n >= 1 calls and n + 1 peak probes, got {len(timed.seconds)} and {len(timed.peaks_gflops)}')
  peaks = [(a + b) / 2 for a, b in zip(timed.peaks_gflops, timed.peaks_gflops[1:])]
  fractions = [gflop / s / p for s, p in zip(timed.seconds, peaks)]
  return {
    'fraction_of_peak': statistics.median(fractions),
    'peak_gflops': statistics.median(peaks),
    'fraction_min': min(fractions),
    'fraction_max': max(fractions),
  }
