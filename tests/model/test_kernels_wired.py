"""model.kernels='pallas': the model with the fused kernels (attnmt/model/kernels/, `fused_parts`) equals the
readable path, model.kernels='xla': the teacher-forced loss and the gradient of every parameter, a training step of
two seeds in one vmapped program, greedy decoding; what the kernels do not cover falls back, says so in one line,
and gives the readable path's results; off a GPU nothing is fused.

On the CPU the kernels run in Pallas's interpreter because the tests ask for it (`kernels.forced(True)`; a run
would take the readable path, with a notice); the last test lowers the whole training step for CUDA instead, as
tests/model/test_kernels.py lowers the kernels alone. Sizes are the small model's (tests/small_model.py).
"""

import functools

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from attnmt.model import decoding, deferred_scan, interventions, kernels, rnn, scores
from attnmt.model.config import ModelConfig
from attnmt.model.kernels import wiring
from attnmt.model.seq2seq import Seq2Seq, init_params
from attnmt.training import seeds, train_step
from small_model import SMALL, sized

TOL = 1e-5  # float32, as tests/model/test_kernels.py: relative, and absolute against the array's largest entry


def close(a, b, tol=TOL):
  for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
    y = np.asarray(y)
    np.testing.assert_allclose(np.asarray(x), y, rtol=tol, atol=tol * max(1.0, float(np.max(np.abs(y), initial=0))))


def pair(**over) -> tuple[ModelConfig, ModelConfig]:
  """The small model with `over`, as model.kernels 'xla' and 'pallas'."""
  return tuple(ModelConfig.from_dict(sized({**SMALL, **over, 'kernels': k})) for k in ('xla', 'pallas'))


def batch(rng, B=3, S=7, T=5) -> dict:
  """A training batch with padding on both sides: source lengths 7, 4, 5 and target lengths 5, 3, 4."""
  src_len, tgt_len = np.array([S, 4, 5][:B]), np.array([T, 3, 4][:B])
  src = np.where(np.arange(S) < src_len[:, None], rng.integers(4, SMALL['source_vocab_size'], (B, S)), 0)
  tgt = rng.integers(4, SMALL['target_vocab_size'], (B, T + 1))
  tgt = np.where(np.arange(T + 1) < tgt_len[:, None] + 1, tgt, 0)
  as_int = lambda x: jnp.asarray(x, jnp.int32)
  return dict(
    src=as_int(src),
    src_len=as_int(src_len),
    tgt_in=as_int(tgt[:, :-1]),
    tgt_out=as_int(tgt[:, 1:]),
    tgt_len=as_int(tgt_len),
  )


def loss_and_grads(cfg, params, b, train=False):
  """The training objective and the gradient of every parameter (train: dropout, from a fixed key)."""
  fn = functools.partial(train_step.loss_fn, cfg, batch=b, rng=jax.random.key(7), train=train, label_smoothing=0.1)
  return jax.jit(jax.value_and_grad(lambda p: fn(params=p)[0]))(params)


CASES = {
  # the default recipe's shape: Bahdanau's form, additive score, bidirectional encoder
  'lstm-additive-bahdanau': dict(),
  'gru-dot': dict(cell='gru', score='dot'),
  'lstm-general-luong-unidirectional': dict(score='general', query_timing='luong', bidirectional=False),
  # two layers each side, dropout, coverage's keys, the last encoder states as the decoder's
  'gru-normed_additive-coverage-deep': dict(
    cell='gru',
    score='normed_additive(coverage=sum)',
    encoder_layers=2,
    decoder_layers=2,
    dropout=0.2,
    init_state='last',
  ),
}


@pytest.mark.parametrize('over', CASES.values(), ids=CASES.keys())
@pytest.mark.slow
def test_loss_and_every_gradient_equal_the_readable_path(over):
  xla, pallas = pair(**over)
  with kernels.forced(True):
    fused = kernels.fused_parts(pallas)
    assert fused.cells and fused.attention, fused.line  # the kernels run: nothing falls back here
    params = init_params(xla, jax.random.key(0))
    b = batch(np.random.default_rng(0))
    train = xla.dropout > 0
    close(loss_and_grads(pallas, params, b, train), loss_and_grads(xla, params, b, train))


def test_two_seeds_in_one_vmapped_step_update_as_the_readable_path():
  """attnmt/training/seeds.py's step: K = 2 seeds, stacked and vmapped, one update each (SGD: the update is the
  gradient, which Adam's first step would reduce to its sign)."""
  xla, pallas = pair()
  optimizer = optax.sgd(0.1)
  init, _ = seeds.seed_functions(xla, optimizer)
  rng = np.random.default_rng(1)
  batch_K = seeds.stack_batches([jax.tree.map(np.asarray, batch(rng)) for _ in range(2)])
  results = []
  with kernels.forced(True):
    for cfg in (xla, pallas):
      state = init([0, 1])  # the same two initial states, one copy per step (the step donates it)
      before = jax.tree.map(np.array, state.params)
      state, metrics = seeds.seed_functions(cfg, optimizer)[1](state, batch_K)
      results.append((jax.tree.map(lambda new, old: np.asarray(new) - old, state.params, before), metrics['loss']))
  close(results[1], results[0])
  assert np.abs(results[0][0]['decoder']['layer0']['W_hh']).max() > 0  # W_hh moved: its gradient is not lost


