"""Fewer shapes, compiled ahead: the widths data.train_shapes chooses (against a brute-force search), the shapes a
run will take read from its plans (against the batches it then yields), evaluation batches of one row count per
width, and the step compiled ahead (bit for bit the jitted step's result)."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnmt.data import batching, pipeline
from attnmt.training import shapes


def _split(n=600, seed=1):
  rng = np.random.default_rng(seed)
  src = rng.integers(1, 60, n)
  tgt = np.clip(src + rng.integers(-5, 6, n), 1, None)
  seqs = lambda lens: [list(rng.integers(4, 100, k)) for k in lens]  # noqa: E731
  return pipeline.TokenizedSplit(*pipeline._flatten(seqs(src)), *pipeline._flatten(seqs(tgt)))


def _iterator(data, shuffle=True, state=None, fixed_rows=False, row_multiple=1, **options):
  opts = batching.BatchOptions(**{'batch_size': 32, **options})
  keep = pipeline.length_filter(data, 50, 50)
  return pipeline.BatchIterator(
    data, keep, opts, 7, None if shuffle else 1, shuffle, 'x', state, row_multiple, (0, 1), fixed_rows
  )


def _brute_force(counts, k):
  w = sorted(counts)
  best = None
  for size in range(1, k + 1):
    for rest in itertools.combinations(w[:-1], size - 1):
      chosen = tuple(sorted(rest + (w[-1],)))
      cost = batching.padded_positions(counts, chosen)
      if best is None or cost < best[0]:
        best = (cost, chosen)
  return best


@pytest.mark.parametrize('seed', range(6))
@pytest.mark.parametrize('k', (1, 2, 3, 4))
def test_choose_widths_pads_the_least_of_any_choice(seed, k):
  rng = np.random.default_rng(seed)
  widths = sorted(rng.choice(np.arange(8, 129, 8), size=7, replace=False))
  counts = {int(w): int(rng.integers(1, 500)) for w in widths}
  chosen = batching.choose_widths(counts, k)
  assert len(chosen) <= k and max(chosen) == max(counts) and set(chosen) <= set(counts)
  assert batching.padded_positions(counts, chosen) == _brute_force(counts, k)[0]


def test_padded_positions_and_padded_length_by_hand():
  # 10 rows of width 8 and 5 of 16 pad to 16, 1 row of 24 stays: 15 x 16 + 24 = 264
  assert batching.padded_positions({8: 10, 16: 5, 24: 1}, (16, 24)) == 264
  assert batching.choose_widths({8: 10, 16: 5, 24: 1}, 5) == (8, 16, 24)  # no fewer than there are
  assert batching.padded_length(13, 8, 0, (24, 48)) == 24  # 16, then the smallest width that holds it
  assert batching.padded_length(50, 8, 0, (24, 48)) == 56  # none holds it: its own padded width
  assert batching.padded_length(50, 8, 40, (24, 48)) == 40  # a fixed width wins


def test_the_planned_shapes_are_those_of_the_batches_and_nothing_moves():
  data = _split()
  for make in (
    lambda: _iterator(data),
    lambda: _iterator(data, equal_widths=True, widths=(24, 40, 56)),
    lambda: _iterator(data, shuffle=False, fixed_rows=True, pad_to_multiple=16),
    lambda: _iterator(data, batch_tokens=400, row_multiple=2),
  ):
    it = make()
    for _ in range(3):
      next(it)
    before = it.state()
    planned = it.shapes_ahead(40)
    assert it.state() == before  # reading the plans did not move the iterator
    following = make()
    following.restore(before)
    batches = list(itertools.islice(following, 40))
    assert planned == [(len(b['src']), b['src'].shape[1], b['tgt_in'].shape[1]) for b in batches]
    assert next(it)['index'].tolist() == batches[0]['index'].tolist()


def test_train_widths_hold_every_batch():
  data = _split()
  it = _iterator(data, equal_widths=True)
  counts = shapes.width_counts(it.shapes_ahead(60))
  widths = batching.choose_widths(counts, 2)
  rounded = _iterator(data, equal_widths=True, widths=widths)
  seen = {b['src'].shape[1] for b in itertools.islice(rounded, 60)}
  assert seen <= set(widths) and len(seen) <= 2
  # the same examples in the same order, only wider
  rounded = _iterator(data, equal_widths=True, widths=widths)
  for a, b in zip(itertools.islice(_iterator(data, equal_widths=True), 60), itertools.islice(rounded, 60)):
    assert a['index'].tolist() == b['index'].tolist()
    assert b['src'].shape[1] >= a['src'].shape[1]
    np.testing.assert_array_equal(b['src'][:, : a['src'].shape[1]], a['src'])
    assert not b['src'][:, a['src'].shape[1] :].any()


def test_evaluation_batches_take_one_row_count_per_width():
  data = _split(n=300)
  it = _iterator(data, shuffle=False, fixed_rows=True)
  rows = {}
  real = []
  for b in it:
    rows.setdefault(b['src'].shape[1], set()).add(len(b['src']))
    empty = b['index'] < 0
    assert (b['src_len'][empty] == 0).all() and (b['tgt_len'][empty] == 0).all() and not b['src'][empty].any()
    real += b['index'][~empty].tolist()
  assert all(len(r) == 1 for r in rows.values())
  assert sorted(real) == pipeline.length_filter(data, 50, 50).tolist()  # every sentence once, none added
  # a very long width gets as many rows as EVAL_BATCH_POSITIONS allows
  opts = batching.BatchOptions(batch_size=64)
  assert (
    batching.eval_rows(64, opts) == 64 and batching.eval_rows(1024, opts) == 8 and batching.eval_rows(9000, opts) == 1
  )


class _Counted:
  """A jitted function whose lowerings are counted."""

  def __init__(self, fn):
    self.fn, self.lowered = fn, 0

  def lower(self, *args):
    self.lowered += 1
    return self.fn.lower(*args)

  def __call__(self, *args):
    return self.fn(*args)


def _toy_step():
  def step(state, batch):
    x = batch['src'].astype(jnp.float32).sum((1, 2)) + batch['tgt_in'].astype(jnp.float32).mean((1, 2))
    return {'w': state['w'] * 0.5 + x[:, None]}, {'loss': x}

  return _Counted(jax.jit(step, donate_argnums=0))


def _batch(rows, s, t, seed):
  rng = np.random.default_rng(seed)
  return {
    'src': rng.integers(0, 9, (2, rows, s)).astype(np.int32),
    'src_len': np.full((2, rows), s, np.int32),
    'tgt_in': rng.integers(0, 9, (2, rows, t)).astype(np.int32),
    'tgt_out': rng.integers(0, 9, (2, rows, t)).astype(np.int32),
    'tgt_len': np.full((2, rows), t, np.int32),
  }


def test_the_step_compiled_ahead_computes_what_the_jitted_step_does():
  fn = _toy_step()
  planned = [(4, 8, 8), (4, 16, 16), (4, 8, 8), (4, 24, 16)]
  start = {'w': jnp.ones((2, 3))}
  ahead = shapes.Ahead(fn, start, planned, ('src', 'src_len', 'tgt_in', 'tgt_out', 'tgt_len'), threads=2)
  assert ahead.shapes == [(4, 8, 8), (4, 16, 16), (4, 24, 16)]
  state_a, state_j = {'w': jnp.ones((2, 3))}, {'w': jnp.ones((2, 3))}
  for i, shape in enumerate(planned + [(4, 32, 8)]):  # the last one was not planned: jit's own
    batch = _batch(*shape, seed=i)
    program = ahead.program(batch)
    assert (program is fn) == (shape == (4, 32, 8))
    state_a, m_a = program(state_a, batch)
    state_j, m_j = fn.fn(state_j, batch)
    np.testing.assert_array_equal(np.asarray(state_a['w']), np.asarray(state_j['w']))
    np.testing.assert_array_equal(np.asarray(m_a['loss']), np.asarray(m_j['loss']))
  ahead.close()
  assert fn.lowered == 3
  again = shapes.Ahead(fn, start, planned, ('src', 'src_len', 'tgt_in', 'tgt_out', 'tgt_len'))
  again.program(_batch(4, 24, 16, 0))
  again.close()
  assert fn.lowered == 3  # the same function and state: its programs are reused, nothing is traced again


def test_a_closed_run_leaves_no_program_half_made():
  fn = _toy_step()
  keys = ('src', 'src_len', 'tgt_in', 'tgt_out', 'tgt_len')
  planned = [(2, 8 * k, 8) for k in range(1, 30)]
  ahead = shapes.Ahead(fn, {'w': jnp.ones((2, 3))}, planned, keys, threads=1)
  ahead.close()  # at once: most shapes are neither lowered nor compiled
  again = shapes.Ahead(fn, {'w': jnp.ones((2, 3))}, planned, keys, threads=2)
  state = {'w': jnp.ones((2, 3))}
  for shape in planned:  # every shape gets a program (compiled again, or jit's own): none waits forever
    state, _ = again.step(state, _batch(*shape, seed=0))
  again.close()
  assert np.isfinite(np.asarray(state['w'])).all()


def _tiny(tmp_path, train_shapes, steps=6):
  from experiments.configs import tiny

  config = tiny.get_config()
  config.data.data_dir = str(tmp_path / 'data')
  config.data.fixed_source_length = config.data.fixed_target_length = 0  # bucketed widths: several shapes
  config.data.pad_to_multiple = 4
  config.data.train_shapes = train_shapes
  config.train.seeds = '0,1'
  config.train.num_steps = config.train.checkpoint_every = steps
  config.train.eval_every = 0
  return config


@pytest.mark.slow
def test_a_run_with_fewer_shapes_trains_the_same_examples_to_the_same_loss(tmp_path, capsys):
  from attnmt.training import trainer

  every = trainer.train_and_evaluate(_tiny(tmp_path, 0), str(tmp_path / 'every'))
  assert 'data.train_shapes' not in capsys.readouterr().out
  fewer = trainer.train_and_evaluate(_tiny(tmp_path, 2), str(tmp_path / 'fewer'))
  line = [x for x in capsys.readouterr().out.splitlines() if x.startswith('data.train_shapes=2')]
  assert len(line) == 1 and 'shape(s) to compile instead of' in line[0] and '% padded positions' in line[0]
  # padding is masked (tests/model/test_seq2seq.py): only the rounding of wider programs differs, which Adam's
  # first steps amplify where a gradient is near zero
  np.testing.assert_allclose(fewer['test_perplexity'], every['test_perplexity'], rtol=1e-3)
  # a resumed run may change it: more steps with other widths go on from the checkpoint
  trainer.train_and_evaluate(_tiny(tmp_path, 3, steps=8), str(tmp_path / 'fewer'))
  assert 'Resumed' in capsys.readouterr().out


@pytest.mark.slow
def test_training_and_evaluation_compile_nothing_on_the_main_thread(tmp_path):
  """Every program a run needs (its steps' shapes, the validation and test decoder and loss per width) is
  compiled ahead on the background threads; the loop and the evaluation only wait for them."""
  import logging
  import threading

  from attnmt.training import trainer

  records = []

  class Keep(logging.Handler):
    def emit(self, record):
      records.append((record.threadName, record.getMessage()))

  config = _tiny(tmp_path, 0)
  config.train.eval_every = 3
  trainer._seed_functions.cache_clear()  # nothing this process compiled before for the same model
  shapes._READY.clear()
  logger = logging.getLogger('jax._src.interpreters.pxla')  # 'Compiling jit(...)': at DEBUG without log_compiles
  handler, level = Keep(level=logging.DEBUG), logger.level
  logger.addHandler(handler)
  logger.setLevel(logging.DEBUG)
  try:
    trainer.train_and_evaluate(config, str(tmp_path / 'run'))
  finally:
    logger.removeHandler(handler)
    logger.setLevel(level)
  compiled = [
    (who, msg.split(' with ')[0].removeprefix('Compiling ')) for who, msg in records if msg.startswith('Compiling jit(')
  ]
  ahead = {'jit(mapped)', 'jit(greedy)', 'jit(_batch_loss)'}
  assert not [what for who, what in compiled if what in ahead and who == threading.main_thread().name]
  # the evaluation's programs were made ahead (an identical program this process compiled before is reused
  # without a log line, so they are counted here, not in the log)
  made = {call.fn.__name__: future for (call, _), future in shapes._READY.items()}
  assert {'greedy', '_batch_loss'} <= set(made)
  assert all(f.done() and f.exception() is None for f in shapes._READY.values())
  steps = [who for who, what in compiled if what == 'jit(mapped)']
  assert len(steps) > 1 and set(steps) == {'lower'}  # several shapes, each once, all ahead


@pytest.mark.parametrize('keep_evaluation', (True, False))
def test_the_evaluation_programs_are_there_or_fall_back_after_training_ends_early(keep_evaluation):
  """Training can end (close) before the lowering thread reached the evaluation's programs: with
  keep_evaluation it still makes them, without it they fall back to jit; either way nobody waits forever."""

  @jax.jit
  def evaluate(x):
    return jnp.tanh(x).sum(axis=-1)

  fn = _toy_step()
  sizes = range(1, 25)
  also = [(shapes.Call(evaluate), (jax.ShapeDtypeStruct((n, 3), jnp.float32),)) for n in sizes]
  ahead = shapes.Ahead(fn, {'w': jnp.ones((2, 3))}, [(2, 8 * k, 8) for k in range(1, 8)], ('src',), 1, also)
  ahead.close(keep_evaluation=keep_evaluation)  # at once
  for n in sizes:
    x = np.arange(3 * n, dtype=np.float32).reshape(n, 3) / 10
    np.testing.assert_allclose(np.asarray(shapes.run(shapes.Call(evaluate), x)), np.tanh(x).sum(-1), rtol=1e-6)
  if keep_evaluation:
    ahead._lowering.join(timeout=120)
    assert all(shapes._READY[(shapes.Call(evaluate), shapes._signature(s))].result() for _, s in also)
  else:
    assert not [key for key in shapes._READY if key[0] == shapes.Call(evaluate)]  # none kept half made
