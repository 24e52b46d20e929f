"""The training step as row blocks on threads (attnmt/training/row_threads.py) and decoding in row blocks
(batch_decoding.decode_in_blocks): the same update, metrics and translations as the one-program versions."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnmt.errors import ConfigError
from attnmt.model import toy
from attnmt.model.config import ModelConfig
from attnmt.training import batch_decoding, parallel, row_threads, settings, train_step
from attnmt.training import seeds as seed_axis
from tests.small_model import SMALL

CFG = ModelConfig(**{**SMALL, 'source_vocab_size': 14, 'target_vocab_size': 14})


def _batch(rows: int, seed: int = 0, gold: bool = False) -> dict:
  batch = toy.reverse_batch(np.random.default_rng(seed), rows, 10, np.ones(6) / 6)
  if gold:  # the reversal's alignment: output t links to source L - 1 - t (EOS to EOS)
    t_width, s_width = batch['tgt_out'].shape[1], batch['src'].shape[1]
    alignment = np.zeros((rows, t_width, s_width), np.int32)
    for r, n in enumerate(batch['src_len']):
      for t in range(n - 1):
        alignment[r, t, n - 2 - t] = 1
      alignment[r, n - 1, n - 1] = 1
    batch['alignment'] = alignment
  return batch


def _stacked(batches: list[dict]) -> dict:
  return {k: jnp.asarray(np.stack([b[k] for b in batches])) for k in batches[0]}


def _spec(tree):
  return jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=getattr(x, 'sharding', None)), tree)


def _close(a, b, rtol=2e-5, atol=2e-6):
  for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
    np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=rtol, atol=atol)


@pytest.mark.parametrize(
  'threads, rows, seeds, weights',
  [
    (2, 8, [0], {}),  # one seed: the squeezed programs
    (2, 8, [0, 1], {}),  # vmapped over seeds
    (3, 8, [0], {}),  # rows that do not divide: empty rows fill the last block
    (2, 8, [0, 3], {'coverage_loss_weight': 0.5, 'alignment_loss_weight': 2.0}),  # means over the whole batch
  ],
)
@pytest.mark.slow
def test_row_blocks_make_the_update_of_the_whole_batch(threads, rows, seeds, weights):
  """Without dropout, `threads` blocks of rows on threads give the one-program step's parameters, optimiser
  state and metrics (two steps, compiled ahead through lower().compile() and called through jit)."""
  optimizer = train_step.make_optimizer(3e-2, clip_norm=0.5)  # the clip acts: the summed gradient's norm matters
  mesh = parallel.make_mesh(1)
  gold = 'alignment_loss_weight' in weights
  batch = _stacked([_batch(rows, seed=s, gold=gold) for s in seeds])
  init, plain = seed_axis.seed_functions(CFG, optimizer, 0.1, mesh=mesh, **weights)
  _, blocks = seed_axis.seed_functions(CFG, optimizer, 0.1, mesh=mesh, threads=threads, **weights)
  assert isinstance(blocks, row_threads.RowThreadedStep)
  expected, got, ahead = init(seeds), init(seeds), init(seeds)
  program = blocks.lower(_spec(ahead), _spec(batch)).compile()
  for _ in range(2):
    expected, m_expected = plain(expected, batch)
    got, m_got = blocks(got, batch)
    ahead, m_ahead = program(ahead, batch)
  assert set(m_got) == set(m_expected) == set(m_ahead)
  assert set(weights) <= {'coverage_loss_weight', 'alignment_loss_weight'}
  for k in m_expected:
    np.testing.assert_allclose(np.asarray(m_got[k]), np.asarray(m_expected[k]), rtol=2e-5, err_msg=k)
    np.testing.assert_allclose(np.asarray(m_ahead[k]), np.asarray(m_expected[k]), rtol=2e-5, err_msg=k)
  np.testing.assert_array_equal(np.asarray(m_got['tokens']), np.asarray(m_expected['tokens']))
  # Adam divides by sqrt(v): a gradient entry near 0, summed in another order, can move its update by a few
  # 1e-5 at this learning rate (3e-2); a wrong share of a block would move it by the learning rate itself.
  _close(got.params, expected.params, rtol=0, atol=1e-4)
  _close(ahead.params, expected.params, rtol=0, atol=1e-4)
  _close(got.opt_state, expected.opt_state, rtol=1e-3, atol=1e-7)
  np.testing.assert_array_equal(np.asarray(got.step), [2] * len(seeds))
  np.testing.assert_array_equal(jax.random.key_data(got.rng), jax.random.key_data(expected.rng))


@pytest.mark.slow
def test_each_block_draws_its_own_dropout():
  """With dropout, two blocks holding the same rows draw different masks (the block index is folded into the
  step's dropout key), and the step's key advances as the one-program step's does."""
  cfg = dataclasses.replace(CFG, dropout=0.3)
  one = _batch(4)
  twice = {k: np.concatenate([v, v]) for k, v in one.items()}
  params = train_step.init_train_state(cfg, train_step.make_optimizer(1e-3), 0).params
  rng = jax.random.key(5)
  batch = jax.tree.map(jnp.asarray, twice)
  g0, s0 = train_step.shard_gradients(cfg, params, batch, rng, 0, 2)
  g1, s1 = train_step.shard_gradients(cfg, params, batch, rng, 1, 2)
  assert int(s0['count']) == int(s1['count']) == int(np.sum(one['tgt_len']))
  assert float(s0['total']) != float(s1['total'])
  again, _ = train_step.shard_gradients(cfg, params, batch, rng, 0, 2)
  _close(again, g0, rtol=0, atol=0)


def test_resolve_auto_and_integers():
  assert row_threads.resolve('auto', 64, 'cpu', 1, cores=2) == 2
  assert row_threads.resolve('auto', 64, 'cpu', 1, cores=8) == 2  # blocks keep MIN_ROWS = 32 rows
  assert row_threads.resolve('auto', 128, 'cpu', 1, cores=8) == 4
  assert row_threads.resolve('auto', 63, 'cpu', 1, cores=2) == 1
  assert row_threads.resolve('auto', 64, 'cpu', 1, cores=1) == 1  # a sweep's per-core child
  assert row_threads.resolve('auto', 64, 'gpu', 1, cores=16) == 1
  assert row_threads.resolve('auto', 64, 'cpu', 2, cores=2) == 1  # several devices: data parallelism instead
  assert row_threads.resolve('3', 64, 'gpu', 1, cores=1) == 3  # an integer is taken as it is
  with pytest.raises(ValueError, match='at least 2 blocks'):
    row_threads.RowThreadedStep(None, None, 1)


@pytest.mark.parametrize('bad', ['0', '-1', 'two', '1.5'])
def test_a_bad_step_threads_is_one_line(bad):
  from experiments.configs import tiny

  config = tiny.get_config()
  config.train.step_threads = bad
  with pytest.raises(ConfigError, match=r"train.step_threads must be 'auto' or a positive integer"):
    settings.validate_train(config.train)


def test_rows_per_batch_reads_sentences_or_tokens():
  from experiments.configs import tiny

  d = tiny.get_config().data
  assert row_threads.rows_per_batch(d) == d.batch_size
  d.batch_tokens, d.max_source_length, d.max_target_length = 2048, 32, 64
  assert row_threads.rows_per_batch(d) == 32


@pytest.mark.parametrize('beam', [0, 3])
@pytest.mark.slow
def test_decoding_in_blocks_equals_the_whole_batch(beam):
  """Greedy and beam search (with every hypothesis) on 2 blocks of rows on threads give the whole batch's
  tokens, lengths, scores and attention."""
  params = train_step.init_train_state(CFG, train_step.make_optimizer(1e-3), 0).params
  batch = _batch(6, seed=2)
  src, src_len = jnp.asarray(batch['src']), jnp.asarray(batch['src_len'])

  def decode(s, n):
    return batch_decoding.decode(CFG, params, s, n, beam, 16, 0.6, True, 0.0, None, beam > 0)

  whole, whole_beams = decode(src, src_len)
  d, beams = batch_decoding.decode_in_blocks(decode, src, src_len, 2)
  for name, x, y in zip(whole._fields, d, whole):
    np.testing.assert_allclose(x, np.asarray(y), rtol=1e-5, atol=1e-6, err_msg=name)
  if beam:
    for name, x, y in zip(whole_beams._fields, beams, whole_beams):
      if y is not None:
        np.testing.assert_allclose(x, np.asarray(y), rtol=1e-5, atol=1e-6, err_msg=name)


def test_decode_blocks_only_where_the_rows_divide_on_one_device(monkeypatch):
  monkeypatch.setattr(row_threads, 'usable_cores', lambda: 2)
  assert batch_decoding.decode_blocks(64) == 2
  assert batch_decoding.decode_blocks(63) == 1  # no block shape compiled ahead for odd rows
  assert batch_decoding.decode_blocks(32) == 1
  monkeypatch.setattr(row_threads, 'usable_cores', lambda: 4)
  assert batch_decoding.decode_blocks(96) == 3


@pytest.mark.slow
def test_a_run_on_row_threads_trains_evaluates_and_resumes_bitwise(tmp_path, capsys):
  """train.step_threads=2 through the trainer (the step compiled ahead, evaluation decoding in blocks): the run
  says so, and one stopped at step 10 and resumed ends with the parameters of one run straight through."""
  from attnmt.training import checkpoints, trainer
  from experiments.configs import tiny

  def config(steps):
    c = tiny.get_config()
    c.data.data_dir = str(tmp_path / 'data')
    c.data.batch_size = 32  # 'auto' would keep 16 rows in one block
    c.train.update(step_threads='2', num_steps=steps, eval_every=10, seeds='0,1')
    return c

  trainer.train_and_evaluate(config(20), str(tmp_path / 'straight'))
  assert 'data-parallel over 1, the rows in 2 blocks on 2 threads' in capsys.readouterr().out
  trainer.train_and_evaluate(config(10), str(tmp_path / 'resumed'))
  summary = trainer.train_and_evaluate(config(20), str(tmp_path / 'resumed'))
  assert 'Resumed' in capsys.readouterr().out and len(summary['test_bleu']) == 2
  a, _, step_a = checkpoints.restore_params(str(tmp_path / 'straight'), 'latest')
  b, _, step_b = checkpoints.restore_params(str(tmp_path / 'resumed'), 'latest')
  assert step_a == step_b == 20
  jax.tree.map(lambda x, y: np.testing.assert_array_equal(np.asarray(x), np.asarray(y)), a, b)
