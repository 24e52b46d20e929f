"""The faithfulness measures (attnmt/faithfulness/counterfactual.py) against independent references: the divergences
by NumPy, preserved words by hand, erasure by deleting tokens and rerunning the model one sentence at a time,
gradient x input by finite differences, Spearman by scipy, the seed summary by hand."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats

from attnmt.faithfulness import contrasts, counterfactual, measures, moradi, page
from attnmt.errors import ConfigError, InputError
from attnmt.model.config import ModelConfig
from attnmt.model import interventions
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
  got = {k: float(v) for k, v in measures.divergence(a, b, mask).items()}
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
  got = counterfactual.preserved_words(original, counter, words)
  # function words of the originals: el x2, de, y | y -> kept: el x1, de -> 2 of 5
  # content words: hijo, david, rey | dijo -> kept: rey, dijo -> 2 of 4
  assert got == {'function': (2, 5), 'content': (2, 4)}


def test_the_shipped_function_word_list_reads():
  words = moradi.function_words()
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
  got = counterfactual.erasure(cfg, params, src, lengths, tokens, out_len, seed=0)
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
  attribution, weights = counterfactual.attributions(
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
  got = counterfactual.agreement(attribution, weights, lengths, out_len)
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
  same = counterfactual.teacher_forced_shift(cfg, params, batch, interventions.build('identity'))
  assert float(same['jsd']) == 0.0 and int(same['argmax_changed']) == 0 and int(same['positions']) == 12
  shifted = counterfactual.teacher_forced_shift(cfg, params, batch, interventions.build('first'))
  assert 0.0 < float(shifted['jsd']) / 12 < 1.0 and float(shifted['tvd']) > 0


def test_table_cells_show_the_mean_and_the_t_interval_over_seeds():
  """One seed: the value alone (no spread from one); three: the mean and Student's t 95 % interval, by hand."""
  assert page._interval([0.4], 100.0, 1) == '40.0'
  half = scipy.stats.t.ppf(0.975, 2) * 0.2 / np.sqrt(3)
  assert page._interval([0.2, 0.4, 0.6], 1.0, 3) == f'0.400 [{0.4 - half:.3f}, {0.4 + half:.3f}]'


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
  dot, none = counterfactual.pool_seeds(runs)
  assert dot['variant'] == 'dot/luong/global/feed' and dot['seeds'] == [0, 2]
  assert dot['interventions'] == {'uniform': {'jsd': [0.1, 0.3], 'bleu': [10.0, 12.0]}}
  assert dot['erasure'] == {'changed_max': [0.5, 0.5]} and dot['agreement'] == {'spearman': [0.3, 0.5]}
  assert none == {'variant': 'none/luong/global/feed', 'seeds': [0], 'sentences': 8, 'attends': False}
  assert runs[0]['interventions']['uniform']['jsd'] == [0.1]  # the inputs are not changed
  with pytest.raises(InputError, match=r'seed\(s\) \[0\] appear in more than one run'):
    counterfactual.pool_seeds([runs[0], runs[0]])
  other = {**_run_result('dot/luong/global/feed/seeds=1', 1, 0.2, 0.4), 'sentences': 16}
  with pytest.raises(InputError, match='measured on other sentences'):
    counterfactual.pool_seeds([runs[0], other])


def _cell_result(variant, jsd, changed_max, attends=True):
  out = {'variant': variant, 'seeds': [0, 1, 2], 'sentences': 8, 'attends': attends}
  if attends:
    out |= {
      'interventions': {'uniform': {k: [0.1, 0.2, 0.3] for k, *_ in contrasts.COLUMNS} | {'jsd': jsd}},
      'erasure': {'changed_max': changed_max, 'changed_random': [0.1, 0.1, 0.2], 'bleu_own_output': [9.0, 9.5, 9.9]},
      'agreement': {'spearman': [0.5, 0.5, 0.5]},
    }
  return out


def _cells():
  return [
    _cell_result('dot/luong/global/feed', [0.40, 0.42, 0.41], [0.70, 0.72, 0.71]),  # far above additive
    _cell_result('general/luong/global/feed', [0.201, 0.209, 0.221], [0.50, 0.60, 0.55]),  # level with it
    _cell_result('none/luong/global/feed', None, None, attends=False),  # no attention: not in the family
    _cell_result('additive/bahdanau/global', [0.20, 0.21, 0.22], [0.50, 0.52, 0.51]),
  ]


