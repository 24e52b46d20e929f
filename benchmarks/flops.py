"""Model FLOPs counted from the shapes: 2·m·n·k for every matrix product the model performs.

What is counted: every matrix product of the forward pass (the encoder's input and recurrent
products, the attention keys, queries, scores and context, the decoder recurrence, the output layer),
at the sizes the implementation computes them. What is not: elementwise work (gates, tanh, softmax),
embedding look-ups and the optimiser update. The backward pass of a product C = A B needs two
products of the same size (dA = dC Bᵀ, dB = Aᵀ dC), so a training step counts 3 × forward.
These are *model* FLOPs (what the math needs), the numerator of every "fraction of peak" figure.
Letters: B batch, S source positions, T target steps, E embedding, h encoder size per direction,
H annotation size, D decoder size, A attention size, V vocabulary, G gates.
"""

from __future__ import annotations

from attnmt.model import forms, scores, windows
from attnmt.model.config import ModelConfig
from attnmt.model.rnn import num_gates
from attnmt.model.registry import matmul_flops as _mm


def encoder_flops(cfg: ModelConfig, batch: int, src_len: int) -> int:
  """Input projection x W_ih and recurrence h W_hh of every layer and direction, over all positions."""
  g, h, rows = num_gates(cfg.cell), cfg.encoder_hidden_size, batch * src_len
  directions = 2 if cfg.bidirectional else 1
  total, width = 0, cfg.embed_size
  for _ in range(cfg.encoder_layers):
    total += directions * (_mm(rows, g * h, width) + _mm(rows, g * h, h))
    width = cfg.annotation_size
  return total


def memory_flops(cfg: ModelConfig, batch: int, src_len: int) -> int:
  """Once per sentence: the score's keys (e.g. U h_i) and the bridge tanh(W mean_i h_i)."""
  hsz = cfg.annotation_size
  total = batch * scores.build(cfg).flops(src_len)[0]
  if cfg.init_state == 'bridge':
    total += _mm(batch, cfg.decoder_hidden_size * cfg.decoder_layers, hsz)
  return total


def attention_step_flops(cfg: ModelConfig, rows: int, src_len: int) -> int:
  """One decoder step's attention for `rows` queries: the score's query half and scores, the window's
  centre (each definition counts its own: attnmt/model/scores.py, attnmt/model/windows.py), and the context."""
  context = _mm(rows * src_len, 1, cfg.annotation_size)  # c = sum_i a_i h_i
  return context + rows * (scores.build(cfg).flops(src_len)[1] + windows.build(cfg).flops())


def decoder_flops(cfg: ModelConfig, rows: int, src_len: int, steps: int) -> int:
  """`steps` decoder steps for `rows` hypotheses: recurrence, attention and output layer."""
  g, d, e, v = num_gates(cfg.cell), cfg.decoder_hidden_size, cfg.embed_size, cfg.target_vocab_size
  r = rows * steps
  form = forms.build(cfg)
  total = _mm(r, g * d, e + form.input_size()) + _mm(r, g * d, d)  # layer 0: [E y ; feed] W_ih, s W_hh
  total += (cfg.decoder_layers - 1) * (_mm(r, g * d, d) + _mm(r, g * d, d))
  total += steps * attention_step_flops(cfg, rows, src_len)
  total += form.flops(r) + _mm(r, v, form.output_size())  # the form's own products, then W_out
  return total


def forward_flops(cfg: ModelConfig, batch: int, src_len: int, tgt_len: int) -> int:
  """One teacher-forced forward pass over a batch."""
  return (
    encoder_flops(cfg, batch, src_len) + memory_flops(cfg, batch, src_len) + decoder_flops(cfg, batch, src_len, tgt_len)
  )


def train_step_flops(cfg: ModelConfig, batch: int, src_len: int, tgt_len: int) -> int:
  """Forward plus backward (2 × forward): 3 × the forward pass."""
  return 3 * forward_flops(cfg, batch, src_len, tgt_len)


def decode_flops(cfg: ModelConfig, batch: int, src_len: int, steps: int, beam: int = 1) -> int:
  """Encoding a batch once, then `steps` decoder steps for batch × beam hypotheses."""
  return (
    encoder_flops(cfg, batch, src_len)
    + memory_flops(cfg, batch, src_len)
    + decoder_flops(cfg, batch * beam, src_len, steps)
  )