def test_greedy_decoding_gives_the_same_tokens():
  xla, pallas = pair()
  params = init_params(xla, jax.random.key(2))
  b = batch(np.random.default_rng(2))
  with kernels.forced(True):
    assert kernels.fused_parts(pallas).attention == 'additive_attend'
    want = decoding.greedy(xla, params, b['src'], b['src_len'], max_len=6)
    got = decoding.greedy(pallas, params, b['src'], b['src_len'], max_len=6)
  np.testing.assert_array_equal(got.tokens, want.tokens)
  close((got.weights, got.scores), (want.weights, want.scores))


class Cosine(scores.Score):
  """A researcher's own score (as tests/model/test_registry_user_score.py's): e_i = g cos(W q, h_i)."""

  def params(self, param):
    return {
      'W': param('W', (self.cfg.decoder_hidden_size, self.cfg.annotation_size)),
      'g': param('g', (), nn.initializers.constant(5.0)),
    }

  def keys(self, p, annotations_SxH):
    return annotations_SxH * jax.lax.rsqrt(jnp.sum(annotations_SxH**2, -1, keepdims=True) + 1e-6)

  def query(self, p, query_BxQ):
    return query_BxQ @ p['W']

  def scores(self, p, half_H, keys_SxH):
    return p['g'] * (keys_SxH @ half_H) * jax.lax.rsqrt(jnp.sum(half_H**2) + 1e-6)

  def flops(self, src_len):
    return 0, 0


class SharperAdditive(scores.Additive):
  """A researcher's subclass of a score that fuses, with math of its own (twice Bahdanau's e_i): a class declares
  `fuses` for itself, so this one runs the readable path."""

  def scores(self, p, half, keys_SxK):
    return 2.0 * super().scores(p, half, keys_SxK)


def test_a_class_declares_what_it_fuses_and_a_subclass_does_not_inherit_it():
  assert (scores.Dot.fuses, scores.ScaledDot.fuses, scores.Additive.fuses) == ('attend', 'attend', 'additive_attend')
  assert SharperAdditive.fuses is None and Cosine.fuses is None and scores.Location.fuses is None


FALLBACKS = {
  'local-window': (dict(window='local_m'), "window 'local_m(size=2)'"),
  'sparsemax': (dict(normalizer='sparsemax'), "normaliser 'sparsemax'"),
  'user-score': (dict(score=f'{__name__}:Cosine'), f"score '{__name__}:Cosine'"),
  'user-subclass': (
    dict(score=f'{__name__}:SharperAdditive'),
    f"score '{__name__}:SharperAdditive(size=5, coverage=none)'",
  ),
}


@pytest.mark.parametrize('over, named', FALLBACKS.values(), ids=FALLBACKS.keys())
@pytest.mark.slow
def test_what_the_attention_kernels_do_not_cover_runs_the_readable_path_and_says_so(over, named, capsys, monkeypatch):
  """The cells stay fused; the attention is the readable path's, bit for bit: one decoder step from the same
  encoding and state (Bahdanau's form: the query is that state) gives the same weights. The notice says so, once,
  naming what differs; the user's score trains through the readable path as it always did."""
  monkeypatch.setattr(wiring, '_noticed', set())
  xla, pallas = pair(**over)
  params = {'params': init_params(xla, jax.random.key(3))}
  b = batch(np.random.default_rng(3))
  memory, state = jax.jit(functools.partial(Seq2Seq(xla).apply, method=Seq2Seq.encode))(params, b['src'], b['src_len'])
  with kernels.forced(True):
    fused = kernels.fused_parts(pallas)
    assert fused.cells and fused.attention is None
    step = lambda cfg: jax.jit(functools.partial(Seq2Seq(cfg).apply, method=Seq2Seq.decode_step))
    _, logits, weights = step(pallas)(params, memory, state, b['tgt_in'][:, 0])
    _, want_logits, want_weights = step(xla)(params, memory, state, b['tgt_in'][:, 0])
    np.testing.assert_array_equal(weights, want_weights)
    close(logits, want_logits)  # through the fused cell
    # the whole model, built again (the notice is not repeated): the user's score trains as it did
    close(loss_and_grads(pallas, params['params'], b), loss_and_grads(xla, params['params'], b))
  lines = capsys.readouterr().err.strip().splitlines()
  assert lines == [f'notice: {fused.line}'], lines
  assert fused.line.startswith("model.kernels=pallas: fused in Pallas's interpreter: the encoder's and decoder's LSTM ")
  assert 'the attention runs the readable path' in fused.line and f'(here: {named})' in fused.line


