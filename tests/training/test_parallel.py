"""Data parallelism over a jax.sharding Mesh, on fake CPU devices.

Every run with more than one device happens in a subprocess (tests/training/parallel_worker.py) with
XLA_FLAGS=--xla_force_host_platform_device_count=N, so the other tests keep their single device.
The reference each time is the same training on one device: the same global batches, seeds and
dropout streams, so losses and parameters must agree to float rounding (the sums are reduced in
another order). The run has 2 vmapped seeds and an uneven last batch (2 sentences, padded to 4).
"""

import functools
import json
import os
import socket
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from compiling import FULL

from attnmt.model import decoding, toy
from attnmt.training import parallel, train_step
from attnmt.model.config import ModelConfig
from attnmt.data import batching, pipeline

WORKER = os.path.join(os.path.dirname(__file__), 'parallel_worker.py')
STEPS = 40
# Observed: 1e-6 on losses and parameters between 1 and 4 devices (sums in another order).
RTOL, ATOL = 1e-5, 1e-5


def worker(devices: int, *args, check=True) -> subprocess.CompletedProcess:
  out = subprocess.run(
    [sys.executable, WORKER, str(devices), *map(str, args)], capture_output=True, text=True, timeout=900
  )
  if check and out.returncode:
    raise AssertionError(f'worker {args} failed ({out.returncode}):\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}')
  return out


def records(workdir, split):
  with open(os.path.join(workdir, 'metrics.jsonl')) as f:
    return [r for r in map(json.loads, f) if r['split'] == split]


def losses(workdir) -> np.ndarray:
  return np.array([r['loss'] for r in records(workdir, 'train')])  # steps x seeds


@pytest.fixture(scope='session')  # not per module: xdist interleaves modules, which would rebuild it
def runs(tmp_path_factory):
  """The same 40 steps on 1 device and on 4 (one process with 4 fake devices runs both)."""
  root = tmp_path_factory.mktemp('parallel')
  worker(4, 'train', root / 'dev{n}', root / 'data', '1,4', STEPS)
  return root


@pytest.mark.xdist_group('parallel_runs')  # one worker builds the shared runs
@pytest.mark.slow
def test_four_devices_give_the_losses_of_one(runs):
  one, four = losses(runs / 'dev1'), losses(runs / 'dev4')
  assert one.shape == four.shape == (STEPS, 2)
  np.testing.assert_allclose(four, one, rtol=RTOL, atol=ATOL)
  assert one[-5:].mean() < one[:5].mean() - 0.3  # it trains
  p1, p4 = np.load(runs / 'dev1' / f'params_{STEPS}.npz'), np.load(runs / 'dev4' / f'params_{STEPS}.npz')
  assert sorted(p1) == sorted(p4)
  for k in p1:
    np.testing.assert_allclose(p4[k], p1[k], rtol=RTOL, atol=ATOL, err_msg=k)
  # Evaluation is data-parallel too; its last batch (10 sentences) is padded to 12 with empty rows.
  for a, b in zip(records(runs / 'dev1', 'validation'), records(runs / 'dev4', 'validation')):
    np.testing.assert_allclose(a['perplexity'], b['perplexity'], rtol=RTOL)
    np.testing.assert_allclose(a['bleu'], b['bleu'], atol=1e-9)  # identical translations


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(('localhost', 0))
    return s.getsockname()[1]


