"""Timing helpers: the machine's matrix-multiply peak, compile time, median wall time of a call.

Every figure is a median over repeated calls, each ended by `block_until_ready`, so asynchronous
dispatch cannot hide work and one slow call (another process waking up) does not move it.
"""
from __future__ import annotations

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


def median_seconds(run_once: Callable[[], Any], steps: int, warmup: int = 2) -> tuple[float, list[float]]:
  """Median wall time of `run_once()` over `steps` calls after `warmup` untimed ones."""
  for _ in range(warmup):
    block(run_once())
  times = []
  for _ in range(steps):
    start = time.perf_counter()
    block(run_once())
    times.append(time.perf_counter() - start)
  return statistics.median(times), times


def matmul_peak(sizes: tuple[int, ...] = (1024, 2048), repeats: int = 10, dtype: str = 'float32') -> dict:
  """The machine's matrix-multiply rate: the best, over square sizes n, of the median n x n `jnp.dot`.

  Measured in the compute dtype, in the same process and run as the model figures, so their
  fraction of this peak stays meaningful when the machine's speed or load changes.
  """
  by_size = {}
  for n in sizes:
    key_a, key_b = jax.random.split(jax.random.key(n))
    a = jax.random.normal(key_a, (n, n), dtype)
    b = jax.random.normal(key_b, (n, n), dtype)
    dot = jax.jit(jnp.dot)
    seconds, _ = median_seconds(lambda: dot(a, b), repeats, warmup=2)
    by_size[str(n)] = 2 * n ** 3 / seconds / 1e9
  return {'gflops': max(by_size.values()), 'gflops_by_size': by_size, 'dtype': dtype, 'repeats': repeats}
