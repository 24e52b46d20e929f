"""Data-parallel scaling: the bench-config training step on a mesh of 1, 2, 4, ... devices.

    python -m benchmarks.scaling                          # CPU: fake devices 1, 2, 4 (one subprocess each)
    python -m benchmarks.scaling --devices=1,2,4,8 --real # GPUs/TPUs: meshes over the first n real devices

The global batch stays 64 sentences (docs/design.md, "Bench config") and is split over the devices, so this is
strong scaling: ideal is step time / n. On CPU the "devices" come from
XLA_FLAGS=--xla_force_host_platform_device_count and share the same cores, so the figures show the
cost of partitioning and collectives, not a speed-up. The step is `seed_axis.seed_functions` (the one
training uses: jit with NamedSharding, state donated) with one seed. Writes JSON (--out).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from absl import app, flags

FLAGS = flags.FLAGS
flags.DEFINE_string('devices', '1,2,4', 'Comma-separated device counts.')
flags.DEFINE_bool('real', False, 'Use the real devices of this machine (GPU/TPU) instead of fake CPU devices.')
flags.DEFINE_integer('steps', 10, 'Timed steps per figure (median).')
flags.DEFINE_integer('batch', 64, 'Global batch (sentences); must divide by every device count.')
flags.DEFINE_string('dtype', 'float32', 'Compute dtype: float32 or bfloat16.')
flags.DEFINE_string('out', '', 'JSON output (default benchmarks/results/scaling_<platform>.json).')
flags.DEFINE_integer('one', 0, 'Internal: measure this many devices in this process and print JSON.')


def measure(n: int, steps: int, batch: int, dtype: str) -> dict:
  """The training step on a mesh of the first n devices: median seconds and target tokens/s."""
  import dataclasses
  import jax
  from attnmt.training import parallel, train_step
  from attnmt.training import seeds as seed_axis
  from benchmarks import cases, flops
  from benchmarks.timing import compile_timed, median_seconds

  cfg = dataclasses.replace(cases.BENCH_MODEL, dtype=dtype)
  sizes = cases.Sizes(batch=batch, steps=steps)
  mesh = parallel.make_mesh(n)
  init, step = seed_axis.seed_functions(cfg, train_step.make_optimizer(1e-3), mesh=mesh)
  state = init([0])
  batch_K = parallel.shard_batch(
    mesh, {k: jax.numpy.asarray(v)[None] for k, v in cases.random_batch(cfg, sizes).items()}, row_axis=1
  )
  compiled, compile_s = compile_timed(step, state, batch_K)
  holder = {'state': state}

  def once():
    holder['state'], metrics = compiled(holder['state'], batch_K)
    return metrics['loss']

  seconds, all_s = median_seconds(once, steps)
  gflop = flops.train_step_flops(cfg, batch, sizes.src_len, sizes.tgt_len) / 1e9
  return {
    'devices': n,
    'platform': jax.devices()[0].platform,
    'device_kind': jax.devices()[0].device_kind,
    'compile_s': compile_s,
    'step_s': seconds,
    'step_s_all': all_s,
    'tokens_per_s': batch * sizes.tgt_len / seconds,
    'gflops': gflop / seconds,
    'dtype': dtype,
  }


def main(argv):
  del argv
  if FLAGS.one:
    print('RESULT ' + json.dumps(measure(FLAGS.one, FLAGS.steps, FLAGS.batch, FLAGS.dtype)), flush=True)
    return
  counts = [int(x) for x in FLAGS.devices.split(',') if x]
  rows = []
  for n in counts:
    env = dict(os.environ)
    if not FLAGS.real:
      env['XLA_FLAGS'] = (env.get('XLA_FLAGS', '') + f' --xla_force_host_platform_device_count={n}').strip()
      env['JAX_PLATFORMS'] = 'cpu'
    cmd = [
      sys.executable,
      '-m',
      'benchmarks.scaling',
      f'--one={n}',
      f'--steps={FLAGS.steps}',
      f'--batch={FLAGS.batch}',
      f'--dtype={FLAGS.dtype}',
    ]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    lines = [l for l in out.stdout.splitlines() if l.startswith('RESULT ')]
    if out.returncode or not lines:
      raise SystemExit(f'scaling: {n} device(s) failed:\n{out.stderr[-3000:]}')
    rows.append(json.loads(lines[-1][len('RESULT ') :]))
    r = rows[-1]
    print(
      f"{n} device(s): step {r['step_s']:.3f} s, {r['tokens_per_s']:,.0f} tok/s, compile {r['compile_s']:.1f} s",
      flush=True,
    )
  base = rows[0]['step_s'] * rows[0]['devices']
  print(
    f"\n| devices | step (s) | target tok/s | speed-up vs {rows[0]['devices']} | efficiency |\n|---|---|---|---|---|"
  )
  for r in rows:
    speedup = rows[0]['step_s'] / r['step_s']
    r['speedup'], r['efficiency'] = speedup, base / (r['step_s'] * r['devices'])
    print(f"| {r['devices']} | {r['step_s']:.3f} | {r['tokens_per_s']:,.0f} | {speedup:.2f}x | {r['efficiency']:.0%} |")
  out = FLAGS.out or os.path.join('benchmarks', 'results', f"scaling_{rows[0]['platform']}.json")
  os.makedirs(os.path.dirname(out) or '.', exist_ok=True)
  with open(out, 'w') as f:
    json.dump({'fake_cpu_devices': not FLAGS.real, 'load_average': os.getloadavg(), 'rows': rows}, f, indent=1)
  print(f'wrote {out}')


if __name__ == '__main__':
  app.run(main)
