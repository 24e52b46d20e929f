"""Wiegreffe & Pinter's trained tests (attnmt/faithfulness/wiegreffe_pinter.py: `noncontextual_diagnostic`,
`adversarial_training`) on a copy task over a vocabulary of 8 with tiny models: the adversary's objective against
NumPy, on hand-made distributions and on the model's own teacher-forced outputs (Seq2Seq.__call__, not the
greedy_path the code steps); cases with a known answer (an adversary that starts at the base and does not move, a
base whose attention is uniform, an oracle alignment frozen in); padding rows masked; bad arguments refused."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnmt.errors import ConfigError
from attnmt.faithfulness import wiegreffe_pinter as wp
from attnmt.model.config import ModelConfig
from attnmt.model.seq2seq import BOS, EOS, PAD, Seq2Seq, init_params

CFG = ModelConfig(
  embed_size=8,
  encoder_hidden_size=4,
  decoder_hidden_size=8,
  score='dot',
  query_timing='luong(input_feeding=true)',
  source_vocab_size=8,
  target_vocab_size=8,
  dropout=0.0,
)
WIDTH = 5  # four tokens and EOS


def copy_chunks(n_chunks: int, size: int = 8, padding: int = 0, seed: int = 0) -> list[dict]:
  """Chunks of a copy task (reference = source: four tokens of 4..7, then EOS), as attnmt/faithfulness/chunks.py builds them; the
  last `padding` rows of the last chunk are padding (ref_len 0, copies of the first row)."""
  rng = np.random.default_rng(seed)
  chunks = []
  for _ in range(n_chunks):
    src = np.full((size, WIDTH), EOS, np.int32)
    src[:, : WIDTH - 1] = rng.integers(4, 8, (size, WIDTH - 1))
    chunks.append({'src': src, 'src_len': np.full(size, WIDTH, np.int32), 'ref': src.copy()})
    chunks[-1]['ref_len'] = np.full(size, WIDTH, np.int32)
  last = chunks[-1]
  for key in ('src', 'ref'):
    last[key][size - padding :] = last[key][0]
  last['ref_len'][size - padding :] = 0
  return chunks


def garbled(chunks: list[dict]) -> list[dict]:
  """The same chunks with the padding rows' tokens changed (their shapes kept)."""
  out = []
  for c in chunks:
    c = {k: np.array(v) for k, v in c.items()}
    pad = c['ref_len'] == 0
    c['src'][pad, : WIDTH - 1] = 7 - (c['src'][pad, : WIDTH - 1] - 4)
    c['ref'][pad] = np.roll(c['ref'][pad], 1, axis=1)
    out.append(c)
  return out


TRAIN, TEST = copy_chunks(3), copy_chunks(2, padding=3, seed=1)
TOKENS = sum(int(c['ref_len'].sum()) for c in TEST)


def softmax(x):
  e = np.exp(x - x.max(-1, keepdims=True))
  return e / e.sum(-1, keepdims=True)


def np_tvd(p, q):
  return 0.5 * np.abs(p - q).sum(-1)


def np_kl(p, q):
  return np.sum(np.where(p > 0, p * np.log(np.where(p > 0, p, 1) / np.maximum(q, 1e-10)), 0.0), -1)


def np_jsd(p, q):
  m = (p + q) / 2
  return 0.5 * (np_kl(p, m) + np_kl(q, m))


def np_accuracy(logits, chunks):
  """Teacher-forced token accuracy on the reference, PAD and BOS never chosen, padding rows excluded."""
  right = total = 0
  for x, c in zip(logits, chunks):
    x = np.array(x, np.float64)
    x[..., [PAD, BOS]] = -np.inf
    mask = np.arange(c['ref'].shape[1])[None] < c['ref_len'][:, None]
    right += int(((x.argmax(-1) == c['ref']) & mask).sum())
    total += int(mask.sum())
  return right / total


def forced(params, chunk):
  """Teacher-forced logits and weights through Seq2Seq.__call__ (one scan over the whole target)."""
  tgt_in = np.concatenate([np.full((len(chunk['ref']), 1), BOS), chunk['ref'][:, :-1]], 1)
  logits, weights = Seq2Seq(CFG).apply({'params': params}, chunk['src'], chunk['src_len'], tgt_in)
  return np.asarray(logits, np.float64), np.asarray(weights, np.float64)