def test_an_intervention_sets_the_weights_so_the_attention_is_the_readable_paths():
  """Counterfactual attention (attnmt/model/interventions.py) replaces the weights the context reads: the
  attention kernel, which reads its own, is not used, and the line says so."""
  _, pallas = pair()
  with kernels.forced(True):
    fused = kernels.fused_parts(pallas, interventions.build('uniform'))
  assert fused.cells and fused.attention is None
  assert fused.line.endswith('(here: an intervention (Uniform) that sets the weights)'), fused.line


def test_off_a_gpu_the_readable_path_runs_bit_for_bit_with_a_notice(capsys, monkeypatch):
  """Without a GPU (and no test asking for the interpreter) model.kernels='pallas' is model.kernels='xla', with one
  line saying so: a run trained with the kernels on a GPU evaluates, translates and resumes on a CPU."""
  monkeypatch.setattr(wiring, '_noticed', set())
  xla, pallas = pair()
  fused = kernels.fused_parts(pallas)
  assert not fused.cells and fused.attention is None
  params = init_params(xla, jax.random.key(4))
  b = batch(np.random.default_rng(4))
  got, want = loss_and_grads(pallas, params, b), loss_and_grads(xla, params, b)
  for x, y in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
    np.testing.assert_array_equal(x, y)
  backend = jax.default_backend()
  assert capsys.readouterr().err.splitlines() == [
    f"notice: model.kernels=pallas: JAX's backend is {backend}, not a GPU, and off a GPU Pallas only interprets its "
    'kernels, far slower than XLA: the readable path runs throughout, as with model.kernels=xla'
  ]
  assert kernels.fused_parts(xla).line == 'model.kernels=xla: the readable path (XLA) throughout'


@pytest.mark.parametrize('cell', ['lstm', 'gru'])
def test_the_fused_cells_weight_gradient_is_formed_after_the_scan(cell, monkeypatch):
  """In the encoder's scan (rnn.run_directions, both directions, rows of different lengths) the fused step's
  stop_gradient(h) @ W_hh is a deferred product of `deferred_scan`, its left operand h recorded once; the outputs
  and the gradients of the input and every parameter equal the readable scan's."""
  B, S, I, H = 3, 5, 4, 6
  rng = np.random.default_rng(5)
  layer = rnn.RNNLayerParams(cell, I, H)
  params = tuple(layer.apply(layer.init(jax.random.key(d))) for d in range(2))
  x = jnp.asarray(rng.normal(size=(B, S, I)), jnp.float32)
  length = jnp.array([5, 2, 4])
  with kernels.forced(True):
    fused = kernels.fast_path(ModelConfig(cell=cell, kernels='pallas')).cell

    def loss(fused):
      def run(params, x):
        outs, finals = rnn.run_directions(cell, params, (False, True), x, length, fused)
        return sum(jnp.sum(jnp.sin(o) * (k + 1)) for k, o in enumerate(outs)) + sum(
          jnp.sum(c**2) for f in finals for c in f
        )

      return jax.jit(jax.value_and_grad(run, argnums=(0, 1)))

    plans = []
    plan = deferred_scan._plan
    monkeypatch.setattr(deferred_scan, '_plan', lambda *a: plans.append(plan(*a)) or plans[-1])
    close(loss(fused)(params, x), loss(None)(params, x))
  fused_plan = plans[0]  # the readable scan's is plans[1]
  held = [p for p in fused_plan.products.values() if p.held]
  paths = [jax.tree_util.keystr(path) for path, _ in jax.tree_util.tree_leaves_with_path(params)]
  assert sorted(paths[fused_plan.views[p.view][0]] for p in held) == ["[0]['W_hh']", "[1]['W_hh']"]
  assert all(p.standard for p in held) and not any(p.held for p in plans[1].products.values())
  h_prev = {fused_plan.lhs_vars[p.lhs] for p in held}
  assert h_prev <= set(fused_plan.jaxpr.invars[fused_plan.num_invariants :])  # h itself, the carry, recorded


@pytest.mark.parametrize('dtype', ['float32', 'bfloat16'])  # model.dtype's choices
def test_the_training_step_lowers_for_cuda(dtype):
  """The whole training step with model.kernels='pallas' (loss, gradients through the deferred scans, Adam) lowers
  for CUDA on this machine (jax.export with platforms=['cuda'], as tests/model/test_kernels.py lowers the kernels
  alone): the encoder's two directions, the decoder's cell and its attention, each a Triton kernel forward and
  backward. Nothing is serialised or run."""
  _, pallas = pair(dtype=dtype)
  optimizer = train_step.make_optimizer(1e-3)
  b = batch(np.random.default_rng(6))
  triton = jax.export.DisabledSafetyCheck.custom_call('__gpu$xla.gpu.triton')
  with kernels.forced(False):
    state = jax.eval_shape(lambda: train_step.init_train_state(pallas, optimizer, 0))
    step = jax.jit(functools.partial(train_step.train_step, pallas, optimizer))
    exported = jax.export.export(step, platforms=['cuda'], disabled_checks=[triton])(state, b)
  assert exported.mlir_module().count('__gpu$xla.gpu.triton') == 8
