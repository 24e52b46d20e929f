"""The shapes a run's training step takes, known before it trains: fewer of them, compiled ahead.

Every distinct batch shape compiles the training step again (on an H100 about 17 s for the main job's 5-seed
step, against 5 ms to run it: benchmarks/README.md, "On a GPU"). The batch plans are a pure function of the
lengths, the options, the seeds and the epoch (attnmt.data.batching), so the shapes of every step are known
before the first one:

- `choose_widths` (data.train_shapes = k > 0) reads the whole run's batches and picks at most k widths that cost
  the fewest padded positions (batching.choose_widths); every batch rounds up to one of them.
- `Ahead` lowers the step for each shape the remaining steps take, in the order they first appear, on one
  background thread, and compiles them on a pool of threads (XLA compiles without holding Python's lock), while
  the loop trains on the shapes already compiled. A step whose shape was not planned falls back to jit.
"""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import threading
import weakref
from typing import Callable, Optional

import jax

from attnmt.data import batching
from attnmt.training import row_threads
from attnmt.training import seeds as seed_axis


def stacked_shapes(iterators: list, steps: int) -> list[tuple[int, int, int]]:
  """(rows, source width, target width) of the next `steps` stacked batches of the seeds' `iterators`
  (seeds.stack_batches pads every seed's batch to the widest), read from the plans: nothing moves."""
  per_seed = [it.shapes_ahead(steps) for it in iterators]
  return [tuple(max(dim) for dim in zip(*step)) for step in zip(*per_seed)]


def width_counts(shapes: list[tuple[int, int, int]]) -> collections.Counter:
  """Width -> positions (rows x steps) that take it, source and target widths together."""
  counts = collections.Counter()
  for rows, s, t in shapes:
    counts[s] += rows
    counts[t] += rows
  return counts


def choose_widths(prepared, d, seeds: list[int], num_steps: int, num_shards: int = 1) -> tuple[tuple, str]:
  """The training widths for data.train_shapes (empty when it is 0 or fixed widths set the shape), read from the
  whole run's batches (so a resumed run gets the same), and one line saying what they cost."""
  k = d.train_shapes
  if not k or (d.fixed_source_length and d.fixed_target_length):
    return (), ''
  planned = stacked_shapes(seed_axis.training_batches(prepared, d, seeds, num_shards=num_shards), num_steps)
  counts = width_counts(planned)
  widths = batching.choose_widths(counts, k)
  before = sum(w * n for w, n in counts.items())
  after = batching.padded_positions(counts, widths)

  rounded = {(batching.round_up(s, widths), batching.round_up(t, widths)) for _, s, t in planned}
  shapes = (len({(s, t) for _, s, t in planned}), len(rounded))
  line = (
    f'data.train_shapes={k}: training batches take the widths {", ".join(map(str, widths))}: {shapes[1]} shape(s) '
    f'to compile instead of {shapes[0]}, {100 * (after - before) / max(before, 1):+.1f} % padded positions'
  )
  return widths, line


def _spec(x) -> jax.ShapeDtypeStruct:
  return jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=getattr(x, 'sharding', None), weak_type=_weak(x))


def compile_threads() -> int:
  """Threads that compile at once: the cores this process may use (one in a CPU sweep's per-core child)."""
  return row_threads.usable_cores()


@dataclasses.dataclass(frozen=True)
class Call:
  """A jitted function with its static arguments: `fn(*head, *dynamic, **static)`; its compiled program takes
  the `dynamic` arguments alone."""

  fn: Callable
  head: tuple = ()  # static positional arguments, before the dynamic ones (the model's config)
  static: tuple = ()  # static keyword arguments, as (name, value) pairs

  @classmethod
  def of(cls, fn: Callable, *head, **static) -> 'Call':
    return cls(fn, head, tuple(sorted(static.items())))

  def lower(self, *specs):
    return self.fn.lower(*self.head, *specs, **dict(self.static))

  def __call__(self, *dynamic):
    return self.fn(*self.head, *dynamic, **dict(self.static))


def _signature(tree) -> tuple:
  """What a compiled program is typed by: the tree's structure and each leaf's shape, dtype, weak type and
  placement (None: the default device, as for numpy arrays and the specs of programs_ahead)."""
  leaves, structure = jax.tree.flatten(tree)
  return structure, tuple((tuple(x.shape), str(x.dtype), _weak(x), _placement(x)) for x in leaves)


def _placement(x):
  sharding = getattr(x, 'sharding', None)
  if sharding is None or (len(sharding.device_set) == 1 and sharding.device_set == {jax.devices()[0]}):
    return None
  return sharding


def _weak(x) -> bool:
  """Whether `x` (an array or a spec) is weakly typed: a jit program is typed by it too."""
  return bool(getattr(x, 'weak_type', False)) or bool(getattr(jax.typeof(x), 'weak_type', False))


# Programs compiled ahead for evaluation: (Call, signature) -> Future of the compiled program. A run's Ahead
# fills it; `run` reads it.
_READY: dict[tuple, concurrent.futures.Future] = {}


def run(call: Call, *dynamic):
  """`call` on `dynamic`, by the program compiled ahead for these shapes when there is one (waiting for it while it
  compiles), else by jit as usual (inside a trace, always)."""
  if not any(isinstance(x, jax.core.Tracer) for x in jax.tree.leaves(dynamic)):
    future = _READY.get((call, _signature(dynamic)))
    if future is not None:
      try:
        program = future.result()
      except Exception:  # noqa: BLE001 - jit's own call below raises it, with its own message
        program = None
      if program is not None:
        return program(*dynamic)
  return call(*dynamic)


