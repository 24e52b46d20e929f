"""Coverage: in the score (Tu et al. 2016), as a loss (See et al. 2017), as a beam penalty (Wu et al. 2016)."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from small_model import sized, steps_equal_teacher_forcing

from attnmt.model import attention, decoding, deferred_scan, scores
from attnmt.training import train_step
from attnmt.errors import ConfigError
from attnmt.model.config import ModelConfig
from attnmt.model.seq2seq import Seq2Seq, init_params


def _with_w_cov(params, value=0.7):
  """w_c starts at 0 (the model begins as without coverage); tests set it so that coverage matters."""
  return jax.tree_util.tree_map_with_path(
    lambda path, x: jnp.full_like(x, value) if 'w_cov' in jax.tree_util.keystr(path) else x, params
  )


def _batch(rng):
  return dict(
    src=jnp.asarray(rng.integers(4, 20, (3, 7))),
    src_len=jnp.array([7, 3, 5]),
    tgt_in=jnp.asarray(rng.integers(4, 23, (3, 6))),
    tgt_out=jnp.asarray(rng.integers(4, 23, (3, 6))),
    tgt_len=jnp.array([6, 2, 4]),
  )


def test_coverage_enters_the_additive_score_as_numpy_computes_it(small):
  """e_i = v . tanh(W q + U h_i + b + C_i w_c), softmax over the valid positions; C' = C + a."""
  cfg = ModelConfig(**sized({**small, 'score': 'additive(coverage=sum)'}))
  rng = np.random.default_rng(0)
  q, h, a = cfg.decoder_hidden_size, cfg.annotation_size, scores.build(cfg).size
  p = {
    'W': rng.normal(size=(q, a)),
    'U': rng.normal(size=(h, a)),
    'b': rng.normal(size=a),
    'v': rng.normal(size=a),
    'w_cov': rng.normal(size=a),
  }
  query, ann = rng.normal(size=(2, q)), rng.normal(size=(2, 6, h))
  cov, lengths = rng.random((2, 6)), np.array([6, 4])
  keys = ann @ p['U'] + p['b']
  got, state = attention.attention_step(
    cfg,
    jax.tree.map(lambda x: jnp.asarray(x, jnp.float32), p),
    jnp.asarray(query, jnp.float32),
    jnp.asarray(keys, jnp.float32),
    jnp.asarray(lengths),
    jnp.int32(0),
    {'coverage': jnp.asarray(cov, jnp.float32)},
  )
  for b in range(2):
    n = lengths[b]
    e = np.tanh(query[b] @ p['W'] + keys[b, :n] + cov[b, :n, None] * p['w_cov']) @ p['v']
    want = np.exp(e - e.max()) / np.exp(e - e.max()).sum()
    np.testing.assert_allclose(got[b, :n], want, rtol=1e-5, atol=1e-6)
    assert np.all(np.asarray(got[b, n:]) == 0.0)
  np.testing.assert_allclose(state['coverage'], cov + np.asarray(got), rtol=1e-6)


@pytest.mark.parametrize(
  'score,timing', [('additive', 'bahdanau'), ('normed_additive', 'luong'), ('concat', 'luong'), ('concat', 'bahdanau')]
)
@pytest.mark.slow
def test_teacher_forced_equals_step_by_step_with_coverage(small, score, timing):
  cfg = ModelConfig(**sized({**small, 'score': f'{score}(coverage=sum)', 'query_timing': timing}))
  params = {'params': _with_w_cov(init_params(cfg, jax.random.key(0)))}
  model = Seq2Seq(cfg)
  b = _batch(np.random.default_rng(1))
  logits, weights, state = steps_equal_teacher_forcing(model, params, b['src'], b['src_len'], b['tgt_in'])
  np.testing.assert_allclose(state.attention['coverage'], np.asarray(weights).sum(1), rtol=1e-5, atol=1e-6)
  # Coverage changes the attention: the same parameters with w_c = 0 attend differently after step 1.
  no_cov = {'params': _with_w_cov(params['params'], 0.0)}
  _, plain_weights = jax.jit(model.apply)(no_cov, b['src'], b['src_len'], b['tgt_in'])
  np.testing.assert_allclose(plain_weights[:, 0], weights[:, 0], rtol=1e-6)  # C = 0 at the first step
  assert np.abs(np.asarray(plain_weights[:, 1:]) - np.asarray(weights[:, 1:])).max() > 1e-4


