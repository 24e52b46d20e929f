"""The main job's model in PyTorch, written the way a PyTorch user would: the peer that benchmarks/peer.py times
attnmt against.

"The way a PyTorch user would" means the library's ordinary building blocks in eager mode, as its tutorials and
most NMT code write them: `nn.Embedding`; `nn.LSTM(bidirectional=True)` (or `nn.GRU`) over a
`pack_padded_sequence` for the encoder; an `nn.LSTMCell` (or `nn.GRUCell`) stepped in a Python loop for the
decoder, with Bahdanau attention (masked softmax over the source) and the deep output; `nn.CrossEntropyLoss(
label_smoothing=..., ignore_index=PAD)`; `torch.optim.Adam` with its defaults (the for-loop implementation on a
CPU) and a `LambdaLR` schedule; `clip_grad_norm_`; greedy decoding under `torch.inference_mode()` that stops once
every row has emitted EOS. `torch.set_num_threads` is set to the cores the run is given. No `torch.compile`, no
TorchScript, no fused or hand-batched kernels: those are what attnmt's side does by compiling, and the question
the comparison asks is how far that is ahead of the eager code a user writes first. `--frameworks=torch_compile`
adds one row with the decoder step and the output layer under `torch.compile`, the simplest compiled variant.

The model is attnmt's at the configuration peer.py reads (Bahdanau et al. 2015 as attnmt/model/forms.py writes
it; one layer each side, bridge initial state, dropout on the embeddings and before the vocabulary projection):

    h_i = [fwd_i ; bwd_i];  s_0 = tanh(W_b mean_i h_i + b_b);  e_ti = v . tanh(W s_{t-1} + U h_i + b)
    c_t = sum_i softmax(e_t)_i h_i;  s_t = RNN(s_{t-1}, [E y_{t-1} ; c_t])
    p(y_t) = softmax(W_o tanh(W_g [s_t ; c_t ; E y_{t-1}] + b_g) + b_o)

`load_attnmt` copies attnmt's parameters in, so that both compute the same function from the same start
(peer.py compares their loss and greedy tokens). The one difference in parameters: PyTorch's recurrent layers
carry two bias vectors (`bias_ih`, `bias_hh`) where attnmt's have one (`b`; the GRU's extra `b_hn` is
`bias_hh`'s third part). At the main size that is 1,024 more parameters in PyTorch (819,536 against 818,512):
the encoder's two directions' `bias_hh` (2 x 256) and the decoder cell's (512). They are loaded as zeros and
trained, as a user leaves them; they cost one vector addition per gate pre-activation, and Adam moves the
biases with two parameters where attnmt moves one, so the trained values drift apart, the work does not.
"""

from __future__ import annotations

import copy
import math

import numpy as np
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

PAD, BOS, EOS = 0, 1, 2  # attnmt's token conventions (attnmt/model/seq2seq.py)


class Seq2Seq(nn.Module):
  """The attentional encoder-decoder of `spec` (peer.py's `torch_spec`: sizes, cell, dropout)."""

  def __init__(self, spec: dict):
    super().__init__()
    e, h, d = spec['embed_size'], spec['encoder_hidden_size'], spec['decoder_hidden_size']
    a, g, lstm = spec['attention_size'], spec['deep_output_size'], spec['cell'] == 'lstm'
    self.lstm = lstm
    self.src_embed = nn.Embedding(spec['source_vocab_size'], e)
    self.tgt_embed = nn.Embedding(spec['target_vocab_size'], e)
    self.encoder = (nn.LSTM if lstm else nn.GRU)(e, h, batch_first=True, bidirectional=True)
    self.bridge = nn.Linear(2 * h, d)
    self.key = nn.Linear(2 * h, a)  # U h_i + b, once per sentence
    self.query = nn.Linear(d, a, bias=False)  # W s_{t-1}, every step
    self.v = nn.Linear(a, 1, bias=False)
    self.cell = (nn.LSTMCell if lstm else nn.GRUCell)(e + 2 * h, d)
    self.deep_output = nn.Linear(d + 2 * h + e, g)
    self.out = nn.Linear(g, spec['target_vocab_size'])
    self.dropout = nn.Dropout(spec['dropout'])

  def encode(self, src, src_len):
    """Annotations (B x S x 2h, zero at padding), keys, the source mask and the decoder's first state."""
    x = self.dropout(self.src_embed(src))
    packed = pack_padded_sequence(x, src_len, batch_first=True, enforce_sorted=False)
    out, _ = self.encoder(packed)
    annotations, _ = pad_packed_sequence(out, batch_first=True, total_length=src.size(1))
    mask = torch.arange(src.size(1))[None, :] < src_len[:, None]
    mean = annotations.sum(1) / src_len[:, None].clamp(min=1)
    s = torch.tanh(self.bridge(mean))
    return annotations, self.key(annotations), mask, (s, torch.zeros_like(s)) if self.lstm else s

  def step(self, emb, state, annotations, keys, mask):
    """One decoder step from E y_{t-1}: the new state, s_t, c_t and the attention weights."""
    query = state[0] if self.lstm else state
    scores = self.v(torch.tanh(keys + self.query(query)[:, None])).squeeze(-1)
    weights = scores.masked_fill(~mask, float('-inf')).softmax(-1)
    context = torch.bmm(weights[:, None], annotations).squeeze(1)
    state = self.cell(torch.cat([emb, context], -1), state)
    return state, state[0] if self.lstm else state, context, weights

  def logits(self, s, context, emb):
    return self.out(self.dropout(torch.tanh(self.deep_output(torch.cat([s, context, emb], -1)))))

  def forward(self, src, src_len, tgt_in):
    """Teacher-forced logits, B x T x V."""
    annotations, keys, mask, state = self.encode(src, src_len)
    emb = self.dropout(self.tgt_embed(tgt_in))
    states, contexts = [], []
    for t in range(tgt_in.size(1)):
      state, s, context, _ = self.step(emb[:, t], state, annotations, keys, mask)
      states.append(s)
      contexts.append(context)
    return self.logits(torch.stack(states, 1), torch.stack(contexts, 1), emb)


