"""profile_step's split of the model FLOPs adds up to the benchmark's count; op names map to parts."""
import pytest

from benchmarks import cases, flops, profile_step


def test_parts_add_up_to_the_train_step_flops():
  cfg = cases.BENCH_MODEL
  parts = profile_step.ideal_gflop(cfg, 64, 32, 32)
  assert set(parts) == set(profile_step.PARTS)
  assert sum(parts.values()) == pytest.approx(flops.train_step_flops(cfg, 64, 32, 32) / 1e9)


@pytest.mark.parametrize('op_name, part', [
    ('jit(train_step)/jvp(Seq2Seq.features)/Seq2Seq.encode/encoder/while', 'encoder fwd'),
    ('jit(train_step)/transpose(jvp(Seq2Seq.features))/decoder/transpose(jvp())/dot_general', 'decoder bwd'),
    ('jit(train_step)/jvp(Seq2Seq.features)/decoder/decoder._output_features/tanh', 'output layer fwd'),
    ('jit(train_step)/transpose(jvp())/dot_general', 'vocab + loss bwd'),
    ('jit(train_step)/mul', 'optimiser'),
    ('', 'no op_name (XLA copies, zero fills)'),
])
def test_op_names_map_to_parts(op_name, part):
  assert profile_step.part_of(op_name) == part
