"""tools/: the paired A/B and the per-part profile of the training step, on a tiny model.

No timing is asserted: what is pinned is the tools' bookkeeping (variants, pairing, FLOPs per part,
which op belongs to which part) and that each runs end to end.
"""

import contextlib
import math
import sys

import jax
import numpy as np
import pytest

from attnmt.model.config import ModelConfig
from benchmarks import cases, flops, traces
from tools import ab_step, profile_step, variants

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
SIZES = cases.Sizes(batch=4, src_len=5, tgt_len=6)

EVENTS = []
PATCH = 'tools_test_patches:recording_patch'


@pytest.fixture(autouse=True)
def _patches_module(monkeypatch):
  """This module, importable as `tools_test_patches` whatever pytest's import mode."""
  monkeypatch.setitem(sys.modules, 'tools_test_patches', sys.modules[__name__])


@contextlib.contextmanager
def recording_patch():
  """A patch for `variants`' "patch" key, found by import path: records when it is entered and left."""
  EVENTS.append('enter')
  try:
    yield
  finally:
    EVENTS.append('exit')


def test_variants_parse_every_key_and_refuse_what_cannot_work():
  parsed = variants.parse(
    '{"vw": {"xla": {"xla_cpu_prefer_vector_width": 512}}, "small": {"model": '
    '{"score": "additive(size=6)"}}, "mine": {"patch": "tools_test_patches:recording_patch"}}'
  )
  assert parsed == {
    'vw': variants.Variant(xla={'xla_cpu_prefer_vector_width': 512}),
    'small': variants.Variant(model={'score': 'additive(size=6)'}),
    'mine': variants.Variant(patch=PATCH),
  }
  assert list(variants.with_controls(parsed)) == ['base', 'base_again', 'vw', 'small', 'mine']
  for text, message in [
    ('{"a": ', 'not valid JSON'),
    ('[1]', 'expected an object'),
    ('{"base": {}}', 'control'),
    ('{"a": 1}', "variant 'a': expected an object"),
    ('{"a": {"flags": {}}}', r"unknown key\(s\) \['flags'\]"),
    ('{"a": {"model": 3}}', "'model' must be an object"),
    ('{"a": {"patch": "no_colon"}}', 'expected "module:attribute"'),
    ('{"a": {"patch": "no_such_module_here:f"}}', "cannot import 'no_such_module_here'"),
    ('{"a": {"patch": "tools_test_patches:TINY_NOT_HERE"}}', 'has no callable'),
  ]:
    with pytest.raises(ValueError, match=message):
      variants.parse(text)


def test_model_fields_are_replaced_and_validated():
  assert variants.model_of(variants.Variant(), TINY) is TINY
  assert variants.model_of(variants.Variant(model={'score': 'general'}), TINY).score == 'general'
  with pytest.raises(ValueError, match='unknown model setting'):
    variants.model_of(variants.Variant(model={'scroe': 'dot'}), TINY)
  with pytest.raises(ValueError, match=r'model.score additive.size must be an integer >= 1, got 0$'):
    variants.model_of(variants.Variant(model={'score': 'additive(size=0)'}), TINY)
  assert variants.model_of(variants.Variant(model={'score': 'additive(size=6)'}), TINY).score == (
    'additive(size=6, coverage=none)'
  )


def test_a_variant_compiles_under_its_patch_and_with_its_model():
  EVENTS.clear()
  variant = variants.Variant(model={'score': 'additive(size=6)'}, patch=PATCH)
  compiled, state, batch = variants.compile_step(variant, TINY, SIZES)
  assert EVENTS == ['enter', 'exit']
  base_sizes = {np.shape(x) for x in jax.tree.leaves(variants.compile_step(variants.Variant(), TINY, SIZES)[1])}
  assert {np.shape(x) for x in jax.tree.leaves(state)} != base_sizes  # the score's size 6, not 8
  _, metrics = compiled(state, batch)
  assert all(math.isfinite(float(v)) for v in jax.tree.leaves(metrics))


def test_paired_summary_by_hand():
  """Differences (other - base) pair by pair: 0.1, -0.1, 0.3, 0.5 (hand-worked)."""
  s = ab_step.paired_summary([1.0, 2.0, 1.5, 1.0], [1.1, 1.9, 1.8, 1.5])
  assert s['median'] == pytest.approx(0.2)  # middle of -0.1, 0.1, 0.3, 0.5
  assert s['mean'] == pytest.approx(0.2)
  assert s['q1'] == pytest.approx(0.05) and s['q3'] == pytest.approx(0.35)  # inclusive quartiles
  # deviations from the mean -0.1, -0.3, 0.1, 0.3: sample standard deviation sqrt(0.2 / 3)
  assert s['mean_se'] == pytest.approx((0.2 / 3) ** 0.5 / 2)
  with pytest.raises(ValueError, match='equally long'):
    ab_step.paired_summary([1.0, 2.0], [1.0])


