"""benchmarks/device_check.sh, the script prepared for a lent GPU, in its dry run on the CPU: its steps run
tiny, and each output the device tool would bring back is written. The dry run here leaves out the part `bench`
(the same `step` as `seeds`, which also runs the train section; benchmarks.bench itself is tested in
test_bench.py) and checks that a part left out of ATTNMT_DEVICE_PARTS does not run."""

import json
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_the_device_script_runs_dry(tmp_path):
  out, work = tmp_path / 'out', tmp_path / 'work'
  env = dict(
    os.environ,
    ATTNMT_DEVICE_CHECK='dry',
    ATTNMT_DEVICE_PARTS='seeds,main',
    OUT=str(out),
    ATTNMT_DEVICE_WORK=str(work),
    JAX_PLATFORMS='cpu',
  )
  res = subprocess.run(['benchmarks/device_check.sh'], cwd=ROOT, env=env, capture_output=True, text=True, timeout=1200)
  log = (out / 'device_check.log').read_text()
  assert res.returncode == 0, log[-3000:]
  for name in ('main model, seeds 1,2 vmapped', 'main job'):
    assert f'== {name}: exit 0 after' in log, log[-3000:]
  assert '== bench config' not in log and not (out / 'bench_f32.json').exists()  # not in ATTNMT_DEVICE_PARTS
  seeds = json.loads((out / 'bench_main_seeds.json').read_text())['seeds']
  assert [s['seeds'] for s in seeds] == [1, 2] and all(s['step_s'] > 0 for s in seeds)
  assert 'main job wall time: ' in log and (out / 'main_results.md').read_text().startswith('| variant |')
  pairs = (out / 'main_analysis.md').read_text()
  assert '| pair | difference |' in pairs and (out / 'main_translations.json.gz').stat().st_size > 0
  assert len(os.listdir(out)) <= 8  # what the device tool brings back