def test_coverage_model_gradients_equal_plain_autodiff(small, monkeypatch):
  """w_c and everything else: the deferred scan's gradients are autodiff's of the plain scan."""
  cfg = ModelConfig(**sized({**small, 'query_timing': 'luong', 'score': 'concat(coverage=sum)'}))
  params = _with_w_cov(init_params(cfg, jax.random.key(0)))
  batch = _batch(np.random.default_rng(0))
  grad = jax.grad(lambda p: train_step.loss_fn(cfg, p, batch, None, False, 0.0, 0.5)[0])
  fast = jax.jit(grad)(params)
  monkeypatch.setattr(deferred_scan, 'deferred_weight_scan', deferred_scan.reference_scan)
  slow = jax.jit(grad)(params)
  jax.tree.map(lambda g, w: np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-6), fast, slow)
  assert np.abs(np.asarray(fast['decoder']['attention']['w_cov'])).sum() > 0


@pytest.mark.parametrize('score', ['dot', 'general', 'location', 'none', 'scaled_dot'])
def test_coverage_is_refused_for_scores_without_a_tanh(small, score):
  """Coverage is an option of the tanh scores alone: another score refuses it in one line naming the option."""
  overrides = dict(score=f'{score}(coverage=sum)', decoder_hidden_size=12, encoder_hidden_size=6)
  with pytest.raises(ConfigError, match=r"has no option 'coverage'; (it has none|valid: positions)$") as e:
    ModelConfig.from_dict({**small, **overrides})
  assert f"model.score '{score}(coverage=sum)'" in str(e.value) and '\n' not in str(e.value)
  with pytest.raises(ConfigError, match=r"unknown model.score additive.coverage 'fertility'; valid: none, sum$"):
    ModelConfig.from_dict({**small, 'score': 'additive(coverage=fertility)'})
  assert scores.build(ModelConfig(**sized({**small, 'score': 'additive(coverage=sum)'}))).uses_coverage
  assert not scores.build(ModelConfig(**sized(small))).uses_coverage


def test_coverage_loss_by_hand():
  """Two steps over two positions: step 0 adds nothing (C = 0); step 1 adds min(0.3, 0.9) + min(0.7, 0.1)."""
  a = jnp.array([[[0.9, 0.1], [0.3, 0.7], [0.5, 0.5]]])
  np.testing.assert_allclose(train_step.coverage_loss(a, jnp.array([2])), 0.3 + 0.1, rtol=1e-6)
  # The third step (outside tgt_len = 2) counts only when the length includes it: + min(.5, 1.2) + min(.5, .8)
  np.testing.assert_allclose(train_step.coverage_loss(a, jnp.array([3])), 0.4 + 1.0, rtol=1e-6)


def test_coverage_loss_against_numpy_and_finite_differences():
  rng = np.random.default_rng(4)
  a = rng.dirichlet(np.ones(5), size=(2, 4))  # B x T x S
  lengths = np.array([4, 2])
  want = 0.0
  for b in range(2):
    c = np.zeros(5)
    for t in range(lengths[b]):
      want += np.minimum(a[b, t], c).sum()
      c += a[b, t]
  np.testing.assert_allclose(train_step.coverage_loss(jnp.asarray(a), jnp.asarray(lengths)), want, rtol=1e-5)
  with jax.enable_x64(True):  # only inside this block
    f = lambda x: train_step.coverage_loss(x, jnp.asarray(lengths))
    x = jnp.asarray(a, jnp.float64)
    g = np.asarray(jax.grad(f)(x))
    direction = rng.normal(size=a.shape)
    eps = 1e-6
    fd = (f(x + eps * direction) - f(x - eps * direction)) / (2 * eps)
    np.testing.assert_allclose(np.sum(g * direction), fd, rtol=1e-6)
    assert np.all(g[1, 2:] == 0.0)  # steps past tgt_len get no gradient


