"""attnmt's side of benchmarks/peer.py: the programs a main-job run compiles, on the peer's batch.

The training step is the one training runs (`trainer._seed_functions`: one seed's guarded step on the run's
one-device mesh with the state donated; the config's Adam, schedule, global-norm clipping and label smoothing;
with train.step_threads, 'auto' unless the job's train section says otherwise, the rows in blocks on the cores
the worker is given: attnmt/training/row_threads.py). Greedy decoding is `decoding.greedy` as `evaluation.translate` calls it (the rows in blocks on threads where
`batch_decoding.decode_blocks` says so), attention kept, with EOS's output bias at -1e9
(`cases.never_ending_params`), so that every call decodes `max_len` tokens, as the PyTorch side's does. Both are
compiled before they are timed; the compile times are recorded, not counted.
"""

from __future__ import annotations

import json

import jax
import jaxlib
import ml_collections
import numpy as np

from attnmt.model import decoding
from attnmt.model.config import ModelConfig
from attnmt.training import batch_decoding, parallel, row_threads, train_step, trainer
from benchmarks import cases, timing


def flat(params) -> dict[str, np.ndarray]:
  """The parameters by path, 'decoder/attention/U' -> array (what torch_peer.load_attnmt reads)."""
  leaves = jax.tree_util.tree_flatten_with_path(params)[0]
  return {'/'.join(str(k.key) for k in path): np.asarray(x) for path, x in leaves}


def prepare(job: dict, batch: dict, params_out: str | None = None):
  """The timed calls of the peer's worker ({'train': step, 'greedy': decode}, those `job['what']` names) and what
  to record; writes the initial parameters to `params_out` (.npz) for the PyTorch side when given."""
  cfg = ModelConfig(**job['model'])
  t = ml_collections.ConfigDict(job['train'])
  mesh = parallel.make_mesh(t.num_devices)
  threads = row_threads.resolve(t.get('step_threads', 'auto'), job['sizes']['batch'], jax.default_backend(), mesh.size)
  init, step = trainer._seed_functions(cfg, json.dumps(t.to_dict(), sort_keys=True), mesh, threads)
  state = init([0])
  params = jax.tree.map(lambda x: x[0], state.params)  # copies: the step donates the state
  if params_out:
    np.savez(params_out, **flat(params))
  batch_K = {k: v[None] for k, v in batch.items()}  # one seed
  compiled, compile_s = {}, {}
  calls = {}
  if 'train' in job['what']:
    compiled['train'], compile_s['train'] = timing.compile_timed(step, state, batch_K)
    holder = {'state': state}

    def train():
      holder['state'], metrics = compiled['train'](holder['state'], batch_K)
      return jax.block_until_ready(metrics)

    calls['train'] = train
  info = {'step_threads': threads}
  if 'greedy' in job['what']:
    never_ending = cases.never_ending_params(params)
    src, src_len, max_len = batch['src'], batch['src_len'], job['sizes']['max_len']
    # as translate decodes a batch: its rows in blocks on threads (peer.py --threads=1: whole)
    blocks = batch_decoding.decode_blocks(src.shape[0]) if job.get('threads', 'auto') == 'auto' else 1
    size = src.shape[0] // blocks
    compiled['greedy'], compile_s['greedy'] = timing.compile_timed(
      decoding.greedy, cfg, never_ending, src[:size], src_len[:size], max_len=max_len
    )

    def greedy():
      d, _ = batch_decoding.decode_in_blocks(
        lambda s, n: (compiled['greedy'](never_ending, s, n), None), src, src_len, blocks
      )
      return jax.block_until_ready(d)

    calls['greedy'] = greedy
    info['greedy_tokens'] = np.asarray(calls['greedy']().tokens).tolist()
    info['decode_blocks'] = blocks
  loss = jax.jit(lambda p, b: train_step.loss_fn(cfg, p, b, jax.random.key(0), False, t.label_smoothing)[0])
  info.update(
    parameters=sum(int(x.size) for x in jax.tree.leaves(params)),
    eval_loss=float(loss(params, batch)),
    compile_s=compile_s,
    jax=jax.__version__,
    jaxlib=jaxlib.__version__,
    devices=[str(d) for d in jax.devices()],
  )
  return calls, info