def test_ab_step_times_every_variant_and_the_control_in_pairs():
  result = ab_step.run({'small': variants.Variant(model={'score': 'additive(size=6)'})}, steps=3, cfg=TINY, sizes=SIZES)
  assert set(result['median_s']) == {'base', 'base_again', 'small'}
  assert set(result['vs_base']) == {'base_again', 'small'}
  assert all(len(t) == 3 and min(t) > 0 for t in result['times_s'].values())


def test_parts_add_up_to_the_train_step_flops():
  cfg = cases.BENCH_MODEL
  parts = profile_step.ideal_gflop(cfg, 64, 32, 32)
  assert set(parts) == set(profile_step.PARTS)
  assert sum(parts.values()) == pytest.approx(flops.train_step_flops(cfg, 64, 32, 32) / 1e9)


@pytest.mark.parametrize(
  'op_name, part',
  [
    ('jit(train_step)/jvp(Seq2Seq.features)/Seq2Seq.encode/encoder/while', 'encoder fwd'),
    ('jit(train_step)/transpose(jvp(Seq2Seq.features))/decoder/transpose(jvp())/dot_general', 'decoder bwd'),
    ('jit(train_step)/jvp(Seq2Seq.features)/decoder/decoder._output_features/tanh', 'output layer fwd'),
    ('jit(train_step)/transpose(jvp())/dot_general', 'vocab + loss bwd'),
    ('jit(train_step)/jvp(Seq2Seq.token_nll)/decoder.token_nll/dot_general', 'vocab + loss fwd'),
    ('jit(train_step)/transpose(jvp(Seq2Seq.token_nll))/decoder.token_nll/dot_general', 'vocab + loss bwd'),
    ('jit(train_step)/jvp(Seq2Seq.token_nll)/Seq2Seq.features/decoder/jvp()/while/body/tanh', 'decoder fwd'),
    ('jit(train_step)/mul', 'optimiser'),
    ('', 'no op_name (XLA copies, zero fills)'),
  ],
)
def test_op_names_map_to_parts(op_name, part):
  assert profile_step.part_of(op_name) == part


def _varint(n: int) -> bytes:
  out = bytearray()
  while True:
    out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
    n >>= 7
    if not n:
      return bytes(out)


def _field(number: int, value) -> bytes:
  if isinstance(value, int):
    return _varint(number << 3) + _varint(value)
  value = value.encode() if isinstance(value, str) else value
  return _varint(number << 3 | 2) + _varint(len(value)) + value


def test_instructions_read_from_a_hand_encoded_module_proto():
  """Names, opcodes and op_names, with fields the reader skips (a varint, a 200-byte string, fixed64)."""
  metadata = _field(1, 'dot_general') + _field(2, 'jit(f)/decoder/dot_general')
  dot = _field(1, 'dot.3') + _field(2, 'dot') + _field(3, b'\x08\x0b') + _field(7, metadata) + _field(35, 7)
  loop = _field(1, 'while.1') + _field(2, 'while') + _field(8, 'x' * 200)
  computation = _field(1, 'main') + _field(2, dot) + _field(2, loop) + _varint(5 << 3 | 1) + bytes(8)
  module = _field(1, 'jit_f') + _field(3, computation) + _field(6, 42)
  assert profile_step.instructions(module) == {'dot.3': ('dot', 'jit(f)/decoder/dot_general'), 'while.1': ('while', '')}


def test_profile_assigns_a_tiny_step_to_its_parts():
  result = profile_step.profile(TINY, SIZES, steps=2, peak_sizes=(64,))
  assert set(result['parts']) == set(profile_step.PARTS) and result['step_s'] > 0
  for part in (
    'encoder fwd',
    'decoder fwd',
    'vocab + loss fwd',
    'vocab + loss bwd',
    'decoder bwd',
    'encoder bwd',
    'optimiser',
  ):
    assert result['parts'][part]['wall_s'] > 0, part
    assert result['parts'][part]['busy_s'] >= result['parts'][part]['wall_s'] * 0.999, part


def test_the_vocabulary_products_of_a_compiled_step_fall_in_the_vocab_part():
  """The op_names the compiled step really carries: its three vocabulary products (forward, d h, d W) are in the
  vocabulary part, not the decoder's, whose op_names they share a prefix with."""
  program = profile_step._Program(TINY, SIZES)
  vocab_products = [
    profile_step.part_of(op_name)
    for _, op_name in program.ops.values()
    if 'decoder.token_nll' in op_name and op_name.endswith('dot_general')
  ]
  assert len(vocab_products) >= 3
  assert set(vocab_products) == {'vocab + loss fwd', 'vocab + loss bwd'}


