"""The benchmark's code path on a tiny model: every section runs and reports positive figures.

No timing is asserted here: speed is measured by `python -m benchmarks.bench`, not by tests.
"""

import json

import pytest

from attnmt.model.config import ModelConfig
from benchmarks import bench, cases, flops
from benchmarks.cases import BENCH_MODEL, Sizes

TINY = ModelConfig(
  dropout=0.0,
  source_vocab_size=30,
  target_vocab_size=31,
  embed_size=8,
  encoder_hidden_size=8,
  decoder_hidden_size=16,
  score='additive(size=8)',
  query_timing='bahdanau(deep_output_size=8)',
)


def _positive(d: dict, keys) -> None:
  for k in keys:
    assert d[k] > 0, (k, d[k])


@pytest.mark.slow
def test_bench_runs_every_section_on_a_tiny_model(tmp_path, monkeypatch):
  # The scores section runs every score but the model's own, and `luong` timing: the names are checked here;
  # two of them run (each is the train section's code on another config, and the model tests cover each score).
  every = cases.score_variants(TINY)
  assert set(every) == {'none', 'normed_additive', 'dot', 'scaled_dot', 'general', 'concat', 'location', 'luong'}
  monkeypatch.setattr(cases, 'score_variants', lambda cfg: {k: every[k] for k in ('dot', 'luong')})
  sizes = Sizes(batch=4, src_len=5, tgt_len=6, beam=2, steps=2, warmup=1)
  sections = bench.SECTIONS + bench.OPTIONAL
  result = bench.run(
    TINY, sizes, sections, peak_sizes=(64,), peak_repeats=2, log=lambda _: None, seeds=(1, 2), decode_seeds=(2,)
  )
  result = json.loads(json.dumps(result))  # what --out writes
  assert set(result) >= {
    'machine',
    'model',
    'sizes',
    'peak',
    'train',
    'greedy',
    'beam',
    'seeds',
    'scores',
    'decode_seeds',
  }
  _positive(result['peak'], ['gflops'])
  _positive(
    result['train'],
    [
      'compile_s',
      'step_s',
      'target_tokens_per_s',
      'gflop',
      'gflops',
      'fraction_of_peak',
      'fraction_of_start_peak',
      'peak_gflops',
      'forward_s',
      'forward_backward_s',
    ],
  )
  assert len(result['train']['peaks_gflops_all']) == sizes.steps + 1  # a probe before and after each call
  for key in ('greedy', 'beam'):
    _positive(result[key], ['compile_s', 'call_s', 'sentences_per_s', 'gflop', 'fraction_of_peak'])
  assert [s['seeds'] for s in result['seeds']] == [1, 2]  # each K one vmapped program (K = 4 compiles a third)
  for s in result['seeds']:
    _positive(s, ['step_s', 'tokens_per_s_per_seed', 'fraction_of_peak'])
    assert s['device_peak_bytes'] is None  # a CPU device keeps no memory statistics
  assert set(result['scores']) == {'dot', 'luong'}
  for r in result['scores'].values():
    _positive(r, ['step_s', 'target_tokens_per_s', 'fraction_of_peak'])
  (d,) = result['decode_seeds']
  assert d['seeds'] == 2
  _positive(d, ['call_s', 'sequential_s', 'speedup', 'sentences_per_s', 'compile_one_s'])
  # The vmapped program decodes what each seed decodes alone (on the CPU bit for bit at this size).
  assert d['tokens_equal'] == 1.0
  table = bench.table(result)
  assert 'train step' in table and 'greedy' in table and 'luong' in table and '2 seeds vmapped' in table


def test_sections_outside_the_default_run_only_when_named():
  assert 'decode_seeds' not in bench.SECTIONS and 'decode_seeds' in bench.OPTIONAL
  try:
    bench.run(TINY, Sizes(), ('decode_seed',))
  except ValueError as e:
    assert 'unknown section' in str(e) and 'decode_seeds' in str(e)
  else:
    raise AssertionError('a misspelt section was accepted')


def test_flop_count_of_the_bench_config():
  """docs/design.md, "Bench config": forward 36.8 GFLOP, a training step 110.4 (backward = 2 x forward)."""
  forward = flops.forward_flops(BENCH_MODEL, 64, 32, 32)
  assert 36e9 < forward < 38e9
  assert flops.train_step_flops(BENCH_MODEL, 64, 32, 32) == 3 * forward
  # Greedy decoding performs the teacher-forced forward pass's products; a beam of 5 five times the decoder's.
  assert flops.decode_flops(BENCH_MODEL, 64, 32, 32) == forward
  assert flops.decode_flops(BENCH_MODEL, 64, 32, 32, beam=5) > 4 * forward