def test_contrasts_are_one_bonferroni_family_over_measures_times_cells():
  """2 measures x 2 cells against additive = 4 contrasts at 0.05 over all: p is the paired t's over the cells'
  same-numbered seeds (scipy's ttest_rel), the adjusted
  p min(1, 4 p), the interval the t interval at 0.05 / 4 in the shown scale (erasure in %)."""
  results = _cells()
  measures = ('interventions/uniform/jsd', 'erasure/changed_max')
  got = contrasts.contrasts(results, measures, 'additive')
  assert got['reference'] == 'additive/bahdanau/global' and got['family_size'] == 4 == len(got['rows'])
  assert got['level'] == pytest.approx(0.05 / 4)
  cells = {r['variant']: r for r in results}
  for row in got['rows']:
    assert row['b'] == 'additive/bahdanau/global' and row['a'] != 'none/luong/global/feed'
    scale = 100.0 if row['measure'] == 'erasure/changed_max' else 1.0
    a = np.array(contrasts.measure_values(cells[row['a']], row['measure'])) * scale
    b = np.array(contrasts.measure_values(cells[row['b']], row['measure'])) * scale
    want = scipy.stats.ttest_rel(a, b)
    assert row['p_value'] == pytest.approx(want.pvalue, rel=1e-9)
    assert row['p_adjusted'] == pytest.approx(min(1.0, want.pvalue * 4), rel=1e-9)
    assert row['difference'] == pytest.approx(a.mean() - b.mean())
    se, df = np.std(a - b, ddof=1) / np.sqrt(3), 2
    half = scipy.stats.t.ppf(1 - 0.05 / 8, df) * se
    np.testing.assert_allclose(row['interval'], [a.mean() - b.mean() - half, a.mean() - b.mean() + half], rtol=1e-9)
    assert (
      (row['decision'] == 'greater') == (row['p_adjusted'] < 0.05) == (row['interval'][0] > 0 or row['interval'][1] < 0)
    )
  by = {(r['measure'], r['a']): r for r in got['rows']}
  for measure in measures:
    clear = by[measure, 'dot/luong/global/feed']
    assert clear['decision'] == 'greater' and clear['interval'][0] > 0
    assert clear['verdict'] == 'dot/luong/global/feed > additive/bahdanau/global'
  assert by['erasure/changed_max', 'dot/luong/global/feed']['difference'] == pytest.approx(20.0)  # in %
  assert {r['decision'] for r in got['rows']} == {'greater', 'undecided'}


def test_contrasts_never_say_equivalent_without_a_declared_margin():
  """general's JSD is level with additive's, its interval narrow: with a margin of 0.5 it would be
  'equivalent'; with none declared it is undecided, and no verdict says ≈."""
  level = contrasts.contrasts(_cells(), ('interventions/uniform/jsd',), 'additive/bahdanau/global')
  row = next(r for r in level['rows'] if r['a'] == 'general/luong/global/feed')
  assert -0.5 < row['interval'][0] and row['interval'][1] < 0.5 and level['delta'] == 0.0
  assert row['decision'] == 'undecided' and '≈' not in row['verdict'] and 'equivalent' not in row['verdict']
  with_margin = contrasts.contrasts(_cells(), ('interventions/uniform/jsd',), 'additive', delta=0.5)
  assert [r['decision'] for r in with_margin['rows']] == ['greater', 'equivalent']
  written = page.counterfactual_markdown(_cells(), level)
  assert 'one family of 1 measures × 2 cells' in written and 'alpha 0.05 over all of them' in written
  assert '| uniform: JSD (bits) | dot/luong/global/feed − additive/bahdanau/global | +0.200 |' in written
  assert 'equivalent' not in written.split('Verdicts:')[1].split('\n', 1)[1] and '≈' not in written


def test_contrasts_name_a_missing_measure_or_reference():
  with pytest.raises(InputError, match="no measure 'interventions/zero_max/jsd'"):
    contrasts.contrasts(_cells(), ('interventions/zero_max/jsd',), 'additive')
  with pytest.raises(ConfigError, match="reference 'concat' is not one of the measured cells"):
    contrasts.contrasts(_cells(), contrasts.MEASURES[:1], 'concat')