@pytest.fixture(scope='module')
def base():
  """A base whose attention is far from uniform (initial parameters scaled by 3, as tests/faithfulness/
  test_papers.py does)."""
  return jax.tree.map(lambda x: 3.0 * x, init_params(CFG, jax.random.key(17)))


# The adversary ----------------------------------------------------------------------------------------------


def test_objective_is_tvd_minus_lambda_kl_averaged_over_the_real_steps():
  rng = np.random.default_rng(3)
  B, T, S, V = 2, 3, 4, 5
  logits = rng.normal(size=(B, T, V)) * 2
  probs_base = softmax(rng.normal(size=(B, T, V)))
  valid = np.array([[1, 1, 1, 0], [1, 1, 0, 0]], bool)[:, None, :]  # padded source positions carry 0
  w_adv = np.where(valid, softmax(rng.normal(size=(B, T, S)) * 3), 0)
  w_adv /= w_adv.sum(-1, keepdims=True)
  w_base = np.where(valid, softmax(rng.normal(size=(B, T, S))), 0)
  w_base /= w_base.sum(-1, keepdims=True)
  w_adv[1, 0], w_base[1, 0] = [0.5, 0.5, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]  # a base weight 0: KL floored, finite
  mask = np.array([[True, True, False], [True, True, True]])
  for lam in (0.0, 0.5, 2.0):
    want = (np_tvd(softmax(logits), probs_base) - lam * np_kl(w_adv, w_base))[mask].mean()
    got = wp._adversarial_objective(
      *(jnp.asarray(x, jnp.float32) for x in (logits, w_adv, probs_base, w_base)), mask, lam
    )
    assert float(got) == pytest.approx(want, rel=1e-5)
  assert np_kl(w_adv, w_base)[1, 0] > 10  # the floored term is there, and large
  # The objective at lambda 0 is at its minimum, 0, where the adversary's outputs are the base's.
  same = wp._adversarial_objective(jnp.log(jnp.asarray(probs_base)), w_base, probs_base, w_base, mask, 0.0)
  assert abs(float(same)) < 1e-6
  # Its gradient is finite where the weights are 0 (padding) on either side.
  grads = jax.grad(lambda w: wp._adversarial_objective(jnp.asarray(logits), w, probs_base, w_base, mask, 1.0))(
    jnp.asarray(w_adv, jnp.float32)
  )
  assert np.isfinite(np.asarray(grads)).all()


def test_objective_on_the_models_equals_numpy_from_their_teacher_forced_outputs(base):
  adversary = init_params(CFG, jax.random.key(4))
  chunk = TEST[1]  # with padding rows
  batch = wp._batch(chunk)
  logits_b, weights_b = forced(base, chunk)
  logits_a, weights_a = forced(adversary, chunk)
  mask = np.arange(WIDTH)[None] < chunk['ref_len'][:, None]
  for lam in (0.0, 0.3):
    got = float(wp._AdversaryLoss(CFG)(adversary, batch, (base, jnp.float32(lam))))  # the base's outputs inside
    want = (np_tvd(softmax(logits_a), softmax(logits_b)) - lam * np_kl(weights_a, weights_b))[mask].mean()
    assert got == pytest.approx(want, rel=1e-4, abs=1e-6)


def test_adversary_with_lambda_moves_its_attention_further_deterministically(base):
  got = wp.adversarial_training(CFG, base, TRAIN, TEST, lambdas=(0.0, 1.0), steps=120, learning_rate=0.02, seed=5)
  zero, one = got['adversaries']
  assert (zero['lambda'], one['lambda']) == (0.0, 1.0) and got['tokens'] == TOKENS == 5 * 13
  assert one['jsd'] > zero['jsd'] + 0.1 and one['kl'] > zero['kl']
  assert zero['tvd'] < 0.5 and 0 <= zero['jsd'] <= np.log(2) and 0 <= one['jsd'] <= np.log(2)
  assert got['base_accuracy'] == pytest.approx(np_accuracy([forced(base, c)[0] for c in TEST], TEST))
  assert got['settings']['lambdas'] == [0.0, 1.0] and got['settings']['steps'] == 120
  # Deterministic: trained again from the same seed, each adversary reports the same.
  for row in (zero, one):
    again = wp.adversarial_training(
      CFG, base, TRAIN, TEST, lambdas=(row['lambda'],), steps=120, learning_rate=0.02, seed=5
    )['adversaries'][0]
    assert again == row
  # Padding rows are masked: changing their tokens changes nothing.
  short = dict(lambdas=(1.0,), steps=20, learning_rate=0.02, seed=5)
  a = wp.adversarial_training(CFG, base, TRAIN, TEST, **short)
  b = wp.adversarial_training(CFG, base, garbled(TRAIN[:2]) + TRAIN[2:], garbled(TEST), **short)
  for key in ('jsd', 'kl', 'tvd', 'accuracy'):
    assert b['adversaries'][0][key] == pytest.approx(a['adversaries'][0][key], rel=1e-5, abs=1e-7)