def test_timed_with_peak_probes_before_and_after_every_timed_call():
  from benchmarks.timing import timed_with_peak

  log = []

  class Probe:
    def gflops(self):
      log.append('probe')
      return 100.0 + len(log)

  timed = timed_with_peak(lambda: log.append('call'), steps=3, warmup=2, probe=Probe())
  assert log == ['call', 'call', 'probe', 'call', 'probe', 'call', 'probe', 'call', 'probe']
  assert len(timed.seconds) == 3 and timed.peaks_gflops == [103.0, 105.0, 107.0, 109.0]


def test_paired_fractions_by_hand():
  """10 GFLOP calls of 0.1, 0.2, 0.05 s (100, 50, 200 GFLOP/s) between probes 100, 300, 100, 300:
  each call's peak is the mean of its neighbours, 200, so the fractions are 0.5, 0.25, 1.0."""
  import pytest
  from benchmarks.timing import Timed, paired_fractions

  f = paired_fractions(10.0, Timed([0.1, 0.2, 0.05], [100.0, 300.0, 100.0, 300.0]))
  assert f['fraction_of_peak'] == pytest.approx(0.5)
  assert f['peak_gflops'] == pytest.approx(200.0)
  assert (f['fraction_min'], f['fraction_max']) == (pytest.approx(0.25), pytest.approx(1.0))
  # The median of per-call fractions is not the median rate over the median peak: a slow call in a
  # slow phase and a fast call in a fast phase are each judged against their own moment.
  g = paired_fractions(10.0, Timed([0.1, 0.05], [100.0, 100.0, 200.0]))  # peaks 100, 150
  assert g['fraction_of_peak'] == pytest.approx((1.0 + 200.0 / 150.0) / 2)
  with pytest.raises(ValueError, match='n \\+ 1 peak probes'):
    paired_fractions(10.0, Timed([0.1], [100.0]))


def test_main_job_model_is_the_main_configs():
  from benchmarks import bench
  from experiments.configs import main_ablation

  config = main_ablation.get_config()
  cfg, sizes = bench.main_job_model()
  assert cfg.decoder_hidden_size == config.model.decoder_hidden_size
  assert cfg.score == ModelConfig(score=config.model.score).score  # the selection with every option written out
  assert cfg.source_vocab_size == cfg.target_vocab_size == config.data.vocab_size
  assert (sizes.batch, sizes.src_len, sizes.tgt_len) == (config.data.batch_size, 32, 32)


def test_sharing_by_hand():
  """One process alone: 10 ms per 5-seed step. Three at once: 20, 24 and 25 ms. In turn the three variants
  take 30 ms, at once 25 ms: 1.2x. Windows [0, 10], [2, 11], [1, 12]: all three timed within [2, 10], 8 s of
  the longest window, 11 s."""
  from benchmarks import sharing

  def run(step_s, window):
    return {'seeds': [{'seeds': 5, 'step_s': step_s, 'timed_window': window}]}

  s = sharing.summarise(run(0.010, [0, 5]), [run(0.020, [0, 10]), run(0.024, [2, 11]), run(0.025, [1, 12])])
  assert s['processes'] == 3 and s['seeds_per_process'] == 5
  assert s['in_turn_s'] == pytest.approx(0.030) and s['at_once_s'] == pytest.approx(0.025)
  assert s['at_once_speedup'] == pytest.approx(1.2)
  assert s['overlap_fraction'] == pytest.approx(8 / 11)
  assert '1.20x in turn' in sharing.table(s)
  with pytest.raises(ValueError, match='same K'):
    sharing.summarise(run(0.01, [0, 1]), [{'seeds': [{'seeds': 4, 'step_s': 0.01, 'timed_window': [0, 1]}]}])


def test_device_peak_bytes_reads_the_allocators_peak(monkeypatch):
  import jax

  class Device:
    def __init__(self, stats):
      self.stats = stats

    def memory_stats(self):
      return self.stats

  monkeypatch.setattr(jax, 'devices', lambda: [Device({'bytes_in_use': 5, 'peak_bytes_in_use': 3 << 30})])
  assert cases.device_peak_bytes() == 3 << 30
  result = {
    'seeds': [
      {
        'seeds': 2,
        'step_s': 0.5,
        'tokens_per_s_per_seed': 100.0,
        'device_peak_bytes': 3 << 30,
        'gflop': 1.0,
        'gflops': 2.0,
        'peak_gflops': 4.0,
        'fraction_of_peak': 0.5,
        'fraction_of_start_peak': 0.5,
        'compile_s': 1.0,
      }
    ],
    'peak': {'probe_n': 0, 'gflops': 4.0, 'start': {'dtype': 'float32'}, 'end': {'gflops': 4.0}},
    'machine': {'cpu': 'x', 'cpu_cores': 1, 'jax': '0'},
    'sizes': {'batch': 1, 'tgt_len': 1},
  }
  assert 'device peak 3.00 GiB' in bench.table(result)
  monkeypatch.setattr(jax, 'devices', lambda: [Device(None)])
  assert cases.device_peak_bytes() is None
