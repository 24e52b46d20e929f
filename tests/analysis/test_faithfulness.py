"""The faithfulness measures (attnmt/analysis/faithfulness.py) against independent references: the divergences
by NumPy, preserved words by hand, erasure by deleting tokens and rerunning the model one sentence at a time,
gradient x input by finite differences, Spearman by scipy, the seed summary by hand."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats

from attnmt.analysis import faithfulness
from attnmt.errors import InputError
from attnmt.model.config import ModelConfig
from attnmt.model.interventions import Intervention
from attnmt.model.seq2seq import BOS, Seq2Seq, init_params
from small_model import SMALL


def np_softmax(x):
  e = np.exp(x - x.max(-1, keepdims=True))
  return e / e.sum(-1, keepdims=True)


def test_divergence_matches_numpy():
  rng = np.random.default_rng(0)
  a, b = rng.normal(size=(3, 4, 9)), rng.normal(size=(3, 4, 9))
  b[0, 0] = a[0, 0]  # identical: 0 divergence, same arg-max
  mask = np.ones((3, 4), bool)
  mask[2, 3] = False
  got = {k: float(v) for k, v in faithfulness.divergence(a, b, mask).items()}
  p, q = np_softmax(a), np_softmax(b)
  m = (p + q) / 2
  jsd = 0.5 * (np.sum(p * np.log2(p / m), -1) + np.sum(q * np.log2(q / m), -1))
  tvd = 0.5 * np.abs(p - q).sum(-1)
  np.testing.assert_allclose(got['jsd'], jsd[mask].sum(), rtol=1e-5)
  np.testing.assert_allclose(got['tvd'], tvd[mask].sum(), rtol=1e-5)
  assert got['argmax_changed'] == np.sum((a.argmax(-1) != b.argmax(-1)) & mask)
  assert got['positions'] == 11 and jsd[0, 0] < 1e-12


def test_preserved_words_by_hand():
  words = frozenset({'el', 'de', 'y'})
  original = ['El hijo de David y el rey', 'y dijo']
  counter = ['el rey de Judá', 'dijo dijo']
  got = faithfulness.preserved_words(original, counter, words)
  # function words of the originals: el x2, de, y | y -> kept: el x1, de -> 2 of 5
  # content words: hijo, david, rey | dijo -> kept: rey, dijo -> 2 of 4
  assert got == {'function': (2, 5), 'content': (2, 4)}


def test_the_shipped_function_word_list_reads():
  words = faithfulness.function_words()
  assert {'el', 'de', 'que', 'y', 'en', 'fue'} <= words and 'dios' not in words and len(words) > 150


def small():
  return ModelConfig.from_dict({**SMALL, 'score': 'general'})


def data():
  rng = np.random.default_rng(7)
  lengths = np.array([6, 4, 1])
  src = np.where(np.arange(6)[None] < lengths[:, None], rng.integers(4, 20, size=(3, 6)), 0)
  src[np.arange(3), lengths - 1] = 2  # EOS last
  tokens = rng.integers(4, 23, size=(3, 5))
  return src, lengths, tokens, np.array([5, 3, 4])


def test_erasure_equals_deleting_tokens_one_sentence_at_a_time():
  cfg = small()
  params = init_params(cfg, jax.random.key(0))
  src, lengths, tokens, out_len = data()
  got = faithfulness.erasure(cfg, params, src, lengths, tokens, out_len, seed=0)
  tgt_in = np.concatenate([np.full((3, 1), BOS), tokens[:, :-1]], 1)
  apply = jax.jit(Seq2Seq(cfg).apply)  # one program per source width, not run operation by operation
  changed = 0
  for b in range(2):  # row 2's source is EOS alone: skipped
    n = lengths[b]
    logits, w = apply({'params': params}, src[b : b + 1, :n], lengths[b : b + 1], tgt_in[b : b + 1])
    for t in range(out_len[b]):
      i = int(np.argmax(np.asarray(w)[0, t, : n - 1]))  # never the final EOS
      erased = np.delete(src[b, :n], i)[None]
      after = apply({'params': params}, erased, np.array([n - 1]), tgt_in[b : b + 1])[0]
      changed += int(np.argmax(np.asarray(after)[0, t]) != np.argmax(np.asarray(logits)[0, t]))
  assert got['changed_max'] == changed
  assert got['positions'] == 5 + 3 and got['skipped'] == 4
  assert 0 <= got['changed_random'] <= got['positions']


def test_gradient_times_input_matches_finite_differences_and_spearman_matches_scipy():
  cfg = small()
  params = init_params(cfg, jax.random.key(1))
  src, lengths, tokens, out_len = data()
  attribution, weights = faithfulness.attributions(
    cfg, params, jnp.asarray(src), jnp.asarray(lengths), jnp.asarray(tokens)
  )
  tgt_in = np.concatenate([np.full((3, 1), BOS), tokens[:, :-1]], 1)
  embed = np.asarray(params['encoder']['embed'])[src]

  logits_at = jax.jit(
    lambda offset: Seq2Seq(cfg).apply({'params': params}, src, lengths, tgt_in, src_offset_BxSxE=offset)[0]
  )

  def logp(offset, b, t):
    return float(jax.nn.log_softmax(logits_at(offset)[b, t])[tokens[b, t]])

  # d/de of log p along the direction x_i (source position i's own embedding): sum_e x_ie dlogp/dx_ie
  eps = 1e-2
  for b, t, i in ((0, 1, 2), (1, 0, 0), (0, 4, 5)):
    direction = np.zeros_like(embed)
    direction[b, i] = embed[b, i]
    fd = (logp(jnp.asarray(eps * direction), b, t) - logp(jnp.asarray(-eps * direction), b, t)) / (2 * eps)
    np.testing.assert_allclose(float(attribution[b, t, i]), abs(fd), rtol=2e-2, atol=1e-4)
  got = faithfulness.agreement(attribution, weights, lengths, out_len)
  want = [
    scipy.stats.spearmanr(
      np.asarray(weights)[b, t, : lengths[b]], np.asarray(attribution)[b, t, : lengths[b]]
    ).statistic
    for b in range(2)
    for t in range(out_len[b])
  ]
  assert got['tokens'] == len(want) and got['undefined'] == 4  # row 2: one source position
  np.testing.assert_allclose(got['spearman_sum'], np.sum(want), rtol=1e-6)


def test_teacher_forced_shift_is_zero_for_identity_and_not_for_uniform():
  cfg = small()
  params = init_params(cfg, jax.random.key(2))
  src, lengths, tokens, out_len = data()
  batch = dict(
    src=jnp.asarray(src), src_len=jnp.asarray(lengths), tgt_in=jnp.asarray(tokens), tgt_len=jnp.asarray(out_len)
  )
  same = faithfulness.teacher_forced_shift(cfg, params, batch, Intervention('identity'))
  assert float(same['jsd']) == 0.0 and int(same['argmax_changed']) == 0 and int(same['positions']) == 12
  shifted = faithfulness.teacher_forced_shift(cfg, params, batch, Intervention('first'))
  assert 0.0 < float(shifted['jsd']) / 12 < 1.0 and float(shifted['tvd']) > 0


def test_table_cells_show_the_mean_and_the_t_interval_over_seeds():
  """One seed: the value alone (no spread from one); three: the mean and Student's t 95 % interval, by hand."""
  assert faithfulness._cell([0.4], 100.0, 1) == '40.0'
  half = scipy.stats.t.ppf(0.975, 2) * 0.2 / np.sqrt(3)
  assert faithfulness._cell([0.2, 0.4, 0.6], 1.0, 3) == f'0.400 [{0.4 - half:.3f}, {0.4 + half:.3f}]'