def test_adversary_starts_from_fresh_parameters_drawn_from_its_seed():
  """A base at the initialisation training draws from seed 11: the untrained adversary of seed 11 is the base
  (JSD and TVD 0, the same accuracy), of seed 12 it is not."""
  base = init_params(CFG, jax.random.split(jax.random.key(11))[0])
  frozen = dict(lambdas=(0.0,), steps=1, learning_rate=1e-12)
  same = wp.adversarial_training(CFG, base, TRAIN, TEST, seed=11, **frozen)
  row = same['adversaries'][0]
  assert row['jsd'] < 1e-9 and row['tvd'] < 1e-6 and row['kl'] < 1e-6
  assert row['accuracy'] == same['base_accuracy']
  other = wp.adversarial_training(CFG, base, TRAIN, TEST, seed=12, **frozen)['adversaries'][0]
  assert other['jsd'] > 1e-5 and other['tvd'] > 1e-3
  weights_a = [forced(init_params(CFG, jax.random.split(jax.random.key(12))[0]), c)[1] for c in TEST]
  weights_b = [forced(base, c)[1] for c in TEST]
  masks = [np.arange(WIDTH)[None] < c['ref_len'][:, None] for c in TEST]
  want = sum(np_jsd(a, b)[m].sum() for a, b, m in zip(weights_a, weights_b, masks)) / TOKENS
  assert other['jsd'] == pytest.approx(want, rel=1e-3)


# The non-contextual diagnostic -----------------------------------------------------------------------------


def test_noncontextual_context_for_one_hot_weights_is_the_tokens_mlp():
  model = wp.NonContextual(8, 8, 6, 10)
  src = np.array([[4, 5, 6, 2], [7, 7, 2, 0]], np.int32)
  src_len = np.array([4, 3], np.int32)
  prev = np.array([[BOS, 4, 5], [BOS, 7, 7]], np.int32)
  params = model.init(jax.random.key(0), src, src_len, prev)['params']
  p = jax.tree.map(lambda x: np.asarray(x, np.float64), params)
  h = np.tanh(p['source_embed']['embedding'][src] @ p['projection']['kernel'] + p['projection']['bias'])
  one_hot = np.zeros((2, 3, 4), np.float32)
  picks = np.array([[2, 0, 3], [1, 2, 0]])
  for b in range(2):
    for t in range(3):
      one_hot[b, t, picks[b, t]] = 1.0
  logits, weights = model.apply({'params': params}, src, src_len, prev, jnp.asarray(one_hot))
  e = p['target_embed']['embedding'][prev]
  context = np.stack([h[b, picks[b]] for b in range(2)])  # the MLP of the token picked, nothing else
  want = np.concatenate([context, e], -1) @ p['output']['kernel'] + p['output']['bias']
  np.testing.assert_allclose(np.asarray(logits), want, rtol=1e-5, atol=1e-6)
  np.testing.assert_array_equal(np.asarray(weights), one_hot)
  # Its own weights: a distribution over the valid positions, and each token's value ignores its neighbours.
  _, own = model.apply({'params': params}, src, src_len, prev)
  own = np.asarray(own)
  np.testing.assert_allclose(own.sum(-1), 1.0, rtol=1e-6)
  assert (own[1, :, 3] == 0).all() and (own[1, :, :3] > 0).all()
  neighbour = src.copy()
  neighbour[0, 1] = 6
  changed = np.asarray(model.apply({'params': params}, neighbour, method='values'))
  np.testing.assert_allclose(changed[0, [0, 2, 3]], h[0, [0, 2, 3]], rtol=1e-5)
  assert not np.allclose(changed[0, 1], h[0, 1])