def test_kernels_are_sorted_into_kinds_by_name():
  assert traces.kernel_kind('sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n') == 'matrix products'
  assert traces.kernel_kind('gemm_fusion_dot_17') == 'matrix products'
  assert traces.kernel_kind('[memcpy] DtoD') == 'copies and fills'
  assert traces.kernel_kind('input_dynamic_update_slice_fusion_2') == 'copies and fills'
  assert traces.kernel_kind('loop_tanh_fusion_4') == 'other kernels'


def test_device_kernels_by_hand():
  """Two steps on two streams: kernels [0, 4) and [2, 6) overlap, [10, 11) stands alone (ns); a host line
  and a device line that is not a stream are not counted."""
  from types import SimpleNamespace as NS

  def ev(name, start, duration):
    return NS(name=name, start_ns=start, duration_ns=duration, stats=[])

  device = NS(
    name='/device:GPU:0',
    lines=[
      NS(name='Stream #13(Compute)', events=[ev('gemm_fusion_dot', 0, 4), ev('loop_add_fusion', 10, 1)]),
      NS(name='Stream #14(MemcpyD2D)', events=[ev('[memcpy] DtoD', 2, 4)]),
      NS(name='XLA Ops', events=[ev('gemm_fusion_dot', 0, 4)]),
    ],
  )
  host = NS(name='/host:CPU', lines=[NS(name='python', events=[ev('step', 0, 100)])])
  data = NS(planes=[host, device])
  k = traces.device_kernels(data, steps=2, step_wall_s=20e-9)
  assert k['kernels_per_step'] == 1.5  # 3 kernels over 2 steps
  assert k['busy_s'] == pytest.approx(7e-9 / 2)  # union [0, 6) + [10, 11) = 7 ns, per step
  assert k['idle_fraction'] == pytest.approx(1 - 3.5 / 20)
  assert k['mean_kernel_us'] == pytest.approx(1e6 * 9e-9 / 3)  # 4 + 1 + 4 ns over 3 kernels
  assert k['by_kind_s'] == pytest.approx({'copies and fills': 2e-9, 'matrix products': 2e-9, 'other kernels': 0.5e-9})
  assert list(k['top_kernels_s'])[0] in ('gemm_fusion_dot', '[memcpy] DtoD')
  assert traces.device_kernels(NS(planes=[host]), steps=2, step_wall_s=1.0) is None


def test_unrolled_scans_compute_the_same_step_with_another_program():
  from tools import scan_unroll

  original = jax.lax.scan
  base, state, batch = variants.compile_step(variants.Variant(), TINY, SIZES)
  unrolled, state2, batch2 = variants.compile_step(variants.Variant(patch='tools.scan_unroll:by4'), TINY, SIZES)
  assert base.as_text() != unrolled.as_text()
  _, m1 = base(state, batch)
  _, m2 = unrolled(state2, batch2)
  np.testing.assert_allclose(float(m1['loss']), float(m2['loss']), rtol=1e-5)
  assert jax.lax.scan is original  # the patch is gone after use
  with scan_unroll.unrolled(3):
    assert jax.lax.scan is not original and jax.lax.scan.__wrapped__ is original


def test_batch_shapes_pad_every_seed_to_the_widest(tmp_path):
  """With fixed lengths every step has one shape. With length buckets, two seeds' stacked batch at a step is
  as wide as the wider of the two seeds' own batches (read here from data.batches, seed by seed)."""
  import collections

  from attnmt import data
  from experiments.configs import tiny
  from tools import batch_shapes

  config = tiny.get_config()
  config.data.data_dir = str(tmp_path / 'data')
  assert batch_shapes.shapes(config, num_seeds=2, steps=30) == {(16, 32): {'first_step': 0, 'steps': 30}}
  assert batch_shapes.step_seconds(config, (16, 32), calls=1) > 0  # --time_calls: the step at that shape runs
  d = config.data
  d.fixed_source_length = d.fixed_target_length = 0
  d.pad_to_multiple = 4
  found = batch_shapes.shapes(config, num_seeds=2, steps=60)
  prepared = data.prepare(d)
  its = [data.batches(prepared, 'train', d, seed=d.shuffle_seed + s, row_multiple=d.batch_size) for s in (0, 1)]
  expected, first = collections.Counter(), {}
  for step in range(60):
    a, b = next(its[0]), next(its[1])
    shape = (max(a['src'].shape[1], b['src'].shape[1]), max(a['tgt_in'].shape[1], b['tgt_in'].shape[1]))
    expected[shape] += 1
    first.setdefault(shape, step)
  assert found == {k: {'first_step': first[k], 'steps': n} for k, n in expected.items()}
  assert len(found) > 1 and list(found) == sorted(found, key=lambda k: first[k])
