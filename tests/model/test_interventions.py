"""Counterfactual attention (attnmt/model/interventions.py): each intervention against a NumPy reference (weights,
padding, sums), the same counterfactual for a sentence in any batch, the identity reproducing ordinary decoding
bit for bit, `uniform` on the score `none` changing nothing, and teacher forcing equal to step-by-step decoding
under every intervention (one code path)."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnmt.errors import ConfigError
from attnmt.model import decoding, interventions
from attnmt.model.seq2seq import Seq2Seq, init_params
from small_model import small_config, steps_equal_teacher_forcing

W = np.array(
  [
    [0.1, 0.5, 0.15, 0.25, 0.0, 0.0],  # length 4
    [0.7, 0.3, 0.0, 0.0, 0.0, 0.0],  # length 2
    [1.0, 0.0, 0.0, 0.0, 0.0, 0.0],  # length 1
    [0.05, 0.1, 0.2, 0.3, 0.15, 0.2],  # length 6
  ],
  np.float32,
)
LENGTH = np.array([4, 2, 1, 6])


def np_reference(name, w, n, k=2):
  """The counterfactual of one sentence's weights `w` (its first n positions valid), written out by hand."""
  out = np.zeros_like(w)
  if name == 'uniform':
    out[:n] = 1.0 / n
  elif name == 'first':
    out[0] = 1.0
  elif name == 'last':
    out[n - 1] = 1.0
  elif name == 'shift':
    out[:n] = np.roll(w[:n], 1)
  elif name == 'only_max':
    out[np.argmax(w[:n])] = 1.0
  elif name == 'keep_max_uniform_others':
    top = np.argmax(w[:n])
    out[:n] = (1.0 - w[top]) / max(n - 1, 1)
    out[top] = w[top] if n > 1 else 1.0
  elif name in ('zero_max', 'zero_top_k'):
    kk = 1 if name == 'zero_max' else k
    kk = min(kk, n - 1)
    top = np.argsort(-w[:n], kind='stable')[:kk]
    rest = w[:n].copy()
    rest[top] = 0.0
    if rest.sum() > 0:
      out[:n] = rest / rest.sum()
    else:
      keep = np.ones(n, bool)
      keep[top] = False
      out[:n] = keep / keep.sum()
  return out


