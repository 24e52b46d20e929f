"""benchmarks/device_check.sh, the script prepared for a lent GPU, in its dry run on the CPU: its parts run
tiny, and each output the device tool would bring back is written. The dry run here leaves out the part `bench`
(benchmarks.bench itself is tested in test_bench.py; profile and unroll run the tools tested in test_tools.py)
and checks that a part left out of ATTNMT_DEVICE_PARTS does not run."""

import json
import os
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.slow
def test_the_device_script_runs_dry(tmp_path):
  out, work = tmp_path / 'out', tmp_path / 'work'
  env = dict(
    os.environ,
    ATTNMT_DEVICE_CHECK='dry',
    ATTNMT_DEVICE_PARTS='compile,kernels,seeds,decode_seeds,concurrent,main,main_one',
    OUT=str(out),
    ATTNMT_DEVICE_WORK=str(work),
    JAX_PLATFORMS='cpu',
  )
  res = subprocess.run(['benchmarks/device_check.sh'], cwd=ROOT, env=env, capture_output=True, text=True, timeout=1200)
  log = (out / 'device_check.log').read_text()
  assert res.returncode == 0, log[-3000:]
  for name in (
    'one variant: every width, then one shape',
    'fused kernels against the readable step (tiny)',
    'main model, seeds 1,2 vmapped',
    'main model, greedy decode by 2 seeds',
    '2 processes of 2 seeds at once',
    'main job',
  ):
    assert f'== {name}: exit 0 after' in log, log[-3000:]
  assert '== bench config' not in log and not (out / 'bench_f32.json').exists()  # not in ATTNMT_DEVICE_PARTS
  start = log.index('{\n "every_width"')  # its JSON, in the log (the device returns at most 8 files)
  timed = json.loads(log[start : log.index('\n}\n', start) + 2])
  assert set(timed) == {'every_width', 'one_shape'} and all(
    t['returncode'] == 0 and t['wall_s'] > 0 for t in timed.values()
  )
  assert '--config.data.train_shapes=1' in timed['one_shape']['command']
  start = log.index('{\n "jax"')  # benchmarks.kernels' JSON, in the log too (tests/benchmarks/test_fused_kernels.py)
  fused = json.loads(log[start : log.index('\n}\n', start) + 2])
  assert fused['interpret'] is True and fused['size'] == 'tiny'
  assert all(c['differences']['default']['max_abs_diff'] < 1e-4 for c in fused['cases'].values())
  seeds = json.loads((out / 'bench_main_seeds.json').read_text())['seeds']
  assert [s['seeds'] for s in seeds] == [1, 2] and all(s['step_s'] > 0 for s in seeds)
  (decoded,) = json.loads((out / 'bench_main_decode_seeds.json').read_text())['decode_seeds']
  assert decoded['seeds'] == 2 and decoded['speedup'] > 0
  sharing = json.loads((out / 'sharing.json').read_text())
  assert sharing['processes'] == 2 and sharing['seeds_per_process'] == 2 and sharing['at_once_speedup'] > 0
  assert 'at once is' in log
  assert 'main job wall time: ' in log and (out / 'main_results.md').read_text().startswith('| variant |')
  pairs = (out / 'main_analysis.md').read_text()
  assert '| pair | difference |' in pairs and (out / 'main_extra.tgz').stat().st_size > 0
  one = (out / 'main_one_results.md').read_text()
  assert 'main job (one process) wall time: ' in log and one.startswith('| variant |')

  # Both layouts train the same seeds on the same batches: the same scores (here bit for bit, one backend);
  # the columns after the parameters are times.
  def scores(text):
    return [row.split('|')[1:11] for row in text.splitlines()[2:4]]

  assert scores(one) == scores((out / 'main_results.md').read_text())
  assert len(os.listdir(out)) <= 8  # what the device tool brings back


def _device_check(tmp_path, fake_nvidia_smi: str, **env):
  """The script with a stand-in nvidia-smi first on PATH (the same answer whatever this machine has)."""
  bin_dir = tmp_path / 'bin'
  bin_dir.mkdir(parents=True)
  (bin_dir / 'nvidia-smi').write_text(f'#!/bin/sh\n{fake_nvidia_smi}\n')
  (bin_dir / 'nvidia-smi').chmod(0o755)
  run_env = {k: v for k, v in os.environ.items() if k not in ('ATTNMT_DEVICE_CHECK', 'ATTNMT_DEVICE_PARTS')}
  run_env.update(
    PATH=f'{bin_dir}:{os.environ["PATH"]}',
    OUT=str(tmp_path / 'out'),
    ATTNMT_DEVICE_WORK=str(tmp_path / 'work'),
    JAX_PLATFORMS='cpu',
  )
  run_env.update({k: v for k, v in env.items() if v is not None})
  return subprocess.run(
    ['benchmarks/device_check.sh'], cwd=ROOT, env=run_env, capture_output=True, text=True, timeout=300
  )


NO_GPU = (
  'device_check.sh: no GPU here (nvidia-smi lists none), so it would measure the CPU; run it on the GPU host '
  '(ATTNMT_DEVICE_CHECK=dry for the dry run on any backend)'
)


def test_without_a_gpu_the_device_script_stops_before_measuring(tmp_path):
  res = _device_check(tmp_path, 'echo "NVIDIA-SMI has failed because it could not communicate with the driver"; exit 9')
  assert (res.returncode, res.stderr.splitlines()) == (1, [NO_GPU])
  assert not (tmp_path / 'out').exists() and not (tmp_path / 'work').exists()


def test_a_gpu_that_jax_does_not_see_stops_the_device_script(tmp_path):
  res = _device_check(tmp_path, 'echo "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0)"', ATTNMT_DEVICE_PARTS='seeds')
  log = tmp_path / 'out' / 'device_check.log'
  line = (
    'device_check.sh: jax in .venv sees no GPU (backend cpu), so it would measure the CPU; install jax with CUDA '
    f'there (the set-up is in {log})'
  )
  assert (res.returncode, res.stderr.splitlines()[-1:]) == (1, [line]), res.stderr[-2000:]
  assert '== main model' not in log.read_text() and os.listdir(tmp_path / 'out') == ['device_check.log']


def test_an_unknown_part_is_refused_not_skipped(tmp_path):
  for dry in ('dry', None):
    res = _device_check(
      tmp_path / str(dry), 'exit 9', ATTNMT_DEVICE_PARTS='seeds,bench,nonesuch', ATTNMT_DEVICE_CHECK=dry
    )
    assert (res.returncode, res.stderr.splitlines()) == (
      2,
      [
        "device_check.sh: unknown part 'nonesuch' in ATTNMT_DEVICE_PARTS; the parts are compile, kernels, fused_step, seeds, "
        'profile, concurrent, decode_seeds, unroll, host, bench, bf16, main, main_one'
      ],
    )
    assert not (tmp_path / str(dry) / 'out').exists()
