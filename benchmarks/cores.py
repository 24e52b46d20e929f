"""How to spend a machine's CPU cores on seeds and variants: one process using every core, or one
single-threaded process per core (what `sweep.processes=auto` does, experiments/cores.py).

    python -m benchmarks.cores                # the main job's model; about 5 minutes on 2 cores
    python -m benchmarks.cores --model=bench  # the bench config

Runs `benchmarks.bench --only=train,seeds` once as one process with the default thread pools (the
training step, then K = 1, 2, 4 seeds in one vmapped program), then `--only=train` in one pinned,
single-threaded process per core, all at once. Prints target tokens/s for each way, and what two seeds
cost against one seed's wall time: vmapped in one process (K = 2 against K = 1), or one seed per
process. Writes the figures to benchmarks/results/cores_<host>.json. Take it on quiet cores.
"""

import json
import os
import socket
import subprocess
import sys
import tempfile

from absl import app, flags

from experiments import cores

_MODEL = flags.DEFINE_enum('model', 'main', ['main', 'bench'], 'the model to time (see benchmarks/bench.py)')
_STEPS = flags.DEFINE_integer('steps', 20, 'timed steps per figure')
_OUT = flags.DEFINE_string('out', None, 'JSON output path; default benchmarks/results/cores_<host>.json')


def _bench(args, out, core=None, one_thread=False):
  env = dict(os.environ)
  if one_thread:
    env['XLA_FLAGS'] = (env.get('XLA_FLAGS', '') + ' ' + cores.ONE_THREAD).strip()
  command = [sys.executable, '-m', 'benchmarks.bench', f'--model={_MODEL.value}', f'--steps={_STEPS.value}']
  command += [*args, f'--out={out}']
  pin = None if core is None else (lambda: os.sched_setaffinity(0, {core}))
  return subprocess.Popen(command, env=env, preexec_fn=pin, stdout=subprocess.DEVNULL)


def _read(path):
  with open(path) as f:
    return json.load(f)


def main(argv):
  del argv
  usable = cores.usable_cores()
  with tempfile.TemporaryDirectory() as tmp:
    whole = os.path.join(tmp, 'whole.json')
    if _bench(['--only=train,seeds'], whole).wait():
      raise SystemExit('benchmarks.bench failed (one process)')
    outs = [os.path.join(tmp, f'core{c}.json') for c in usable]
    procs = [_bench(['--only=train'], out, core=c, one_thread=True) for c, out in zip(usable, outs)]
    if any(p.wait() for p in procs):
      raise SystemExit('benchmarks.bench failed (one process per core)')
    one, per_core = _read(whole), [_read(o) for o in outs]
  tokens = one['sizes']['batch'] * one['sizes']['tgt_len']
  plain_s = one['train']['step_s']
  seeds = {row['seeds']: row['step_s'] for row in one['seeds']}  # K -> one K-seed step, in seconds
  per_core_s = [r['train']['step_s'] for r in per_core]
  result = {
    'machine': one['machine'],
    'model': _MODEL.value,
    'cores': len(usable),
    'one_process': {
      'step_s': plain_s,
      'tokens_per_s': tokens / plain_s,
      'fraction_of_peak': one['train']['fraction_of_peak'],
    },
    'vmapped_seeds_step_s': {str(k): s for k, s in seeds.items()},
    'one_process_per_core': {'step_s': per_core_s, 'tokens_per_s': sum(tokens / s for s in per_core_s)},
  }
  result['per_core_over_one_process'] = (
    result['one_process_per_core']['tokens_per_s'] / result['one_process']['tokens_per_s']
  )
  result['two_seeds_over_one'] = {
    'vmapped': seeds[2] / plain_s,
    'one_per_core': max(per_core_s[:2]) / plain_s if len(per_core_s) >= 2 else None,
  }
  out = _OUT.value or os.path.join(os.path.dirname(__file__), 'results', f'cores_{socket.gethostname()}.json')
  os.makedirs(os.path.dirname(out), exist_ok=True)
  with open(out, 'w') as f:
    json.dump(result, f, indent=1)
  print(
    f'{one["machine"]["cpu"]}, {len(usable)} cores, {_MODEL.value} model, batch {one["sizes"]["batch"]} x {tokens // one["sizes"]["batch"]} tokens'
  )
  print(
    f'one process, all cores:     step {plain_s:.3f} s, {tokens / plain_s:,.0f} tok/s, {result["one_process"]["fraction_of_peak"]:.0%} of peak'
  )
  for k, step_s in seeds.items():
    print(
      f'  K = {k} vmapped seeds:      step {step_s:.3f} s, {k * tokens / step_s:,.0f} tok/s ({step_s / plain_s:.2f}x the plain step)'
    )
  print(
    f'one process per core:      steps {", ".join(f"{s:.3f}" for s in per_core_s)} s, '
    f'{result["one_process_per_core"]["tokens_per_s"]:,.0f} tok/s together '
    f'({result["per_core_over_one_process"]:.2f}x one process)'
  )
  two = result['two_seeds_over_one']
  print(f'two seeds against one seed: vmapped {two["vmapped"]:.2f}x, one per core {two["one_per_core"]:.2f}x')
  print(f'wrote {out}')


if __name__ == '__main__':
  app.run(main)
