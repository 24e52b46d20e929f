"""Runs in a subprocess of tests/training/test_parallel.py, with its own count of fake CPU devices.

    python tests/training/parallel_worker.py DEVICES train WORKDIR DATA_DIR NUM_DEVICES[,...] NUM_STEPS [COORDINATOR NPROC PID]
    python tests/training/parallel_worker.py DEVICES restore WORKDIR OUT.npz

`train` runs attnmt.training.trainer.train_and_evaluate on the test config below for each NUM_DEVICES, into
WORKDIR with `{n}` replaced by it (multi-host when a coordinator is given), and dumps the latest parameters;
`restore` restores the latest checkpoint of WORKDIR replicated over all local devices, both as parameters and
as a full resumable train state, and dumps them.
"""

import os
import sys

os.environ['XLA_FLAGS'] = f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={int(sys.argv[1])}"
os.environ['JAX_PLATFORMS'] = 'cpu'
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import jax  # noqa: E402
import numpy as np  # noqa: E402

from attnmt.training import checkpoints, parallel, trainer, train_step  # noqa: E402
from attnmt.training import seeds as seed_axis  # noqa: E402
from experiments.configs import tiny  # noqa: E402


def config(data_dir: str, num_devices: int, num_steps: int):
  c = tiny.get_config()
  c.data.data_dir = data_dir
  c.data.synthetic_size = 610  # 38 full batches of 16 and a last one of 2: the uneven batch, at step 39
  c.data.synthetic_eval_size = 42  # evaluation batches 16, 16, 10: the last one padded to divide
  c.data.bucket = False
  c.train.seeds = '0,1'
  c.train.num_devices = num_devices
  c.train.num_steps = num_steps
  c.train.log_every = 1  # a loss per step, to compare curves
  c.train.eval_every = 20
  c.train.checkpoint_every = 20
  return c


def flat(tree) -> dict:
  return {jax.tree_util.keystr(k): parallel.to_numpy(v) for k, v in jax.tree_util.tree_leaves_with_path(tree)}


def main(argv):
  mode = argv[2]
  if mode == 'train':
    workdir, data_dir, num_steps = argv[3], argv[4], int(argv[6])
    if len(argv) > 7:
      parallel.initialize(argv[7], int(argv[8]), int(argv[9]))
    for num_devices in map(int, argv[5].split(',')):  # one run after the other, in WORKDIR with {n} filled in
      run = workdir.format(n=num_devices)
      summary = trainer.train_and_evaluate(config(data_dir, num_devices, num_steps), run)
      params, _, step = checkpoints.restore_params(run, 'latest')
      if parallel.is_main_process():
        np.savez(os.path.join(run, f'params_{step}.npz'), **flat(params))
      print('test perplexity', summary['test_perplexity'])
  elif mode == 'restore':
    workdir, out = argv[3], argv[4]
    mesh = parallel.make_mesh()
    params, _, step = checkpoints.restore_params(workdir, 'latest', mesh=mesh)
    # The resume path: a fresh state placed on this mesh, then the checkpoint restored into it.
    c = checkpoints.load_config(workdir)
    from attnmt import data

    prepared = data.prepare(c.data)
    cfg = trainer.model_config(c, prepared)
    optimizer = train_step.make_optimizer(train_step.learning_rate_schedule(c.train), c.train.clip_norm)
    init, _ = seed_axis.seed_functions(cfg, optimizer, mesh=mesh)
    state, _ = checkpoints.RunCheckpoints(workdir).restore(init(seed_axis.parse_seeds(c.train.seeds)))
    shardings = {str(x.sharding.num_devices) for x in jax.tree.leaves(state)}
    np.savez(
      out,
      step=step,
      devices=len(jax.devices()),
      state_devices=','.join(sorted(shardings)),
      **{'params' + k: v for k, v in flat(params).items()},
      **{'state' + k: v for k, v in flat(state.params).items()},
    )
  else:
    raise SystemExit(f'unknown mode {mode}')


if __name__ == '__main__':
  main(sys.argv)
  sys.stdout.flush()
  # Every process reaches the shutdown barrier before any leaves: the leader (process 0) hosts the coordination
  # service, and a peer still polling it when the leader exits aborts ("Socket closed").
  jax.distributed.shutdown()
  os._exit(0)  # Orbax background threads would otherwise delay the exit
