"""benchmarks/kernels.py, the fused kernels against the readable step: its dry run end to end (the tiny size in
Pallas's interpreter, where both versions must agree to float32 rounding), its fused scans lowered for CUDA at the
sizes a GPU will time, and its count of the kernels per scan step on a hand-made trace.

No timing is asserted: on a CPU the kernels run interpreted, and the figures mean nothing."""

import collections
import json
import os
import subprocess
import sys
from types import SimpleNamespace as NS

import jax
import pytest

from benchmarks import kernels as bench_kernels
from benchmarks import traces

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.slow
def test_the_dry_run_times_both_versions_and_finds_them_equal(tmp_path):
  out = tmp_path / 'kernels.json'
  env = dict(os.environ, JAX_PLATFORMS='cpu')
  res = subprocess.run(
    [sys.executable, '-m', 'benchmarks.kernels', '--dry', f'--out={out}'],
    cwd=ROOT,
    env=env,
    capture_output=True,
    text=True,
    timeout=300,
  )
  assert res.returncode == 0, res.stderr[-3000:]
  r = json.loads(out.read_text())
  assert r['interpret'] is True and r['size'] == 'tiny' and r['shapes']['T'] == 2 and 'mean nothing' in r['note']
  assert r['jax'] == jax.__version__ and r['device_kind'] == 'cpu'
  assert set(r['cases']) == {'lstm-additive', 'gru-dot'}  # between them every kernel: both cells, both scores
  for name, case in r['cases'].items():
    for version in ('readable', 'fused'):
      for part in ('forward', 'forward_backward'):
        timed = case[version][part]
        assert timed['step_s'] > 0 and timed['compile_s'] > 0 and len(timed['call_s_all']) == 2, (name, version)
        assert timed['kernels'] is None  # a CPU's trace has no device timeline
    assert set(case['readable_over_fused']) == {'forward', 'forward_backward'}
    for precision in ('default', 'highest'):
      diffs = case['differences'][precision]
      assert set(diffs['outputs']) == {'states', 'contexts', 'weights'}
      grads = diffs['gradients']
      assert {'W_hh', 'W_ih', 'b', 'keys', 'annotations', 'emb_proj', 'carry/0'} <= set(grads), name
      assert ('attention/v' in grads) == name.endswith('additive') and ('b_hn' in grads) == name.startswith('gru')
      assert diffs['max_abs_diff'] < 1e-4, (name, precision)
      assert diffs['max_abs_diff'] == max(
        d['max_abs_diff'] for part in ('outputs', 'gradients') for d in diffs[part].values()
      )
      assert all(d['max_abs'] > 0 for part in ('outputs', 'gradients') for d in diffs[part].values())


@pytest.mark.parametrize('size', ['main', 'bench'])
def test_the_fused_scans_lower_for_cuda_at_the_timed_sizes(size):
  """What the GPU will compile (interpret=False): forward and forward + backward of both cases lower for CUDA,
  with one Triton call per kernel, the attention's and the cell's, forward and backward (jax.export; Triton's
  own compilation runs only on a GPU)."""
  cfg, shapes = bench_kernels.model(size, 4)
  assert (shapes.B, shapes.S) == (64, 32) and shapes.D == shapes.V  # dot needs the query and keys of one size
  triton = jax.export.DisabledSafetyCheck.custom_call('__gpu$xla.gpu.triton')
  for cell, score in (('lstm', 'additive'), ('gru', 'dot')):
    args, length_B, projections = bench_kernels.inputs(shapes, cell, score)
    forward = lambda a, l: bench_kernels.fused_scan(cell, score, False, a, l)
    gradients = lambda a, l, p: bench_kernels.fused_gradients(cell, score, False, a, l, p)
    for fn, call_args, calls in ((forward, (args, length_B), 2), (gradients, (args, length_B, projections), 4)):
      exported = jax.export.export(jax.jit(fn), platforms=['cuda'], disabled_checks=[triton])(*call_args)
      assert exported.mlir_module().count('__gpu$xla.gpu.triton') == calls, (cell, score)


def test_kernels_per_step_count_what_runs_in_the_loops():
  """A gradient's call of 4 steps: two kernels in the forward loop and one in the backward loop run 4 times each,
  one kernel around the loops once: 3 per step. Only the device's streams are read, not a host line nor a device
  line that groups the same kernels otherwise."""
  counts = collections.Counter({'loop_add_fusion': 4, 'attnmt_lstm_step': 4, 'attnmt_lstm_step_bwd': 4, 'memset': 1})
  assert bench_kernels.in_loops_per_step(counts, steps=4) == 3.0

  def ev(name, start):
    return NS(name=name, start_ns=start, duration_ns=1, stats=[])

  stream = [ev('loop_add_fusion', t) for t in range(4)] + [ev('memset', 9)]
  device = NS(
    name='/device:GPU:0',
    lines=[NS(name='Stream #13(Compute)', events=stream), NS(name='XLA Ops', events=[ev('loop_add_fusion', 0)] * 4)],
  )
  host = NS(name='/host:CPU', lines=[NS(name='python', events=[ev('loop_add_fusion', 0)] * 4)])
  names = collections.Counter(e.name for e in traces.device_events(NS(planes=[host, device])))
  assert names == {'loop_add_fusion': 4, 'memset': 1}
  assert bench_kernels.in_loops_per_step(names, steps=4) == 1.0