@pytest.mark.xdist_group('parallel_runs')  # one worker builds the shared runs
@pytest.mark.slow
def test_two_processes_of_two_devices_give_the_losses_of_one_process(runs, tmp_path):
  """Multi-host on one machine: jax.distributed over 2 processes (gloo collectives), 2 devices each.
  Each process builds only its own rows of every global batch."""
  address = f'localhost:{_free_port()}'
  logs = [(open(tmp_path / f'out{pid}', 'w+'), open(tmp_path / f'err{pid}', 'w+')) for pid in (0, 1)]
  # Output goes to files: a full pipe would block one process inside a collective and hang both.
  procs = [
    subprocess.Popen(
      [sys.executable, WORKER, *map(str, (2, 'train', tmp_path / 'mh', runs / 'data', 0, STEPS, address, 2, pid))],
      stdout=o,
      stderr=e,
    )
    for pid, (o, e) in zip((0, 1), logs)
  ]
  try:
    for p in procs:
      p.wait(timeout=600)
  finally:
    for p in procs:
      p.kill()
  outs = [((tmp_path / f'out{pid}').read_text(), (tmp_path / f'err{pid}').read_text()) for pid in (0, 1)]
  assert [p.returncode for p in procs] == [0, 0], '\n'.join(
    f'process {pid}, status {p.returncode}:\n{out[-2000:]}\n{err[-3000:]}'
    for pid, p, (out, err) in zip((0, 1), procs, outs)
  )
  assert 'in 2 process(es)' in outs[0][0]
  np.testing.assert_allclose(losses(tmp_path / 'mh'), losses(runs / 'dev4'), rtol=RTOL, atol=ATOL)
  assert 'step 20 validation' in outs[0][1] and 'step 20 validation' not in outs[1][1]  # process 0 reports


@pytest.mark.xdist_group('parallel_runs')  # one worker builds the shared runs
@pytest.mark.slow
def test_checkpoint_saved_on_four_devices_restores_on_one_and_on_two(runs, tmp_path):
  saved = np.load(runs / 'dev4' / f'params_{STEPS}.npz')
  for devices in (1, 2):
    out = tmp_path / f'restored{devices}.npz'
    worker(devices, 'restore', runs / 'dev4', out)
    got = np.load(out)
    assert int(got['step']) == STEPS and int(got['devices']) == devices
    assert str(got['state_devices']) == str(devices)  # the resumed state lives on this mesh
    for k in saved:
      np.testing.assert_array_equal(got['params' + k], saved[k], err_msg=k)
      np.testing.assert_array_equal(got['state' + k], saved[k], err_msg=k)


def test_uneven_batches_are_padded_with_empty_rows_and_split_by_process():
  """The iterator pads a 2-sentence batch to 4 rows (index -1, length 0) and each of 2 processes builds
  its own half at the widths of the whole batch; together they are the unsharded batch."""
  src = [[5, 6, 7], [5], [6, 6, 6, 6, 6], [7, 7]]
  split = pipeline.TokenizedSplit(*pipeline._flatten(src), *pipeline._flatten([[8, 9]] * 4))
  options = batching.BatchOptions(batch_size=3, bucket=False, pad_to_multiple=1)
  keep = np.arange(4)
  whole = list(pipeline.BatchIterator(split, keep, options, 0, 1, False, 'x', row_multiple=4))
  assert [len(b['src_len']) for b in whole] == [4, 4]  # 3 -> 4 and 1 -> 4 rows
  np.testing.assert_array_equal(whole[1]['index'], [3, -1, -1, -1])
  np.testing.assert_array_equal(whole[1]['src_len'], [3, 0, 0, 0])
  assert whole[1]['src'].shape == (4, 3) and not whole[1]['src'][1:].any()
  halves = [
    list(pipeline.BatchIterator(split, keep, options, 0, 1, False, 'x', row_multiple=4, shard=(p, 2))) for p in (0, 1)
  ]
  for b, (h0, h1) in zip(whole, zip(*halves)):
    for k in b:
      np.testing.assert_array_equal(np.concatenate([h0[k], h1[k]]), b[k], err_msg=k)
  with pytest.raises(ValueError, match='multiple of the process count'):
    pipeline.BatchIterator(split, keep, options, 0, 1, False, 'x', row_multiple=3, shard=(0, 2))


def test_batch_size_that_does_not_split_over_the_devices_is_refused(monkeypatch):
  from attnmt.training import trainer
  from attnmt.errors import ConfigError
  from experiments.configs import tiny

  c = tiny.get_config()
  c.data.batch_size = 15
  c.train.num_devices = 1
  trainer.make_mesh(c)  # one device: any batch size
  c.train.num_devices = 2
  with pytest.raises(ConfigError, match=r'num_devices=2, but 1 device\(s\)'):
    trainer.make_mesh(c)  # only one device is visible in this process
  c.train.num_devices = 1
  monkeypatch.setattr(parallel, 'num_shards', lambda mesh: 2)  # as if the mesh had 2 devices
  with pytest.raises(ConfigError, match='does not split over 2 devices; use a multiple of 2, e.g. 14 or 16'):
    trainer.make_mesh(c)
  c.data.batch_size = 16
  trainer.make_mesh(c)