@torch.inference_mode()
def greedy(model: Seq2Seq, src, src_len, max_len: int):
  """(tokens B x T, lengths, attention B x T x S, log-probabilities): the most probable token (PAD and BOS
  excluded) at every step, until every row has emitted EOS or `max_len` tokens."""
  model.eval()
  annotations, keys, mask, state = model.encode(src, src_len)
  batch = src.size(0)
  prev = torch.full((batch,), BOS, dtype=torch.long)
  done = torch.zeros(batch, dtype=torch.bool)
  score = torch.zeros(batch)
  tokens, weights = [], []
  for _ in range(max_len):
    emb = model.tgt_embed(prev)
    state, s, context, w = model.step(emb, state, annotations, keys, mask)
    log_probs = model.logits(s, context, emb).log_softmax(-1)
    log_probs[:, [PAD, BOS]] = float('-inf')
    logp, prev = log_probs.max(-1)
    prev = prev.masked_fill(done, PAD)
    score += logp.masked_fill(done, 0.0)
    tokens.append(prev)
    weights.append(w.masked_fill(done[:, None], 0.0))
    done |= prev == EOS
    if done.all():
      break
  tokens = torch.stack(tokens, 1)
  return tokens, (tokens != PAD).sum(1), torch.stack(weights, 1), score


def schedule_factor(train: dict, step: int) -> float:
  """attnmt's learning-rate schedule (train_step.learning_rate_schedule) as a factor of the peak, for LambdaLR."""
  warmup = max(int(train['warmup_steps']), 1)
  if step < warmup:
    return step / warmup
  after = step - warmup
  if train['schedule'] == 'cosine':
    decay = max(train['num_steps'] - warmup, 1)
    return 0.5 * (1.0 + math.cos(math.pi * min(after, decay) / decay))
  if train['schedule'] == 'rsqrt':
    return math.sqrt(warmup / (after + warmup))
  return 1.0


class Trainer:
  """Adam, the schedule, clipping and the label-smoothed loss, as a training loop holds them."""

  def __init__(self, model: Seq2Seq, train: dict):
    self.model, self.clip_norm = model, train['clip_norm']
    self.optimizer = torch.optim.Adam(model.parameters(), lr=train['learning_rate'])
    self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lambda step: schedule_factor(train, step))
    self.criterion = nn.CrossEntropyLoss(ignore_index=PAD, label_smoothing=train['label_smoothing'])

  def loss(self, batch: dict):
    logits = self.model(batch['src'], batch['src_len'], batch['tgt_in'])
    return self.criterion(logits.reshape(-1, logits.size(-1)), batch['tgt_out'].reshape(-1))

  def step(self, batch: dict) -> float:
    self.model.train()
    self.optimizer.zero_grad()
    loss = self.loss(batch)
    loss.backward()
    if self.clip_norm > 0:
      nn.utils.clip_grad_norm_(self.model.parameters(), self.clip_norm)
    self.optimizer.step()
    self.scheduler.step()
    return loss.item()


