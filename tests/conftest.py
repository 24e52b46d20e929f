"""What the tests share.

`small`: the small model the model tests build on, every size distinct, so that a transposed shape fails.
"""

import pytest

SMALL = dict(
  dropout=0.0,
  source_vocab_size=20,
  target_vocab_size=23,
  embed_size=8,
  encoder_hidden_size=6,
  decoder_hidden_size=12,
  attention_size=5,
  output_size=7,
  window_size=2,
  max_source_length=10,
)


@pytest.fixture
def small() -> dict:
  """The small model's ModelConfig fields (a fresh dict per test)."""
  return dict(SMALL)
