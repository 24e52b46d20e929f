"""Run guards: a graceful stop on SIGTERM / Ctrl-C, and non-finite losses caught without a host sync per step.

Signals: inside the training loop (`StopSignals`) the first SIGTERM or Ctrl-C asks the loop to save and stop.
Everywhere else (data preparation, the final evaluation, analysis) `exit_on_signals` makes them raise
`Interrupted`, which the entry points turn into one line and status 128 + signal. Within a `saving()` block
(a checkpoint being written) a signal waits for the block's end, so no save is cut off by one.
"""

from __future__ import annotations

import contextlib
import signal

import jax
import jax.numpy as jnp


class TrainingStopped(Exception):
  """Raised after a signal once the run has saved a checkpoint; `exit_code` is 128 + the signal number."""

  def __init__(self, message: str, signum: int):
    super().__init__(message)
    self.exit_code = 128 + signum


class Interrupted(KeyboardInterrupt):
  """SIGINT or SIGTERM outside the training loop's own handling; `exit_code` is 128 + the signal number. A
  KeyboardInterrupt, so that no `except Exception` (a restore judging damage, say) takes it for an error."""

  def __init__(self, signum: int):
    super().__init__(signum)
    self.signum, self.exit_code = signum, 128 + signum


class _Saving:
  depth = 0  # nested saving() blocks now open
  pending = None  # a signal that arrived inside one


@contextlib.contextmanager
def saving():
  """Defers SIGINT and SIGTERM for the block: a signal arriving inside it raises Interrupted at its end."""
  _Saving.depth += 1
  try:
    yield
  finally:
    _Saving.depth -= 1
  if _Saving.depth == 0 and _Saving.pending is not None:
    signum, _Saving.pending = _Saving.pending, None
    raise Interrupted(signum)


def _interrupt(signum, frame):
  if _Saving.depth:
    _Saving.pending = signum
    return
  raise Interrupted(signum)


def exit_on_signals() -> None:
  """From now on SIGINT and SIGTERM raise Interrupted (deferred within `saving()`); a no-op off the main thread."""
  for s in StopSignals.SIGNALS:
    try:
      signal.signal(s, _interrupt)
    except ValueError:
      pass


def ignore_signals() -> None:
  """SIGINT and SIGTERM are ignored from now on: a process finishing its saves before it exits."""
  for s in StopSignals.SIGNALS:
    with contextlib.suppress(ValueError):
      signal.signal(s, signal.SIG_IGN)


class NonFiniteError(RuntimeError):
  """A NaN or infinite loss, gradient or updated parameter; the run stopped before writing any checkpoint
  after it."""


class StopSignals:
  """Within the `with` block, SIGTERM and SIGINT only set `requested`; the training loop stops itself."""

  SIGNALS = (signal.SIGTERM, signal.SIGINT)

  def __init__(self):
    self.requested = None  # the signal number once one arrived
    self._previous = {}

  def _handle(self, signum, frame):
    if self.requested is not None and signum == signal.SIGINT:
      _interrupt(signum, frame)  # a second Ctrl-C stops at once, or once the save under way is written
      return
    self.requested = signum

  def __enter__(self):
    for s in self.SIGNALS:
      try:
        self._previous[s] = signal.signal(s, self._handle)
      except ValueError:  # not the main thread: leave signals alone
        pass
    return self

  def __exit__(self, *exc):
    for s, handler in self._previous.items():
      signal.signal(s, handler)
    return False


def all_finite(tree) -> jax.Array:
  """Whether every element of every array in `tree` is finite (one boolean)."""
  leaves = jax.tree.leaves(tree)
  return jnp.all(jnp.stack([jnp.all(jnp.isfinite(x)) for x in leaves])) if leaves else jnp.bool_(True)


def guard_step(step_fn, skip_nonfinite: bool):
  """Wraps a (state, batch) -> (state, metrics) step: metrics['finite'] says whether the loss, the gradient
  norm and the updated parameters are all finite (a finite loss can still give NaN parameters, e.g. with a
  NaN learning rate); with `skip_nonfinite` such an update is dropped (parameters and optimiser state kept,
  step and RNG advanced so the data stay in step)."""

  def guarded(state, batch):
    new, metrics = step_fn(state, batch)
    finite = jnp.isfinite(metrics['loss']) & jnp.isfinite(metrics['grad_norm']) & all_finite(new.params)
    if skip_nonfinite:
      new = new.replace(
        params=jax.tree.map(lambda n, o: jnp.where(finite, n, o), new.params, state.params),
        opt_state=jax.tree.map(lambda n, o: jnp.where(finite, n, o), new.opt_state, state.opt_state),
      )
    return new, {**metrics, 'finite': finite}

  return guarded


@jax.jit
def track_nonfinite(first_bad_step, bad_count, finite_K, step):
  """Device-side bookkeeping: the first step with a non-finite seed (-1 if none) and how many seed-updates were."""
  any_bad = ~jnp.all(finite_K)
  first = jnp.where((first_bad_step < 0) & any_bad, step, first_bad_step)
  return first, bad_count + jnp.sum(~finite_K)