@pytest.mark.parametrize(
  'name', ['uniform', 'first', 'last', 'shift', 'zero_max', 'zero_top_k', 'only_max', 'keep_max_uniform_others']
)
def test_deterministic_interventions_match_numpy(name):
  iv = interventions.build('zero_top_k(k=2)' if name == 'zero_top_k' else name)
  got = np.asarray(iv.apply(jnp.asarray(W), jnp.asarray(LENGTH), jnp.int32(3)))
  for row, n in enumerate(LENGTH):
    np.testing.assert_allclose(got[row], np_reference(name, W[row], n), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(got[row].sum(), 1.0, rtol=1e-6)
    assert np.all(got[row, n:] == 0.0)


def test_zero_max_spreads_uniformly_where_nothing_is_left():
  w = np.array([[0.0, 1.0, 0.0]], np.float32)  # the rest is exactly 0
  got = np.asarray(interventions.build('zero_max').apply(jnp.asarray(w), jnp.array([3]), jnp.int32(0)))
  np.testing.assert_allclose(got[0], [0.5, 0.0, 0.5])


def test_permute_is_a_permutation_of_the_valid_weights_and_random_a_distribution():
  keys = interventions.build('permute', seed=1).sentence_keys(jnp.arange(24).reshape(4, 6) + 4)
  got = np.asarray(
    interventions.build('permute', seed=1).apply(jnp.asarray(W), jnp.asarray(LENGTH), jnp.int32(0), keys)
  )
  for row, n in enumerate(LENGTH):
    np.testing.assert_array_equal(np.sort(got[row, :n]), np.sort(W[row, :n]))
    assert np.all(got[row, n:] == 0.0)
  assert not np.array_equal(got[3], W[3])  # six positions: the identity order would be a 1-in-720 draw
  rnd = interventions.build('random', seed=1)
  a = np.asarray(rnd.apply(jnp.asarray(W), jnp.asarray(LENGTH), jnp.int32(0), keys))
  b = np.asarray(rnd.apply(jnp.asarray(W), jnp.asarray(LENGTH), jnp.int32(1), keys))
  for row, n in enumerate(LENGTH):
    np.testing.assert_allclose(a[row].sum(), 1.0, rtol=1e-6)
    assert np.all(a[row, :n] > 0) and np.all(a[row, n:] == 0.0)
  assert not np.allclose(a[3], b[3])  # a new draw at every target position


def test_permute_moved_redraws_at_every_step_until_the_largest_weight_moves():
  iv = interventions.build('permute_moved', seed=2)
  keys = iv.sentence_keys(jnp.arange(24).reshape(4, 6) + 4)
  steps = [np.asarray(iv.apply(jnp.asarray(W), jnp.asarray(LENGTH), jnp.int32(t), keys)) for t in range(4)]
  for got in steps:
    for row, n in enumerate(LENGTH):
      np.testing.assert_array_equal(np.sort(got[row, :n]), np.sort(W[row, :n]))
      assert np.all(got[row, n:] == 0.0)
      if n > 1:  # 10 draws: the largest weight stays only with probability (1/n)^10
        assert np.argmax(got[row, :n]) != np.argmax(W[row, :n]), (row, got[row])
  assert not np.array_equal(steps[0][3], steps[1][3])  # a new order at every target position
  one = interventions.build('permute_moved(redraws=1)', seed=2)
  assert one.label == 'permute_moved(redraws=1)'
  moved = [
    np.argmax(np.asarray(one.apply(jnp.asarray(W), jnp.asarray(LENGTH), jnp.int32(t), keys))[1]) for t in range(40)
  ]
  assert 0 < sum(m != 0 for m in moved) < 40  # one draw: two positions swap or not, about half the steps


def test_a_sentence_gets_the_same_counterfactual_in_any_batch_and_padding():
  sentence = np.array([7, 9, 5, 2])
  alone = jnp.asarray(sentence[None])
  padded = jnp.asarray(np.array([[11, 12, 2, 0, 0, 0, 0], [7, 9, 5, 2, 0, 0, 0]]))
  w = np.array([[0.4, 0.3, 0.2, 0.1]], np.float32)
  w_padded = np.zeros((2, 7), np.float32)
  w_padded[1, :4] = w[0]
  w_padded[0, :3] = 1 / 3
  for name in ('permute', 'random'):
    iv = interventions.build(name, seed=4)
    one = iv.apply(jnp.asarray(w), jnp.array([4]), jnp.int32(2), iv.sentence_keys(alone))
    two = iv.apply(jnp.asarray(w_padded), jnp.array([3, 4]), jnp.int32(2), iv.sentence_keys(padded))
    np.testing.assert_array_equal(np.asarray(one)[0], np.asarray(two)[1, :4])


def small(**over):
  return small_config(**{'score': 'general', **over})


def batch():
  rng = np.random.default_rng(5)
  src = jnp.asarray(rng.integers(4, 20, size=(3, 7)))
  lengths = jnp.array([7, 3, 5])
  src = jnp.where(jnp.arange(7)[None] < lengths[:, None], src, 0)
  return src, lengths, jnp.asarray(rng.integers(4, 23, size=(3, 6)))


@pytest.mark.parametrize('timing', ['bahdanau', 'luong'])
def test_identity_reproduces_ordinary_decoding_bit_for_bit(timing):
  cfg = small(query_timing=timing)
  params = init_params(cfg, jax.random.key(0))
  src, lengths, tgt = batch()
  plain = jax.jit(Seq2Seq(cfg).apply)({'params': params}, src, lengths, tgt)
  same = jax.jit(Seq2Seq(cfg, interventions.build('identity')).apply)({'params': params}, src, lengths, tgt)
  for a, b in zip(plain, same):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
  for search in (
    lambda iv: decoding.greedy(cfg, params, src, lengths, 8, intervention=iv),
    lambda iv: decoding.beam_search(cfg, params, src, lengths, 3, 8, intervention=iv),
  ):
    for a, b in zip(search(None), search(interventions.build('identity'))):
      np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_uniform_on_the_score_none_changes_nothing():
  cfg = small(score='none')
  params = init_params(cfg, jax.random.key(1))
  src, lengths, tgt = batch()
  plain = jax.jit(Seq2Seq(cfg).apply)({'params': params}, src, lengths, tgt)
  uniform = jax.jit(Seq2Seq(cfg, interventions.build('uniform')).apply)({'params': params}, src, lengths, tgt)
  np.testing.assert_allclose(np.asarray(plain[0]), np.asarray(uniform[0]), rtol=1e-6, atol=1e-6)
  a = decoding.greedy(cfg, params, src, lengths, 8)
  b = decoding.greedy(cfg, params, src, lengths, 8, intervention=interventions.build('uniform'))
  np.testing.assert_array_equal(np.asarray(a.tokens), np.asarray(b.tokens))


@pytest.mark.parametrize('name', ['first', 'permute', 'random', 'zero_max'])
@pytest.mark.slow
def test_teacher_forcing_equals_step_by_step_under_the_intervention(name):
  """One code path: the step-by-step logits under the intervention equal the teacher-forced ones, and the
  weights the context read are the counterfactual ones; the output differs from the model's own."""
  cfg = small(query_timing='luong', window='local_p')
  params = {'params': init_params(cfg, jax.random.key(2))}
  iv = interventions.build(name, seed=3)
  model = Seq2Seq(cfg, iv)
  src, lengths, tgt = batch()
  logits, weights, _ = steps_equal_teacher_forcing(model, params, src, lengths, tgt)
  w = np.asarray(weights)
  plain = jax.jit(Seq2Seq(cfg).apply)(params, src, lengths, tgt)[0]
  if name == 'permute':  # local-p scales its softmax by a Gaussian (total below 1); a permutation keeps the total
    assert np.all((w.sum(-1) > 0.5) & (w.sum(-1) < 1.0))
  else:
    np.testing.assert_allclose(w.sum(-1), 1.0, rtol=1e-5)
  for b, n in enumerate(np.asarray(lengths)):
    assert np.all(w[b, :, n:] == 0.0)
  if name == 'first':
    assert np.all(w[:, :, 0] == 1.0)
  assert not np.allclose(np.asarray(plain), np.asarray(logits), atol=1e-4)


def test_bad_names_get_one_line():
  with pytest.raises(ConfigError, match=r"^unknown intervention 'shuffle'; valid: identity, uniform, permute,"):
    interventions.parse('uniform,shuffle')
  with pytest.raises(ConfigError, match=r"^intervention 3 \(of type int\) is not a name; valid: identity,"):
    interventions.build(3)
  with pytest.raises(ConfigError, match=r"^intervention 'uniform\(k=2\)': Uniform has no option 'k'; it has none$"):
    interventions.parse('zero_top_k(k=2),uniform(k=2)')
  # an option is checked as any int setting is: a whole number (2.0 and '2' read as 2), not a bool
  for k, shown in (('0', '0'), ('1.5', '1.5'), ('true', 'True'), ('-1', '-1'), ("''", "''")):
    with pytest.raises(
      ConfigError, match=rf'^intervention zero_top_k.k must be an integer >= 1, got {re.escape(shown)}$'
    ):
      interventions.build(f'zero_top_k(k={k})')
  for k in ('2.0', "'2'", '2'):
    iv = interventions.build(f'zero_top_k(k={k})')
    assert iv.k == 2 and isinstance(iv.k, int) and iv == interventions.ZeroTopK(0, k=2)
  for seed in (1.5, -1, '0'):
    with pytest.raises(
      ConfigError, match=rf'^intervention permute: seed={re.escape(repr(seed))} is not a whole number'
    ):
      interventions.build('permute', seed=seed)
  for c in ('0', 'nan', "'a'"):
    shown = re.escape(repr(c[1:-1]) if c.startswith("'") else c)
    with pytest.raises(
      ConfigError, match=rf'^intervention random.concentration must be a finite number > 0, got {shown}$'
    ):
      interventions.build(f'random(concentration={c})')
  # NumPy integers are whole numbers, and equal options make equal (hashable) interventions
  assert interventions.ZeroTopK(0, k=np.int64(3)) == interventions.build('zero_top_k(k=3)')
  assert hash(interventions.build('permute', seed=np.int32(4))) == hash(interventions.build('permute', seed=4))
  assert interventions.build('zero_top_k(k=3)') != interventions.build('zero_top_k(k=3)', seed=1)
  # the registered name, and the label with the options that differ from their defaults
  three, two = interventions.parse('zero_top_k(k=3),zero_top_k', seed=0)
  assert (three.name, three.label, two.name, two.label) == ('zero_top_k', 'zero_top_k(k=3)', 'zero_top_k', 'zero_top_k')


@pytest.mark.parametrize('name', ['first', 'uniform', 'random'])
def test_beam_search_under_an_intervention_is_greedy_at_width_one(name):
  """Beam search takes an intervention as greedy does: width 1 without a length penalty is greedy search with
  the same intervention (tokens, lengths, scores, the counterfactual weights), and forced_attention, given the
  intervention by position as evaluation passes it, recomputes those weights; `first` puts them all on the
  first source position."""
  cfg = small()
  params = init_params(cfg, jax.random.key(4))
  src, lengths, _ = batch()
  iv = interventions.build(name, seed=2)
  g = decoding.greedy(cfg, params, src, lengths, 8, intervention=iv)
  b = decoding.beam_search(cfg, params, src, lengths, 1, 8, alpha=0.0, intervention=iv)
  np.testing.assert_array_equal(np.asarray(b.tokens[:, 0]), np.asarray(g.tokens))
  np.testing.assert_array_equal(np.asarray(b.lengths[:, 0]), np.asarray(g.lengths))
  np.testing.assert_allclose(np.asarray(b.scores[:, 0]), np.asarray(g.scores), rtol=1e-5)
  np.testing.assert_allclose(np.asarray(b.weights[:, 0]), np.asarray(g.weights), atol=1e-6)
  forced = np.asarray(decoding.forced_attention(cfg, params, src, lengths, g.tokens, iv))
  kept = np.arange(8)[None, :, None] < np.asarray(g.lengths)[:, None, None]
  np.testing.assert_allclose(np.where(kept, forced, 0.0), np.asarray(g.weights), atol=1e-5)
  w = np.asarray(g.weights)
  for row, n in enumerate(np.asarray(g.lengths)):
    if name == 'first':
      assert np.all(w[row, :n, 0] == 1.0) and np.all(w[row, :n, 1:] == 0.0)
    elif name == 'uniform':
      np.testing.assert_allclose(w[row, :n, : int(lengths[row])], 1.0 / int(lengths[row]), rtol=1e-6)
  plain = decoding.greedy(cfg, params, src, lengths, 8)
  assert not np.allclose(np.asarray(plain.weights), w)  # the intervention changed the attention
