"""Fused Pallas kernels for one recurrent step, the fast path of model.kernels='pallas': the LSTM and GRU cell
(cells.py), attention's scores, masked softmax and context (attention.py), what they share (blocks.py) and their
place in the model (wiring.py). The readable model modules import nothing from here: Seq2Seq hands its Encoder and
Decoder the steps `wiring.fast_path` returns, and tests/model/test_kernels*.py prove both paths equal.

On a GPU every operation of the readable path is a kernel launch, and inside a scan each runs once per step: the
recurrent product h W_hh, the gate arithmetic, the score, the masked softmax and the context are 8 to 21 small
kernels per iteration. Here each group is one Pallas kernel (on a GPU: Triton), and so is its backward pass
(`jax.custom_vjp`). The anchors: Marian's fused cells (marian-dev src/rnn/cells.h: `GRU` and `FastLSTM` compute
s U with one GEMM, then the gate arithmetic in one kernel, `gruOps`, or two, `lstmOpsC` and `lstmOpsO`; here the
product is inside the kernel too), Marian's MLP attention (src/rnn/attention.h: `attOps`, v . tanh(U h
+ W s) in one kernel, softmax and context apart; here all three are one kernel) and Persistent RNNs (Diamos et
al. 2016), which keep W_hh on chip for the whole sequence, one launch for all steps (not done here: below).

What is fused:
- `lstm_step`, `gru_step`: h W_hh, the bias, the gates and the padding select (`rnn.cell_update`,
  `rnn.lstm_gates`) in one forward kernel; the backward kernel forms the gate gradients from the stored
  activations (`rnn._lstm_gates_bwd`'s arithmetic) and dh_prev = dz W_hhᵀ in the same kernel.
- `attention.attend` (scores `dot`, `general`) and `additive_attend` (`additive`, `concat`,
  `normed_additive`): the scores, `normalizers.masked_softmax` (masked positions exactly 0 weight and 0 gradient,
  a row with no valid position all zeros) and the context, forward and backward.
What is not: the time loop (each step is still a launch: a persistent kernel would need the whole scan inside
it), the input projections x W_ih + b and the score's hoisted halves (one large product each, outside the scan),
and the weight gradients. dW_hh = Σ_t h_tᵀ dz_t is a reduction over the batch and, per step, exactly the thin
product that `deferred_scan` moves after the backward scan, so the kernels leave it to the caller: the VJPs form
it (one ordinary product per call) only when W_hh is differentiated (`symbolic_zeros`), and a scan that holds
W_hh constant passes a `tap` (B x G; the kernel never reads its value) whose cotangent is the cotangent of
h W_hh, then forms Σ_t h_tᵀ dtap_t once after the scan, as `deferred_scan` does for a product it sees. The model
passes as the tap that very product, stop_gradient(h) @ W_hh (wiring.cell_step): nothing computes it, and
`deferred_scan` defers it like any other. Likewise the attention kernels form the values' gradient only when the
values are differentiated: held constant, their gradient Σ_t a_tᵀ dc_t is one product after the scan, from the
weights and a tap on the context (an output already; wiring.attention_step).

A user's own score, window or normaliser is not handled: the kernels apply only to the built-in dot, general and
additive scores with the global window and softmax; everything else runs the readable path. `general` is `dot`
on the keys h W that `scores.General.keys` computes once per sentence; `scaled_dot` is `dot` with the query
scaled by 1/sqrt(Q) outside (equal up to rounding); for `additive` the caller passes W q and U h + b (and
coverage's C w_cov added to the keys) as the codebase hoists them (`scores._TanhScore`); `concat` is `additive`
without the bias, `normed_additive` with v = g v/|v| formed outside.

In the model: `wiring.fused_parts` says what a model runs fused (the cell steps of the encoder and the decoder, the
decoder's attention where the above allows it: the score's, window's and normaliser's classes declare `fuses`) and
why the rest is not, in one line said once (`notice`). Off a GPU nothing is fused, with that notice, unless a test
asks for the interpreter (`forced`).

Padding: Triton blocks are powers of two and its dot needs every dimension >= 16. The cell wrappers pad the
batch to a multiple of ROWS = 16 and the hidden size to a multiple of its column block (a power of two in
[16, COLUMNS]) gate by gate; the attention wrappers pad the key and value sizes likewise and the source length
to a power of two >= 16 (one program per sentence, the batch unpadded). The padding is zeros in kept-out rows or
masked positions, and the results are sliced back. At sizes that are already multiples (H = 128, B = 64) the pads
and slices vanish; otherwise each is an extra operation per call. Products accumulate in float32 (float32
inputs at the Triton lowering's default precision: TF32 on a GPU, as XLA's default; `highest` would be IEEE),
the gate and softmax arithmetic runs in float32, and outputs have the inputs' dtype (float32 or bfloat16,
`model.dtype`).
`interpret=None` runs Pallas's interpreter unless the default backend is 'gpu' (tests/model/test_kernels.py).
"""

from attnmt.model.kernels.attention import additive_attend, attend
from attnmt.model.kernels.cells import gru_step, lstm_step
from attnmt.model.kernels.wiring import FastPath, Fused, fast_path, forced, fused_parts, notice

__all__ = [
  'FastPath',
  'Fused',
  'additive_attend',
  'attend',
  'fast_path',
  'forced',
  'fused_parts',
  'gru_step',
  'lstm_step',
  'notice',
]
