"""The normalisers of model.normalizer (softmax, sparsemax, entmax15) against independent NumPy references,
hand-worked examples and finite differences; padding and empty rows; their use through every window, in
teacher forcing, greedy and beam search. (docs/design.md, "Normalisers".)"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

import references
from attnmt.model import attention, decoding, normalizers
from attnmt.errors import ConfigError
from attnmt.model.config import ModelConfig
from attnmt.model.seq2seq import BOS, Seq2Seq, init_params
from small_model import SMALL, sized

NAMES = ('softmax', 'sparsemax', 'entmax15')
SPARSE = ('sparsemax', 'entmax15')
FUNCTIONS = {
  'softmax': normalizers.masked_softmax,
  'sparsemax': normalizers.masked_sparsemax,
  'entmax15': normalizers.masked_entmax15,
}


def np_softmax(z):
  e = np.exp(z - z.max())
  return e / e.sum()


def np_sparsemax(z):
  """The Euclidean projection onto the simplex (Held et al. 1974; Duchi et al. 2008): sort, find the
  largest j with u_j - (sum_{i<=j} u_i - 1) / j > 0, shift by that threshold and clip."""
  u = np.sort(z)[::-1]
  j = np.arange(1, len(z) + 1)
  rho = np.nonzero(u - (np.cumsum(u) - 1.0) / j > 0)[0][-1]
  theta = (np.cumsum(u)[rho] - 1.0) / (rho + 1)
  return np.maximum(z - theta, 0.0)


def np_entmax15(z):
  """1.5-entmax by bisection on tau: sum_i max(z_i / 2 - tau, 0)^2 decreases in tau from >= 1 at
  max(z) / 2 - 1 to 0 at max(z) / 2."""
  half = z / 2.0
  lo, hi = half.max() - 1.0, half.max()
  for _ in range(100):
    tau = (lo + hi) / 2.0
    lo, hi = (tau, hi) if np.sum(np.maximum(half - tau, 0.0) ** 2) > 1.0 else (lo, tau)
  return np.maximum(half - (lo + hi) / 2.0, 0.0) ** 2


NP = {'softmax': np_softmax, 'sparsemax': np_sparsemax, 'entmax15': np_entmax15}


def np_masked(name, e, mask):
  out = np.zeros(len(e))
  if mask.any():
    out[mask] = NP[name](np.asarray(e, np.float64)[mask])
  return out


def random_rows(seed, count=64):
  """Batches of rows of a few sizes, of varied scale and with ties, their valid positions scattered (not only
  a prefix); some rows have none."""
  rng = np.random.default_rng(seed)
  for size in (1, 5, 12):
    e = rng.normal(size=(count, size)) * rng.choice([0.1, 1.0, 5.0, 40.0], size=(count, 1)) + rng.normal(
      size=(count, 1)
    )
    e[::3] = np.round(e[::3])  # ties
    mask = np.stack([rng.permutation(np.arange(size) < rng.integers(0, size + 1)) for _ in range(count)])
    yield e.astype(np.float32), mask


def test_registry_and_config():
  assert normalizers.names() == NAMES + ('monotonic',)  # monotonic: tests/model/test_monotonic.py
  assert ModelConfig().normalizer == 'softmax'
  for name in NAMES:
    assert normalizers.build(ModelConfig.from_dict({'normalizer': name})).name == name
  with pytest.raises(
    ConfigError, match=r"^unknown model.normalizer 'softmx'; valid: softmax, sparsemax, entmax15, monotonic, or"
  ):
    ModelConfig.from_dict({'normalizer': 'softmx'})
  with pytest.raises(ConfigError, match=r"'Nope' in .* is not a attnmt.model.normalizers.Normalizer subclass"):
    ModelConfig.from_dict({'normalizer': f'{__name__}:Nope'})


@pytest.mark.parametrize('name', NAMES)
def test_match_numpy_reference_padding_is_zero_and_rows_sum_to_one(name):
  f = jax.jit(jax.vmap(FUNCTIONS[name]))
  for e_BxS, mask_BxS in random_rows(seed=NAMES.index(name)):
    got_BxS = np.asarray(f(e_BxS, mask_BxS))
    assert got_BxS.dtype == np.float32
    for e, mask, got in zip(e_BxS, mask_BxS, got_BxS):
      np.testing.assert_allclose(got, np_masked(name, e, mask), rtol=1e-5, atol=2e-6)
      assert np.all(got[~mask] == 0.0) and np.all(got >= 0.0)
      if mask.any():
        np.testing.assert_allclose(got.sum(), 1.0, rtol=1e-5)
  # bfloat16 scores (model.dtype=bfloat16) give float32 weights of the same scores.
  e_BxS = jnp.asarray(e_BxS, jnp.bfloat16)
  got_BxS = f(e_BxS, mask_BxS)
  assert got_BxS.dtype == jnp.float32
  for e, mask, got in zip(np.asarray(e_BxS, np.float32), mask_BxS, got_BxS):
    np.testing.assert_allclose(got, np_masked(name, e, mask), rtol=1e-5, atol=2e-6)


def test_hand_worked_examples():
  # sparsemax (1, 1.5, 0.2): support {1.5, 1}, since 1 + 2 * 1 > 1.5 + 1 but 1 + 3 * 0.2 < 2.7;
  # tau = (1.5 + 1 - 1) / 2 = 0.75, so a = (0.25, 0.75, 0).
  np.testing.assert_allclose(
    normalizers.masked_sparsemax(jnp.array([1.0, 1.5, 0.2]), jnp.ones(3, bool)), [0.25, 0.75, 0]
  )
  # One score 1 above the rest takes everything; equal scores share equally.
  np.testing.assert_array_equal(normalizers.masked_sparsemax(jnp.array([3.0, 2.0, 1.0]), jnp.ones(3, bool)), [1, 0, 0])
  np.testing.assert_array_equal(normalizers.masked_sparsemax(jnp.zeros(4), jnp.ones(4, bool)), [0.25] * 4)
  # entmax15 (2, 1, -1): z / 2 = (1, 0.5, -0.5); on the support {1, 0.5}, (1 - tau)^2 + (0.5 - tau)^2 = 1
  # gives tau = (3 - sqrt 7) / 4 = 0.0886 > -0.5, so a = ((4 + sqrt 7) / 8, (4 - sqrt 7) / 8, 0).
  r7 = np.sqrt(7.0)
  got = normalizers.masked_entmax15(jnp.array([2.0, 1.0, -1.0]), jnp.ones(3, bool))
  np.testing.assert_allclose(got, [(4 + r7) / 8, (4 - r7) / 8, 0.0], rtol=1e-6)
  assert got[2] == 0.0
  # Scores 2 or more apart: the top one takes everything.
  np.testing.assert_array_equal(normalizers.masked_entmax15(jnp.array([4.0, 1.0, 0.0]), jnp.ones(3, bool)), [1, 0, 0])
  # With the third position masked, sparsemax of (1, 1.5) is (0.25, 0.75) and softmax of (1, 1.5) (0.3775, 0.6225).
  mask = jnp.array([True, True, False])
  np.testing.assert_allclose(normalizers.masked_sparsemax(jnp.array([1.0, 1.5, 9.0]), mask), [0.25, 0.75, 0])
  np.testing.assert_allclose(
    normalizers.masked_softmax(jnp.array([1.0, 1.5, 9.0]), mask), [0.3775, 0.6225, 0], atol=1e-4
  )


def test_sparse_normalisers_give_exact_zeros_softmax_does_not():
  e = jnp.asarray(np.random.default_rng(0).normal(size=12) * 3, jnp.float32)
  mask = jnp.ones(12, bool)
  assert np.all(np.asarray(normalizers.masked_softmax(e, mask)) > 0.0)
  for name in SPARSE:
    a = np.asarray(FUNCTIONS[name](e, mask))
    assert 0 < np.sum(a == 0.0) < 12, name
  # sparsemax is sparser than entmax15, which is sparser than softmax (Peters et al. 2019).
  assert np.sum(normalizers.masked_sparsemax(e, mask) == 0) >= np.sum(normalizers.masked_entmax15(e, mask) == 0)


@pytest.mark.parametrize('name', SPARSE)
def test_closed_form_gradients_match_finite_differences_in_float64(name):
  f = FUNCTIONS[name]
  mask = jnp.array([True, True, False, True, True, True, False, True])
  target = np.random.default_rng(1).normal(size=8)
  with jax.enable_x64(True):  # only inside this block: the other tests run in float32
    for seed in range(6):
      e = jnp.asarray(np.random.default_rng(seed).normal(size=8) * (1 + seed), jnp.float64)
      assert f(e, mask).dtype == jnp.float64
      check_grads(lambda e: f(e, mask), (e,), order=1, modes=['rev'], eps=1e-6, atol=1e-6, rtol=1e-6)
      check_grads(lambda e: jnp.sum(f(e, mask) * target), (e,), order=1, modes=['rev'], eps=1e-6, atol=1e-6, rtol=1e-6)


def test_softmax_gradient_matches_finite_differences():
  """Softmax stays float32 (the model's weights are); its gradient is plain autodiff, checked at float32 precision."""
  mask = jnp.array([True, True, False, True, True])
  e = jnp.asarray(np.random.default_rng(0).normal(size=5), jnp.float32)
  check_grads(
    lambda e: normalizers.masked_softmax(e, mask), (e,), order=1, modes=['rev'], eps=1e-2, atol=1e-3, rtol=1e-2
  )


@pytest.mark.parametrize('name', NAMES)
def test_padding_gets_zero_weight_and_zero_gradient_whatever_its_scores(name):
  e = jnp.array([0.3, jnp.nan, -0.2, 0.6, 50.0, -jnp.inf, jnp.inf, 0.5])
  mask = jnp.array([True, False, True, True, False, False, False, True])
  f = functools.partial(FUNCTIONS[name], mask_S=mask)
  a = np.asarray(jax.jit(f)(e))
  assert np.all(a[~np.asarray(mask)] == 0.0) and np.all(np.isfinite(a))
  np.testing.assert_allclose(a, np_masked(name, np.nan_to_num(np.asarray(e)), np.asarray(mask)), rtol=1e-5, atol=1e-6)
  target = jnp.array([0.1, 0.5, -2.0, 3.0, 4.0, 1.0, 2.0, -1.0])
  grad = np.asarray(jax.grad(lambda e: jnp.sum(f(e) * target))(e))
  assert np.all(grad[~np.asarray(mask)] == 0.0) and np.all(np.isfinite(grad))
  assert np.any(grad[np.asarray(mask)] != 0.0)


@pytest.mark.parametrize('name', NAMES)
def test_all_padding_row_is_zero_without_nan(name):
  f = FUNCTIONS[name]
  e, mask = jnp.array([1.0, 2.0, 3.0]), jnp.zeros(3, bool)
  assert np.all(np.asarray(f(e, mask)) == 0.0)
  grad = np.asarray(jax.grad(lambda e: jnp.sum(f(e, mask) * jnp.arange(3.0)))(e))
  assert np.all(grad == 0.0)
  # Batched, as the decoder runs it, beside a row that has valid positions.
  batch = jax.jit(jax.vmap(f))(jnp.stack([e, e]), jnp.array([[False] * 3, [True] * 3]))
  assert np.all(np.asarray(batch[0]) == 0.0) and np.isclose(np.sum(batch[1]), 1.0)


@pytest.mark.parametrize('name', NAMES)
def test_score_none_is_the_uniform_mean_under_every_normaliser(name):
  """Equal scores: softmax, sparsemax and entmax15 all give 1 / length, so `none` combines with each."""
  cfg = ModelConfig.from_dict({'score': 'none', 'normalizer': name, 'encoder_hidden_size': 2})
  h = jnp.asarray(np.random.default_rng(0).normal(size=(7, 4)), jnp.float32)
  ctx, w = references.attend(
    cfg, {}, jnp.ones(256), attention.precompute_keys(cfg, {}, h), h, jnp.int32(5), jnp.int32(0)
  )
  np.testing.assert_allclose(w, [0.2] * 5 + [0, 0], rtol=1e-6)
  np.testing.assert_allclose(ctx, np.asarray(h[:5]).mean(0), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize('window', ['global', 'local_m', 'local_p'])
@pytest.mark.parametrize('name', SPARSE)
def test_windows_normalise_with_the_configured_normaliser(name, window):
  """Through attend: the window's positions, the normaliser, local_p's Gaussian after it, the context."""
  cfg = ModelConfig.from_dict(
    dict(
      score='dot',
      window=window if window == 'global' else f'{window}(size=2)',
      normalizer=name,
      encoder_hidden_size=3,
      decoder_hidden_size=6,
    )
  )
  p = attention.AttentionParams(cfg).init(jax.random.key(0)).get('params', {})
  p = attention.AttentionParams(cfg).apply({'params': p})
  rng = np.random.default_rng(2)
  q, h = rng.normal(size=6).astype(np.float32) * 2, rng.normal(size=(9, 6)).astype(np.float32)
  length, t = 7, 4
  ctx, w = jax.jit(functools.partial(references.attend, cfg, p))(q, h, h, jnp.int32(length), jnp.int32(t))
  pos = np.arange(9)
  centre = {'global': 0.0, 'local_m': t}.get(window)
  if window == 'local_p':
    pn = jax.tree.map(np.asarray, p)
    centre = length / (1 + np.exp(-pn['v_p'] @ np.tanh(pn['W_p'].T @ q)))
  keep = (pos < length) & ((np.abs(pos - centre) <= 2) if window != 'global' else True)
  want = np_masked(name, h @ q, keep)
  if window == 'local_p':
    want = want * np.exp(-((pos - centre) ** 2) / 2.0)
  np.testing.assert_allclose(w, want, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(ctx, want @ h, rtol=1e-5, atol=1e-5)


class Nope:
  """Not a Normalizer: selecting it by import path is refused."""


class Uniform(normalizers.Normalizer):
  """A normaliser of one's own, selected by import path: every kept position weighs the same."""

  def normalize(self, e_S, mask_S):
    return mask_S / jnp.maximum(jnp.sum(mask_S), 1)


def test_a_normaliser_of_ones_own_by_import_path():
  cfg = ModelConfig.from_dict(
    dict(score='dot', normalizer=f'{__name__}:Uniform', encoder_hidden_size=3, decoder_hidden_size=6)
  )
  h = jnp.ones((5, 6))
  _, w = references.attend(cfg, {}, jnp.arange(6.0), h, h, jnp.int32(4), jnp.int32(0))
  np.testing.assert_allclose(w, [0.25] * 4 + [0])


# (normaliser, score, query timing, window): the sparse normalisers with both timings and every window.
COMBOS = [
  ('sparsemax', 'additive', 'bahdanau', 'global'),
  ('entmax15', 'general', 'luong', 'local_p'),
  ('sparsemax', 'concat', 'luong', 'local_m'),
]


def model_and_params(name, score, timing, window, seed):
  """A small model whose attention parameters are scaled up, so that its scores spread enough for exact zeros."""
  cfg = ModelConfig.from_dict(
    sized({**SMALL, 'normalizer': name, 'score': score, 'query_timing': timing, 'window': window})
  )
  params = init_params(cfg, jax.random.key(seed))
  decoder = {**params['decoder'], 'attention': jax.tree.map(lambda x: 8.0 * x, params['decoder']['attention'])}
  return cfg, {**params, 'decoder': decoder}


def batch(seed):
  rng = np.random.default_rng(seed)
  src, lengths = jnp.asarray(rng.integers(4, 20, size=(3, 7))), jnp.array([7, 3, 5])
  return src, lengths, jnp.asarray(rng.integers(4, 23, size=(3, 6)))


@pytest.mark.parametrize('name,score,timing,window', COMBOS)
@pytest.mark.slow
def test_teacher_forced_equals_step_by_step(name, score, timing, window):
  """Logits, weights and every parameter's gradient of teacher forcing (the decoder's scan, with its deferred
  weight products) equal those of decode steps; padding gets zero weight, and exact zeros occur inside."""
  cfg, params = model_and_params(name, score, timing, window, seed=0)
  model = Seq2Seq(cfg)
  src, lengths, tgt = batch(1)

  def teacher_forced(p):
    logits, weights = model.apply({'params': p}, src, lengths, tgt)
    return jnp.sum(logits**2), (logits, weights)

  def step_by_step(p):
    memory, state = model.apply({'params': p}, src, lengths, method=Seq2Seq.encode)

    def step(state, y):
      state, logits, weights = model.apply({'params': p}, memory, state, y, method=Seq2Seq.decode_step)
      return state, (logits, weights)

    _, (logits, weights) = jax.lax.scan(step, state, tgt.T)
    logits, weights = jnp.swapaxes(logits, 0, 1), jnp.swapaxes(weights, 0, 1)
    return jnp.sum(logits**2), (logits, weights)

  (_, (logits, weights)), grads = jax.jit(jax.value_and_grad(teacher_forced, has_aux=True))(params)
  (_, (want_logits, want_weights)), want_grads = jax.jit(jax.value_and_grad(step_by_step, has_aux=True))(params)
  np.testing.assert_allclose(logits, want_logits, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(weights, want_weights, rtol=1e-5, atol=1e-6)
  for got, want in zip(jax.tree.leaves(grads), jax.tree.leaves(want_grads)):
    np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-5)
  weights = np.asarray(weights)
  for b, n in enumerate(np.asarray(lengths)):
    assert np.all(weights[b, :, n:] == 0.0)
    assert np.any(weights[b, :, :n] == 0.0)  # the sparse normaliser's exact zeros inside the sentence
  assert np.abs(np.asarray(grads['decoder']['attention']['W' if score != 'concat' else 'W_q'])).sum() > 0


@pytest.mark.parametrize('name,score,timing,window', COMBOS[:2])
@pytest.mark.slow
def test_greedy_and_beam_search(name, score, timing, window):
  cfg, params = model_and_params(name, score, timing, window, seed=3)
  src, lengths, _ = batch(3)
  teacher_forced = jax.jit(lambda tgt_in: Seq2Seq(cfg).apply({'params': params}, src, lengths, tgt_in))
  greedy = decoding.greedy(cfg, params, src, lengths, max_len=8)
  beam = decoding.beam_search(cfg, params, src, lengths, beam_size=3, max_len=8, alpha=0.0)
  # Each search's scores and attention are those of teacher forcing on the tokens it chose.
  for tokens, ends, scores, weights in (
    (greedy.tokens, greedy.lengths, greedy.scores, greedy.weights),
    (beam.tokens[:, 0], beam.lengths[:, 0], beam.scores[:, 0], beam.weights[:, 0]),
  ):
    logits, want_weights = teacher_forced(jnp.concatenate([jnp.full((3, 1), BOS), tokens[:, :-1]], 1))
    logp = np.asarray(jnp.take_along_axis(jax.nn.log_softmax(logits), tokens[..., None], -1)[..., 0])
    weights = np.asarray(weights)
    for row in range(3):
      n = int(ends[row])
      np.testing.assert_allclose(scores[row], logp[row, :n].sum(), rtol=1e-5, atol=1e-5)
      np.testing.assert_allclose(weights[row, :n], want_weights[row, :n], rtol=1e-5, atol=1e-6)
      assert np.all(weights[row, :, int(lengths[row]) :] == 0.0)
    assert np.any(weights[0, :, : int(lengths[0])] == 0.0)  # the exact zeros reach what decoding returns
  assert np.all(beam.scores[:, 0] >= greedy.scores - 1e-5)  # beam search finds no worse a hypothesis than greedy
