"""benchmarks/peer.py without PyTorch: the attnmt half of the command writes its JSON at the tiny size, a PyTorch
row without PyTorch is one line naming the fix and exit 2, and the batch and the ratios mean what the JSON says.

No timing is asserted: the figures come from a quiet run of the command (benchmarks/README.md, "PyTorch peer")."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from benchmarks import peer

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _peer(*args, env=None):
  command = [sys.executable, '-m', 'benchmarks.peer', '--size=tiny', '--pairs=1', *args]
  return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


def _parameters(spec: dict) -> int:
  """The peer's model counted from its sizes alone, with attnmt's one bias per recurrent layer (and the GRU's
  b_hn)."""
  v_s, v_t, e = spec['source_vocab_size'], spec['target_vocab_size'], spec['embed_size']
  h, d, a, g = (spec[k] for k in ('encoder_hidden_size', 'decoder_hidden_size', 'attention_size', 'deep_output_size'))
  gates, gru = (4, 0) if spec['cell'] == 'lstm' else (3, 1)
  encoder = v_s * e + 2 * (e * gates * h + h * gates * h + gates * h + gru * h)
  attention = 2 * h * a + a + d * a + a  # U, b, W, v
  decoder = v_t * e + (2 * h * d + d) + (e + 2 * h) * gates * d + d * gates * d + gates * d + gru * d
  output = (d + 2 * h + e) * g + g + g * v_t + v_t
  return encoder + attention + decoder + output


@pytest.mark.slow
def test_the_attnmt_half_writes_its_json(tmp_path):
  isa = 'avx2' if peer.processor()['avx2'] else 'native'  # avx2: XLA must accept its flag
  out = tmp_path / 'peer.json'
  done = _peer('--frameworks=attnmt', '--steps=2', '--warmup=1', f'--isa={isa}', f'--out={out}')
  assert done.returncode == 0, done.stderr[-3000:]
  result = json.loads(out.read_text())
  assert result['frameworks'] == ['attnmt'] and result['isa'] == isa
  if isa == 'avx2':
    assert '--xla_cpu_max_isa=AVX2' in result['env']['XLA_FLAGS'] and result['env']['ATEN_CPU_CAPABILITY'] == 'avx2'
  assert result['processor']['model'] and result['versions']['jax'] and result['cpus']
  job = result['job']
  assert job['config'] == 'experiments/configs/tiny.py' and job['what'] == ['train', 'greedy']
  assert result['parameters'] == {'attnmt': _parameters(job['torch_spec'])}
  for what in ('train', 'greedy'):
    entry = result['results'][what]['attnmt']
    assert len(entry['times_s']) == 1 and len(entry['times_s'][0]) == 2 and entry['median_s'] > 0
  (worker,) = result['workers']
  assert (
    worker['framework'] == 'attnmt'
    and worker['cpus'] == result['cpus']
    and set(worker['compile_s'])
    == {
      'train',
      'greedy',
    }
  )
  assert np.isfinite(worker['eval_loss'])


def test_a_pytorch_row_without_pytorch_is_one_line_and_exit_2(tmp_path):
  # An import of torch that fails, as where it is not installed (here it may be: the peer's extra).
  (tmp_path / 'torch').mkdir()
  (tmp_path / 'torch' / '__init__.py').write_text("raise ImportError(\"No module named 'torch'\")\n")
  env = {**os.environ, 'PYTHONPATH': os.pathsep.join([str(tmp_path), os.environ.get('PYTHONPATH', '')])}
  done = _peer('--frameworks=torch', f'--out={tmp_path / "peer.json"}', env=env)
  assert done.returncode == 2
  (line,) = done.stderr.strip().splitlines()
  assert line.startswith('error: ') and "pip install -e '.[peer]'" in line and '--frameworks=attnmt' in line
  assert not (tmp_path / 'peer.json').exists()


def test_the_synthetic_batch_is_a_bucketed_batch_in_attnmt_layout():
  batch = peer.synthetic_batch((50, 60), rows=32, widths=(16, 24))
  assert batch['src'].shape == (32, 16) and batch['tgt_in'].shape == batch['tgt_out'].shape == (32, 24)
  for side, width, vocab in (('src', 16, 50), ('tgt', 24, 60)):
    length = batch[f'{side}_len']
    assert length[0] == width and np.all((length > width - 8) & (length <= width))
    ids = batch['src' if side == 'src' else 'tgt_out']
    for row, n in zip(ids, length):
      assert row[n - 1] == 2 and np.all(row[n:] == 0) and np.all((row[: n - 1] >= 4) & (row[: n - 1] < vocab))
  for tgt_in, tgt_out, n in zip(batch['tgt_in'], batch['tgt_out'], batch['tgt_len']):
    assert tgt_in[0] == 1 and np.array_equal(tgt_in[1:n], tgt_out[: n - 1]) and np.all(tgt_in[n:] == 0)


def test_the_ratio_is_pytorch_time_over_attnmt_time_pair_by_pair():
  runs = [
    {'framework': 'attnmt', 'times_s': {'train': [1.0, 2.0, 3.0]}},
    {'framework': 'torch', 'times_s': {'train': [4.0, 4.0, 9.0]}},
    {'framework': 'attnmt', 'times_s': {'train': [1.0]}},
    {'framework': 'torch', 'times_s': {'train': [3.0]}},
  ]
  train = peer.summary(runs, ['train'], ['attnmt', 'torch'])['train']
  assert train['attnmt']['process_medians_s'] == [2.0, 1.0] and train['torch']['process_medians_s'] == [4.0, 3.0]
  assert train['torch_over_attnmt'] == {'median': 2.5, 'per_pair': [2.0, 3.0]}
  assert train['attnmt']['median_s'] == 1.5


def test_busy_share_counts_other_work_on_the_given_cpus_only():
  """Hand-worked /proc/stat readings: busy is everything but idle and iowait, over the given CPUs together."""
  before = peer.cpu_times(
    'cpu  300 0 100 1000 0 0 0 0 0 0\n'
    'cpu0 100 0 50 500 0 0 0 0 0 0\n'
    'cpu1 200 0 50 500 0 0 0 0 0 0\n'
    'intr 12345 0 0\n'
    'ctxt 999\n'
  )
  assert before == {0: (150, 650), 1: (250, 750)}
  # cpu0: 100 ticks pass, 80 busy (60 user, 10 system, 10 steal), 20 idle or iowait; cpu1: 100 ticks, all idle
  after = peer.cpu_times('cpu0 160 0 60 510 10 0 0 10 0 0\ncpu1 200 0 50 600 0 0 0 0 0 0\n')
  assert after == {0: (230, 750), 1: (250, 850)}
  assert peer.busy_share(before, after, [0]) == 0.8
  assert peer.busy_share(before, after, [1]) == 0.0
  assert peer.busy_share(before, after, [0, 1]) == 0.4
  assert peer.busy_share(before, before, [0]) == 0.0  # no ticks between the readings


def test_measure_busy_reads_this_machine():
  cpus = sorted(os.sched_getaffinity(0))
  share = peer.measure_busy(cpus, seconds=0.2)
  assert share is None or 0.0 <= share <= 1.0
  if os.path.exists('/proc/stat'):
    assert share is not None