class Ahead:
  """The training step compiled for the planned batch shapes, ahead of the steps that need them, and the
  evaluation's programs after them.

      ahead = Ahead(step_fn, state, planned, batch_keys, also)   # starts compiling in the background
      state, metrics = ahead.step(state, batch)                  # waits for its shape's program, or jit's own

  `planned`: (rows, source width, target width) of the coming steps in order (stacked_shapes). `state` is read
  for its shapes, dtypes and placement only. `also`: (Call, argument specs) pairs (evaluation_programs), whose
  programs `run` then uses."""

  def __init__(
    self,
    step_fn: Callable,
    state,
    planned: list[tuple[int, int, int]],
    batch_keys: tuple,
    threads: Optional[int] = None,
    also: tuple = (),
  ):
    self._fn = step_fn
    self._state_spec = jax.tree.map(_spec, state)
    self._num_seeds = jax.tree.leaves(state)[0].shape[0]
    self._keys = batch_keys
    order = list(dict.fromkeys(planned))  # distinct, in the order the steps first need them
    self.shapes = order
    # A process that trains the same variant again (a sweep's rounds, the API, the tests) reuses its programs,
    # as jit's own cache would: kept per step function, for as long as the function lives.
    known = _PROGRAMS.setdefault(step_fn, {})
    state_key = (jax.tree.structure(self._state_spec), tuple(jax.tree.leaves(self._state_spec)))
    self._programs, todo = {}, []
    for shape in order:
      key = (state_key, shape)
      if key not in known:
        known[key] = concurrent.futures.Future()
        todo.append(((known, key), lambda shape=shape: self._fn.lower(self._state_spec, self._batch_spec(*shape))))
      self._programs[shape] = known[key]
    for call, specs in also:
      key = (call, _signature(specs))
      if key not in _READY:
        _READY[key] = concurrent.futures.Future()
        todo.append(((_READY, key), lambda call=call, specs=specs: call.lower(*specs)))
    self._lock, self._queued = threading.Lock(), []
    self._closed = False  # training is over: no more step programs
    self._drop_evaluation = False  # nor the evaluation's
    self._lowered = False  # the lowering thread is done
    self._shut = False  # the pool takes nothing more
    self._pool = concurrent.futures.ThreadPoolExecutor(threads or compile_threads(), thread_name_prefix='compile')
    self._lowering = threading.Thread(target=self._lower_all, args=(todo,), name='lower', daemon=True)
    self._lowering.start()

  def _batch_spec(self, rows: int, s: int, t: int) -> dict:
    k, i32 = self._num_seeds, jax.numpy.int32
    shapes = {
      'src': (k, rows, s),
      'src_len': (k, rows),
      'tgt_in': (k, rows, t),
      'tgt_out': (k, rows, t),
      'tgt_len': (k, rows),
      'alignment': (k, rows, t, s),
    }
    return {key: jax.ShapeDtypeStruct(shapes[key], i32) for key in self._keys}

  def _lower_all(self, todo: list) -> None:
    """Lowers (traces) each program in turn on this thread and hands its compilation to the pool. Every program
    it does not hand over (no longer wanted, or failed to trace) is resolved at once, so nobody waits for it."""
    handed = set()
    try:
      for (where, key), lower in todo:
        if self._unwanted(where):
          continue
        try:
          lowered = lower()
        except Exception as e:  # it fails to trace: the caller's own call raises it where it is readable
          where[key].set_exception(e)
          continue
        with self._lock:
          if not (self._unwanted(where) or self._shut):
            self._queued.append(((where, key), self._pool.submit(_compile_into, lowered, where[key])))
            handed.add(key)
    finally:
      with self._lock:
        for (where, key), _ in todo:
          if key not in handed:
            _forget(where, key)
        self._lowered = True
        if self._closed:
          self._shut_down()

  def _unwanted(self, where: dict) -> bool:
    return self._drop_evaluation if where is _READY else self._closed

  def _shut_down(self) -> None:
    self._shut = True
    self._pool.shutdown(wait=False)

  def program(self, batch: dict) -> Callable:
    """The compiled program for `batch`'s shape (waiting for it), or the jitted step for a shape not planned."""
    src = batch['src']
    future = self._programs.get((src.shape[1], src.shape[2], batch['tgt_in'].shape[2]))
    if future is None:
      return self._fn
    try:
      return future.result()
    except Exception:  # noqa: BLE001 - jit's own call will raise it, with its own message
      return self._fn

  def step(self, state, batch: dict):
    return self.program(batch)(state, batch)

  def close(self, keep_evaluation: bool = False) -> None:
    """Stops compiling what has not started: the steps' programs (training is over), and the evaluation's too
    unless `keep_evaluation` (the final evaluation comes after training; the lowering thread then finishes
    them). A compilation under way finishes in the background."""
    with self._lock:
      self._closed, self._drop_evaluation = True, not keep_evaluation
      for (where, key), queued in self._queued:
        if self._unwanted(where) and queued.cancel():
          _forget(where, key)
      if self._lowered or not keep_evaluation:
        self._shut_down()


def _forget(where: dict, key) -> None:
  """A program that will not be compiled: out of its cache, and whoever waits for it falls back to jit."""
  future = where.pop(key, None)
  if future is not None and not future.done():
    future.set_exception(concurrent.futures.CancelledError())


_PROGRAMS: 'weakref.WeakKeyDictionary' = weakref.WeakKeyDictionary()  # step function -> {(state, shape): Future}


def _compile_into(lowered, future: concurrent.futures.Future) -> None:
  try:
    future.set_result(lowered.compile())
  except Exception as e:  # noqa: BLE001 - reported by Ahead.program's fallback
    future.set_exception(e)