def _run_result(variant, seed, jsd, spearman):
  return {
    'variant': variant,
    'seeds': [seed],
    'sentences': 8,
    'attends': True,
    'interventions': {'uniform': {'jsd': [jsd], 'bleu': [10.0 + seed]}},
    'erasure': {'changed_max': [0.5]},
    'agreement': {'spearman': [spearman]},
  }


def test_single_seed_runs_of_a_variant_pool_into_one_result_with_their_seeds():
  runs = [
    _run_result('dot/luong/global/feed/seeds=0', 0, 0.1, 0.3),
    _run_result('none/luong/global/feed/seeds=0', 0, 0.0, 0.0),
    _run_result('dot/luong/global/feed/seeds=2', 2, 0.3, 0.5),
  ]
  runs[1] = {'variant': runs[1]['variant'], 'seeds': [0], 'sentences': 8, 'attends': False}
  dot, none = faithfulness.pool_seeds(runs)
  assert dot['variant'] == 'dot/luong/global/feed' and dot['seeds'] == [0, 2]
  assert dot['interventions'] == {'uniform': {'jsd': [0.1, 0.3], 'bleu': [10.0, 12.0]}}
  assert dot['erasure'] == {'changed_max': [0.5, 0.5]} and dot['agreement'] == {'spearman': [0.3, 0.5]}
  assert none == {'variant': 'none/luong/global/feed', 'seeds': [0], 'sentences': 8, 'attends': False}
  assert runs[0]['interventions']['uniform']['jsd'] == [0.1]  # the inputs are not changed
  with pytest.raises(InputError, match=r'seed\(s\) \[0\] appear in more than one run'):
    faithfulness.pool_seeds([runs[0], runs[0]])
  other = {**_run_result('dot/luong/global/feed/seeds=1', 1, 0.2, 0.4), 'sentences': 16}
  with pytest.raises(InputError, match='measured on other sentences'):
    faithfulness.pool_seeds([runs[0], other])