def test_coverage_loss_weight_adds_to_the_objective(small):
  cfg = ModelConfig(**small)
  params = init_params(cfg, jax.random.key(0))
  batch = _batch(np.random.default_rng(2))
  loss = jax.jit(train_step.loss_fn, static_argnums=(0, 4, 5, 6))
  plain, (total, count, terms) = loss(cfg, params, batch, None, False)
  assert terms == {}
  weighted, (total_w, count_w, terms_w) = loss(cfg, params, batch, None, False, 0.0, 0.5)
  _, weights = jax.jit(Seq2Seq(cfg).apply)({'params': params}, batch['src'], batch['src_len'], batch['tgt_in'])
  per_token = train_step.coverage_loss(weights, batch['tgt_len']) / count
  np.testing.assert_allclose(terms_w['coverage_loss'], per_token, rtol=1e-5)
  np.testing.assert_allclose(weighted, plain + 0.5 * per_token, rtol=1e-5)
  assert total_w == total and count_w == count
  optimizer = train_step.make_optimizer(1e-3)
  state = train_step.init_train_state(cfg, optimizer, 0)
  update = jax.jit(functools.partial(train_step.train_step, cfg, optimizer, coverage_loss_weight=0.5))
  _, metrics = update(state, batch)
  np.testing.assert_allclose(metrics['coverage_loss'], per_token, rtol=1e-4)  # the update's program rounds differently


def test_beam_coverage_penalty_is_wu_et_al_from_the_returned_attention(small):
  """Each returned hypothesis's score moves by beta * sum_i log(min(sum_t a_ti, 1)) over its valid
  source positions, computed here from the attention the search returns."""
  cfg = ModelConfig(**sized({**small, 'score': 'additive(coverage=sum)'}))
  params = _with_w_cov(init_params(cfg, jax.random.key(5)))
  rng = np.random.default_rng(5)
  src, lengths = jnp.asarray(rng.integers(4, 20, (3, 7))), jnp.array([7, 3, 5])
  search = functools.partial(decoding.beam_search, cfg, params, src, lengths, beam_size=3, max_len=9, alpha=0.6)
  plain, penalised = search(beta=0.0), search(beta=0.4)
  tokens, w = np.asarray(penalised.tokens), np.asarray(penalised.weights)
  for b in range(3):
    for k in range(3):
      n = int(penalised.lengths[b, k])
      capped = np.maximum(np.minimum(w[b, k, :n, : lengths[b]].sum(0), 1.0), decoding.COVERAGE_FLOOR)
      cp = 0.4 * np.log(capped).sum()
      assert cp <= 0.0
      match = [j for j in range(3) if np.array_equal(np.asarray(plain.tokens[b, j]), tokens[b, k])]
      if match:  # the same hypothesis without the penalty scores log p / lp alone
        np.testing.assert_allclose(penalised.scores[b, k], plain.scores[b, match[0]] + cp, rtol=1e-5, atol=1e-5)
  assert np.all(np.diff(np.asarray(penalised.scores), axis=1) <= 1e-6)  # still best first
  np.testing.assert_array_equal(search().tokens, plain.tokens)  # beta defaults to 0: no penalty


def test_coverage_loss_without_attention_is_refused_before_anything_runs():
  from attnmt.training import trainer
  from experiments.configs import default

  config = default.get_config()
  config.train.coverage_loss_weight = 0.5
  config.model.score = 'none'
  with pytest.raises(ConfigError, match="model.score 'none' has no attention; set the weight to 0"):
    trainer.check_config(config)
  config.model.score = 'additive'
  assert trainer.check_config(config)[0] == [0]
  config.train.coverage_loss_weight = -1.0
  with pytest.raises(ValueError, match='train.coverage_loss_weight must be'):
    trainer.check_config(config)
