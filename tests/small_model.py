"""The small model the model tests build on, defined once: every size distinct, so that a transposed
shape fails. `conftest.py` hands it to tests as the `small` fixture; tests that need it at import time
(in parametrize lists, or for module-level configs) import `SMALL` from here."""

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