def load_attnmt(model: Seq2Seq, arrays: dict) -> None:
  """Copies attnmt's parameters (flat names 'decoder/W_out' -> arrays, as peer_attnmt saves them) into `model`;
  every array is read and every parameter set (PyTorch's second recurrent biases to zero, see the docstring)."""
  read = set()

  def get(name, transpose=True):  # attnmt's matrices are input x output, nn.Linear's output x input
    read.add(name)
    x = torch.from_numpy(np.asarray(arrays[name]))
    return x.T if transpose and x.ndim == 2 else x

  def recurrent(prefix):
    b = get(f'{prefix}/b')
    b_hh = torch.zeros_like(b)
    if not model.lstm:  # the GRU's n gate: tanh(x_n + r (h W_hn + b_hn)), the same in both
      b_hh[2 * (b.numel() // 3) :] = get(f'{prefix}/b_hn')
    return get(f'{prefix}/W_ih'), get(f'{prefix}/W_hh'), b, b_hh

  values = {
    'src_embed.weight': get('encoder/embed', False),
    'tgt_embed.weight': get('decoder/embed', False),
    'bridge.weight': get('decoder/W_bridge'),
    'bridge.bias': get('decoder/b_bridge'),
    'key.weight': get('decoder/attention/U'),
    'key.bias': get('decoder/attention/b'),
    'query.weight': get('decoder/attention/W'),
    'v.weight': get('decoder/attention/v'),
    'deep_output.weight': get('decoder/W_g'),
    'deep_output.bias': get('decoder/b_g'),
    'out.weight': get('decoder/W_out'),
    'out.bias': get('decoder/b_out'),
  }
  for suffix, prefix in (('_l0', 'encoder/layer0_fwd'), ('_l0_reverse', 'encoder/layer0_bwd')):
    names = [f'encoder.{k}{suffix}' for k in ('weight_ih', 'weight_hh', 'bias_ih', 'bias_hh')]
    values.update(zip(names, recurrent(prefix)))
  values.update(zip(['cell.weight_ih', 'cell.weight_hh', 'cell.bias_ih', 'cell.bias_hh'], recurrent('decoder/layer0')))
  own = dict(model.named_parameters())
  if set(own) != set(values) or set(arrays) != read:
    raise ValueError(f'parameters not matched: {sorted(set(own) ^ set(values))}, {sorted(set(arrays) - read)}')
  with torch.no_grad():
    for name, value in values.items():
      own[name].copy_(value.reshape(own[name].shape))


def duplicate_biases(model: Seq2Seq) -> int:
  """The parameters PyTorch has and attnmt does not: the recurrent layers' second biases (see the docstring)."""
  hh = [p for n, p in model.named_parameters() if 'bias_hh' in n]
  return sum(p.numel() if model.lstm else 2 * p.numel() // 3 for p in hh)


def prepare(job: dict, batch: dict, params: dict | None, compiled: bool = False):
  """The timed calls of benchmarks/peer.py's worker ({'train': step, 'greedy': decode}) and what to record."""
  torch.set_num_threads(job['cores'])
  torch.manual_seed(0)
  model = Seq2Seq(job['torch_spec'])
  if params is not None:
    load_attnmt(model, params)
  decoder = copy.deepcopy(model)
  with torch.no_grad():
    decoder.out.bias[EOS] = -1e9  # as attnmt's side: EOS never wins, every call decodes max_len tokens
  for m in (model, decoder) if compiled else ():
    m.step, m.logits = torch.compile(m.step, dynamic=False), torch.compile(m.logits, dynamic=False)
  b = {k: torch.from_numpy(np.asarray(v)).long() for k, v in batch.items()}
  max_len = job['sizes']['max_len']
  trainer = Trainer(model, job['train'])
  model.eval()
  with torch.no_grad():
    eval_loss = trainer.loss(b).item()
  calls = {'train': lambda: trainer.step(b), 'greedy': lambda: greedy(decoder, b['src'], b['src_len'], max_len)}
  info = {
    'parameters': sum(p.numel() for p in model.parameters()),
    'duplicate_biases': duplicate_biases(model),
    'eval_loss': eval_loss,
    'torch': torch.__version__,
    'num_threads': torch.get_num_threads(),
    'num_interop_threads': torch.get_num_interop_threads(),
    'cpu_capability': torch.backends.cpu.get_cpu_capability(),
    'compiled': compiled,
  }
  if 'greedy' in job['what']:
    info['greedy_tokens'] = calls['greedy']()[0].tolist()
  return {w: calls[w] for w in job['what']}, info