def test_padding_rows_change_neither_loss_nor_translations():
  """What makes the padding safe, on one device: empty rows add 0 to the summed loss and the token count,
  and the real rows translate the same."""
  cfg = ModelConfig(
    dropout=0.0,
    source_vocab_size=14,
    target_vocab_size=14,
    embed_size=8,
    encoder_hidden_size=8,
    decoder_hidden_size=16,
    score='additive(size=8)',
    query_timing='bahdanau(deep_output_size=8)',
  )
  params = train_step.init_train_state(cfg, train_step.make_optimizer(1e-3), 0).params
  batch = toy.reverse_batch(np.random.default_rng(0), 5, 10, np.ones(6) / 6)
  batch['index'] = np.arange(5)
  padded = parallel.pad_rows(batch, 4)
  assert len(padded['src_len']) == 8 and list(padded['index'][5:]) == [-1] * 3
  loss = jax.jit(lambda b: train_step.loss_fn(cfg, params, b, None, False))
  _, (t, c, _) = loss(jax.tree.map(jnp.asarray, batch))
  _, (tp, cp, _) = loss(jax.tree.map(jnp.asarray, padded))
  assert int(cp) == int(c) and np.isclose(float(tp), float(t), rtol=1e-6)
  a = decoding.greedy(cfg, params, jnp.asarray(batch['src']), jnp.asarray(batch['src_len']), 8)
  b = decoding.greedy(cfg, params, jnp.asarray(padded['src']), jnp.asarray(padded['src_len']), 8)
  np.testing.assert_array_equal(np.asarray(b.tokens)[:5], np.asarray(a.tokens))
  assert np.isfinite(np.asarray(b.scores)).all()


BF16_STEPS = 400


@pytest.mark.slow
def test_bfloat16_training_learns_to_reverse():
  """Mixed precision (model.dtype='bfloat16'): bf16 matrix products, float32 parameters, softmax and
  loss. Observed: exact on every held-out string after 400 steps (lengths 1..8) with a cosine decay to 5 % of
  the rate, on an Intel Xeon and with XLA limited to AVX2 (at a constant rate the Xeon reached 0.92)."""
  cfg = ModelConfig(
    dropout=0.0,
    source_vocab_size=14,
    target_vocab_size=14,
    embed_size=32,
    encoder_hidden_size=32,
    decoder_hidden_size=64,
    score='additive(size=32)',
    query_timing='bahdanau(deep_output_size=32)',
    dtype='bfloat16',
  )
  opt = train_step.make_optimizer(optax.cosine_decay_schedule(3e-3, BF16_STEPS, alpha=0.05))
  state = train_step.init_train_state(cfg, opt, 0)
  probs = np.ones(8) / 8
  first = toy.reverse_batch(np.random.default_rng(0), 64, 10, probs)
  hlo = jax.jit(functools.partial(train_step.train_step, cfg, opt)).lower(state, first).as_text()
  assert 'bf16' in hlo and 'dot_general' in hlo
  step = jax.jit(functools.partial(train_step.train_step, cfg, opt), donate_argnums=0, compiler_options=FULL)
  rng = np.random.default_rng(0)
  for _ in range(BF16_STEPS):
    state, metrics = step(state, toy.reverse_batch(rng, 64, 10, probs))
  assert all(x.dtype == jnp.float32 for x in jax.tree.leaves(state.params))
  assert metrics['loss'].dtype == jnp.float32
  test = toy.reverse_batch(np.random.default_rng(1), 400, 10, probs, held_out=True)
  out = decoding.greedy(cfg, state.params, jnp.asarray(test['src']), jnp.asarray(test['src_len']), 10)
  tokens, n = np.asarray(out.tokens), test['tgt_len']
  exact = np.mean(
    [out.lengths[i] == k and np.array_equal(tokens[i, :k], test['tgt_out'][i, :k]) for i, k in enumerate(n)]
  )
  assert exact >= 0.95, exact