def test_diagnostic_with_a_base_attending_uniformly_scores_frozen_as_uniform():
  flat = dataclasses.replace(CFG, score='none')
  base = init_params(flat, jax.random.key(2))
  weights = np.asarray(wp.greedy_path(flat, base, TEST[0]['src'], TEST[0]['src_len'], TEST[0]['ref'])[1])
  np.testing.assert_array_equal(weights, np.full_like(weights, 1 / WIDTH))  # the base's attention is uniform
  got = wp.noncontextual_diagnostic(flat, base, TRAIN, TEST, steps=60, learning_rate=0.03, seed=1, hidden_size=16)
  assert got['correct']['frozen'] == got['correct']['uniform'] and got['tokens'] == TOKENS
  assert got['accuracy']['frozen'] == got['accuracy']['uniform'] == got['correct']['uniform'] / TOKENS
  assert set(got['accuracy']) == {'frozen', 'uniform', 'learned'} and got['settings']['hidden_size'] == 16


def test_diagnostic_with_the_oracle_alignment_frozen_in_copies_and_uniform_does_not(monkeypatch):
  """A base whose attention at step t is on source position t (the copy task's alignment): the non-contextual
  model reads the token to copy and learns the task; with uniform weights it sees only the bag of tokens."""

  def oracle(cfg, params, src, src_len, ref):
    return None, jnp.broadcast_to(jnp.eye(ref.shape[1], src.shape[1]), ref.shape + src.shape[1:])

  monkeypatch.setattr(wp, 'greedy_path', oracle)
  options = dict(steps=150, learning_rate=0.03, seed=0, hidden_size=16)
  got = wp.noncontextual_diagnostic(CFG, None, TRAIN, TEST, **options)
  acc = got['accuracy']
  assert acc['frozen'] == 1.0 and acc['uniform'] < 0.6 and acc['learned'] < 0.6
  assert wp.noncontextual_diagnostic(CFG, None, TRAIN, TEST, **options) == got  # deterministic from the seed
  # Padding rows are masked, in training and in the score.
  assert wp.noncontextual_diagnostic(CFG, None, garbled(TRAIN[:2]) + TRAIN[2:], garbled(TEST), **options) == got
  assert wp.noncontextual_diagnostic(CFG, None, TRAIN, TEST, **{**options, 'seed': 1})['settings']['seed'] == 1


# Bad arguments ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
  'change, match',
  [
    ({'lambdas': (0.1, float('nan'))}, 'lambda nan'),
    ({'lambdas': (float('inf'),)}, 'lambda inf'),
    ({'lambdas': (-1.0,)}, 'lambda -1.0'),
    ({'lambdas': ()}, 'lambdas is empty'),
    ({'lambdas': ('big',)}, 'not a list of numbers'),
    ({'steps': 0}, 'steps=0'),
    ({'steps': 2.5}, 'steps=2.5'),
    ({'learning_rate': 0.0}, 'learning_rate=0.0'),
    ({'learning_rate': float('nan')}, 'learning_rate=nan'),
    ({'train_chunks': []}, 'train_chunks is empty'),
    ({'test_chunks': []}, 'test_chunks is empty'),
    ({'test_chunks': [{'src': TEST[0]['src']}]}, 'lacks'),
    ({'train_chunks': [{**TRAIN[0], 'ref_len': np.zeros(8, np.int32)}]}, 'no decoder step'),
  ],
)
def test_bad_arguments_are_refused_with_the_fix(change, match):
  args = {'train_chunks': TRAIN, 'test_chunks': TEST, 'steps': 1, 'learning_rate': 1e-3}
  args.update(change)
  with pytest.raises(ConfigError, match=match):
    wp.adversarial_training(CFG, None, **args)
  if 'lambdas' not in change:
    with pytest.raises(ConfigError, match=match):
      wp.noncontextual_diagnostic(CFG, None, **args)


def test_a_hidden_size_below_1_is_refused():
  with pytest.raises(ConfigError, match='hidden_size=0'):
    wp.noncontextual_diagnostic(CFG, None, TRAIN, TEST, hidden_size=0)
