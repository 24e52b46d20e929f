"""The four papers' tests of attention as explanation (attnmt/faithfulness/: moradi, serrano_smith, jain_wallace, wiegreffe_pinter, measures) against independent
references on a tiny model: every counterfactual at one step is recomputed by teacher forcing the whole output
through the decoder's own scan with a table of weights that differs from the model's at that step only (`_Table`);
rankings, renormalisation, divergences and first flips by NumPy; gradients by central differences; leave-one-out
by deleting tokens; cases with a known answer (a model whose output ignores its attention, a one-token source)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats

from attnmt.faithfulness import jain_wallace, measures, moradi, serrano_smith, wiegreffe_pinter
from attnmt.errors import ConfigError
from attnmt.model import decoding, interventions
from attnmt.model.config import ModelConfig
from attnmt.model.interventions import Intervention
from attnmt.model.seq2seq import BOS, PAD, Seq2Seq, init_params

CFG = ModelConfig(
  embed_size=4,
  encoder_hidden_size=2,
  decoder_hidden_size=4,
  score='dot',
  query_timing='luong(input_feeding=true)',
  source_vocab_size=8,
  target_vocab_size=8,
  dropout=0.0,
)
SRC = np.array([[4, 5, 6, 7, 2], [7, 4, 2, 0, 0], [2, 0, 0, 0, 0]])
SRC_LEN = np.array([5, 3, 1])
T = 6


class _Table(Intervention):
  """The context reads row t of a B x T x S table handed in through Memory.sentence_keys."""

  name = 'table'

  def apply(self, weights_BxS, length_B, t, keys_Bx2=None):
    return jax.lax.dynamic_index_in_dim(keys_Bx2, t, axis=1, keepdims=False)


def _run(module, src, src_len, tgt_in, table, offset):
  memory, state = module.encode(src, src_len, False, offset)
  return module.decoder(memory._replace(sentence_keys=table), state, tgt_in)[0]


@jax.jit
def table_logits(params, src, src_len, tokens, table, offset=None):
  """Teacher-forced logits (B x T x V) through Decoder.__call__ with every step's weights taken from `table`."""
  tgt_in = jnp.concatenate([jnp.full_like(tokens[:, :1], BOS), tokens[:, :-1]], 1)
  return Seq2Seq(CFG, _Table()).apply({'params': params}, src, src_len, tgt_in, table, offset, method=_run)


def softmax(x):
  e = np.exp(x - x.max(-1, keepdims=True))
  return e / e.sum(-1, keepdims=True)


def choice(logits):
  x = np.array(logits, np.float64)
  x[..., [PAD, BOS]] = -np.inf
  return x.argmax(-1)


@pytest.fixture(scope='module')
def model():
  """Parameters whose greedy outputs differ in length and tokens, the outputs and their own attention."""
  params = jax.tree.map(lambda x: 3.0 * x, init_params(CFG, jax.random.key(17)))
  out = decoding.greedy(CFG, params, SRC, SRC_LEN, T)
  tokens, lengths = np.asarray(out.tokens), np.asarray(out.lengths)
  weights = np.asarray(decoding.forced_attention(CFG, params, SRC, SRC_LEN, tokens))
  assert len(set(lengths.tolist())) > 1 and len(set(tokens[lengths > 1].ravel().tolist())) > 2
  return params, tokens, lengths, weights


def blind(params):
  """The same model with the context's rows of W_c zeroed: its output ignores the attention."""
  dec = dict(params['decoder'])
  dec['W_c'] = dec['W_c'].at[: CFG.annotation_size].set(0.0)
  return {**params, 'decoder': dec}


def one_step_rows(weights, tokens, lengths, counterfactual):
  """One row per (sentence, step, variant): the model's weights with step t's row replaced by each of
  `counterfactual(b, t)`'s rows. Returns the batch (src, src_len, tokens, table) and the rows' (b, t, k)."""
  rows, table = [], []
  for b in range(len(SRC)):
    for t in range(int(lengths[b])):
      for k, w in enumerate(counterfactual(b, t)):
        tab = weights[b].copy()
        tab[t] = w
        rows.append((b, t, k))
        table.append(tab)
  index = np.array([r[0] for r in rows])
  batch = (SRC[index], SRC_LEN[index], tokens[index], np.array(table, np.float32))
  return batch, rows


def test_moradi_equals_teacher_forcing_with_the_counterfactual_at_that_step_only(model):
  params, tokens, lengths, weights = model
  chosen = [interventions.build(n) for n in ('uniform', 'zero_max', 'permute')]
  function_words = {4, 7}
  got = moradi.moradi_one_step(CFG, params, SRC, SRC_LEN, tokens, lengths, chosen, function_words)
  keys = chosen[2].sentence_keys(jnp.asarray(SRC))

  def counterfactuals(b, t):
    w = jnp.asarray(weights[b : b + 1, t])
    return [np.asarray(iv.apply(w, jnp.asarray(SRC_LEN[b : b + 1]), jnp.int32(t), keys[b : b + 1]))[0] for iv in chosen]

  batch, rows = one_step_rows(weights, tokens, lengths, counterfactuals)
  after = choice(np.asarray(table_logits(params, *batch)))
  mask = np.arange(T)[None] < lengths[:, None]
  want = np.zeros((3, len(SRC), T), bool)
  for r, (b, t, k) in enumerate(rows):
    want[k, b, t] = after[r, t] == tokens[b, t]
  assert mask.sum() == len(rows) // 3
  for k, iv in enumerate(chosen):
    np.testing.assert_array_equal(got['same'][iv.label], want[k])
  np.testing.assert_array_equal(got['same']['any'], want.any(0))
  np.testing.assert_array_equal(got['original'], np.where(mask, tokens, PAD))  # the greedy path's own tokens
  function = np.isin(tokens, list(function_words)) & mask
  for k, label in enumerate(['uniform', 'zero_max', 'permute']):
    c = got['counts'][label]
    assert (c['kept'], c['tokens']) == (want[k].sum(), mask.sum())
    assert (c['function_kept'], c['function_tokens']) == ((want[k] & function).sum(), function.sum())
    assert (c['content_kept'], c['content_tokens']) == ((want[k] & ~function & mask).sum(), (mask & ~function).sum())
  shares = moradi.moradi_shares(got['counts'])
  assert shares['any']['tokens'] == pytest.approx(want.any(0).sum() / mask.sum())
  assert not want.all()  # the tiny model's decisions do depend on its attention somewhere
  more = chosen + [interventions.build('only_max'), interventions.build('last')]
  wider = moradi.moradi_one_step(CFG, params, SRC, SRC_LEN, tokens, lengths, more, function_words)
  np.testing.assert_array_equal(wider['same']['any'], want.any(0))  # their 'any': uniform, zero_max, permute only
  alone = moradi.moradi_one_step(CFG, params, SRC, SRC_LEN, tokens, lengths, more[3:], function_words)
  np.testing.assert_array_equal(alone['same']['any'], alone['same']['only_max'] | alone['same']['last'])


def test_moradi_zero_out_preserves_a_token_only_where_the_output_bias_chooses_it(model):
  params, tokens, lengths, _ = model
  bias = np.zeros(CFG.target_vocab_size, np.float32)
  bias[[BOS, PAD, tokens[0, 0]]] = [9.0, 9.0, 1.0]  # PAD and BOS are never decisions
  biased = {**params, 'decoder': {**params['decoder'], 'b_out': jnp.asarray(bias)}}
  out = decoding.greedy(CFG, biased, SRC, SRC_LEN, T)
  own, own_len = np.asarray(out.tokens), np.asarray(out.lengths)
  got = moradi.moradi_one_step(CFG, biased, SRC, SRC_LEN, own, own_len, [interventions.build('uniform')], zero_out=True)
  own_mask = np.arange(T)[None] < own_len[:, None]
  np.testing.assert_array_equal(got['same']['zero_out'], (own == tokens[0, 0]) & own_mask)
  assert 'zero_out' not in moradi.moradi_one_step(CFG, params, SRC, SRC_LEN, tokens, lengths, [])['same']
  # W_c zeroed: h~_t = tanh(0) = 0 at every step, so the model's own output is the bias's choice and ZeroOut keeps it
  flat = {**biased, 'decoder': {**biased['decoder'], 'W_c': jnp.zeros_like(params['decoder']['W_c'])}}
  out = decoding.greedy(CFG, flat, SRC, SRC_LEN, T)
  flat_tokens, flat_len = np.asarray(out.tokens), np.asarray(out.lengths)
  kept = moradi.moradi_one_step(CFG, flat, SRC, SRC_LEN, flat_tokens, flat_len, [], zero_out=True)
  assert kept['counts']['zero_out']['kept'] == kept['counts']['zero_out']['tokens'] == flat_len.sum() > 0


def test_moradi_identity_and_a_one_token_source_preserve_every_token(model):
  params, tokens, lengths, _ = model
  got = moradi.moradi_one_step(CFG, params, SRC, SRC_LEN, tokens, lengths, interventions.build('identity'))
  assert got['counts']['identity'] == {'kept': lengths.sum(), 'tokens': lengths.sum()}
  uniform = moradi.moradi_one_step(CFG, params, SRC, SRC_LEN, tokens, lengths, interventions.build('uniform'))
  assert uniform['same']['uniform'][2, : lengths[2]].all()  # a source of EOS alone: its weight is already 1
  with pytest.raises(ConfigError, match='different label'):
    moradi.moradi_one_step(
      CFG, params, SRC, SRC_LEN, tokens, lengths, [interventions.build('permute'), interventions.build('permute', 1)]
    )


def np_removals(w, order, n):
  """Weights with the first k of `order` zeroed and the rest renormalised (0 when nothing is left), k = 1..n."""
  out = []
  for k in range(1, n + 1):
    kept = w.copy()
    kept[order[:k]] = 0.0
    kept[n:] = 0.0
    total = kept.sum()
    out.append(kept / total if total > 0 else kept)
  return out


def finite_difference_gradients(params, weights, tokens, lengths, h=1e-2):
  """d p(decided token) / d a_i at each step, with the other steps' weights the model's: central differences."""

  def shifted(b, t):
    out = []
    for i in range(SRC_LEN[b]):
      for sign in (1.0, -1.0):
        w = weights[b, t].copy()
        w[i] += sign * h
        out.append(w)
    return out

  batch, rows = one_step_rows(weights, tokens, lengths, shifted)
  probs = softmax(np.asarray(table_logits(params, *batch), np.float64))
  grads = {}
  for r in range(0, len(rows), 2):
    b, t, k = rows[r]
    up, down = probs[r, t, tokens[b, t]], probs[r + 1, t, tokens[b, t]]
    grads.setdefault((b, t), np.zeros(SRC.shape[1]))[k // 2] = (up - down) / (2 * h)
  return grads


def test_serrano_smith_first_flip_equals_removing_weights_one_at_a_time(model):
  params, tokens, lengths, weights = model
  got = serrano_smith.serrano_smith_flip(CFG, params, SRC, SRC_LEN, tokens, lengths)
  grads = finite_difference_gradients(params, weights, tokens, lengths)
  keys = {
    'attention': lambda b, t: weights[b, t],
    'gradient': lambda b, t: grads[(b, t)],
    'gradient_x_attention': lambda b, t: grads[(b, t)] * weights[b, t],
  }
  for name, key in keys.items():
    orders = {}

    def removals(b, t):
      n = SRC_LEN[b]
      orders[b, t] = np.argsort(-key(b, t)[:n], kind='stable')
      return np_removals(weights[b, t], orders[b, t], n)

    batch, rows = one_step_rows(weights, tokens, lengths, removals)
    after = choice(np.asarray(table_logits(params, *batch)))
    first = {}
    for r, (b, t, k) in enumerate(rows):
      if after[r, t] != tokens[b, t] and (b, t) not in first:
        first[b, t] = k + 1
    for b in range(len(SRC)):
      for t in range(T):
        removed = first.get((b, t), 0) if t < lengths[b] and SRC_LEN[b] > 1 else 0  # their ATTN_SEQ_LEN > 1
        assert got[name]['removed'][b, t] == removed, (name, b, t)
        assert got[name]['flipped'][b, t] == (removed > 0)
        if removed:
          assert got[name]['fraction'][b, t] == pytest.approx(removed / SRC_LEN[b])
          want_mass = weights[b, t][orders[b, t][:removed]].sum()
          assert got[name]['mass'][b, t] == pytest.approx(want_mass, abs=1e-6)
        else:
          assert np.isnan(got[name]['fraction'][b, t])
  random = got['random']  # their 5 draws, each a shuffle: D x B x T
  mask = (np.arange(T)[None] < lengths[:, None]) & (SRC_LEN[:, None] > 1)
  assert got['filtered'] == lengths[SRC_LEN == 1].sum() > 0
  assert random['flipped'].shape == (serrano_smith.RANDOM_DRAWS, *mask.shape)
  assert ((random['removed'] >= 1) & (random['removed'] <= SRC_LEN[:, None]))[random['flipped']].all()
  assert random['counts']['steps'] == 5 * mask.sum() and random['counts']['flipped'] == random['flipped'].sum()
  assert random['counts']['fraction_sum'] == pytest.approx(np.nansum(random['fraction']))
  flips = np.stack([got[o]['flipped'] for o in ('attention', 'gradient', 'gradient_x_attention')])
  nothing = mask & ~flips.any(0) & ~random['flipped'].any(0)
  assert got['no_order_flips'] == {'steps': int(nothing.sum()), 'of': int(mask.sum())}
  one = serrano_smith.serrano_smith_flip(CFG, params, SRC, SRC_LEN, tokens, lengths, ('random',), random_draws=1)
  assert one['random']['flipped'].shape == (1, *mask.shape)  # a draw is itself a D x B x T slice
  with pytest.raises(ConfigError, match='valid are'):
    serrano_smith.serrano_smith_flip(CFG, params, SRC, SRC_LEN, tokens, lengths, orders=('largest',))


def test_kendall_tau_by_hand_and_by_scipy():
  assert jain_wallace.kendall_tau([0.1, 0.5, 0.4], [1, 3, 2])[0] == pytest.approx(1.0)
  assert jain_wallace.kendall_tau([0.1, 0.5, 0.4], [3, 1, 2])[0] == pytest.approx(-1.0)
  # pairs (0,1) concordant, (0,2) concordant, (1,2) discordant: (2 - 1) / 3
  assert jain_wallace.kendall_tau([1, 2, 3], [1, 3, 2])[0] == pytest.approx(1 / 3)
  assert all(np.isnan(jain_wallace.kendall_tau([0.5, 0.5], [1, 2])))
  rng = np.random.default_rng(0)
  a, b = rng.random((2, 3, 9))
  got = jain_wallace.kendall_taus(a[:, None], b[:, None], np.array([9, 5, 2]), np.array([1, 1, 0]))
  assert got['tau'][0, 0] == pytest.approx(scipy.stats.kendalltau(a[0, :8], b[0, :8]).statistic)
  assert got['p'][1, 0] == pytest.approx(scipy.stats.kendalltau(a[1, :4], b[1, :4]).pvalue)
  assert np.isnan(got['tau'][2, 0])  # no step


def test_leave_one_out_equals_deleting_each_token(model):
  params, tokens, lengths, _ = model
  got = jain_wallace.leave_one_out(CFG, params, SRC, SRC_LEN, tokens, lengths)
  rows, src, src_len = [], [], []
  for b in range(len(SRC)):
    for i in range(SRC_LEN[b] - 1):  # never the final EOS
      kept = np.delete(SRC[b, : SRC_LEN[b]], i)
      rows.append((b, i))
      src.append(np.pad(kept, (0, SRC.shape[1] - len(kept))))
      src_len.append(len(kept))
  index = np.array([b for b, _ in rows])
  forced = jax.jit(Seq2Seq(CFG).apply)
  tgt_in = np.concatenate([np.full((len(SRC), 1), BOS), tokens[:, :-1]], 1)
  base = softmax(np.asarray(forced({'params': params}, SRC, SRC_LEN, tgt_in)[0], np.float64))
  erased = softmax(
    np.asarray(forced({'params': params}, np.array(src), np.array(src_len), tgt_in[index])[0], np.float64)
  )
  want = np.full(got.shape, np.nan)
  for r, (b, i) in enumerate(rows):
    want[b, : lengths[b], i] = 0.5 * np.abs(base[b] - erased[r]).sum(-1)[: lengths[b]]
  np.testing.assert_allclose(got, want, atol=1e-6)
  assert np.isnan(got[2]).all() and np.nanmax(got) > 0  # a source of EOS alone has nothing to delete
  ignoring = blind(params)
  ignoring['decoder'] = {**ignoring['decoder'], 'W_bridge': jnp.zeros_like(params['decoder']['W_bridge'])}
  nothing = jain_wallace.leave_one_out(CFG, ignoring, SRC, SRC_LEN, tokens, lengths)
  assert np.nanmax(nothing) < 1e-6  # an output that ignores the source changes with no token


def test_gradient_importance_equals_finite_differences_with_the_attention_held(model):
  params, tokens, lengths, weights = model
  got = np.asarray(jain_wallace.gradient_importance(CFG, params, jnp.asarray(SRC), jnp.asarray(SRC_LEN), tokens))
  embed = np.asarray(params['encoder']['embed'])[SRC]
  h = 1e-2
  offsets, index = [], []
  for b in range(len(SRC)):
    for i in range(SRC_LEN[b]):
      for sign in (1.0, -1.0):
        offset = np.zeros(SRC.shape + (CFG.embed_size,), np.float32)[0]
        offset[i] = sign * h * embed[b, i]
        offsets.append(offset)
        index.append((b, i))
  rows = np.array([b for b, _ in index])
  logits = table_logits(params, SRC[rows], SRC_LEN[rows], tokens[rows], weights[rows], np.array(offsets))
  p = np.take_along_axis(softmax(np.asarray(logits, np.float64)), tokens[rows][..., None], -1)[..., 0]
  for r in range(0, len(index), 2):
    b, i = index[r]
    want = np.abs((p[r] - p[r + 1]) / (2 * h))
    np.testing.assert_allclose(got[b, : lengths[b], i], want[: lengths[b]], atol=2e-4, rtol=2e-2)
  assert np.abs(got[1, :, 3:]).max() == 0 and got.max() > 1e-3  # padding has no embedding of its own


def test_serrano_smith_single_weight_equals_zeroing_the_top_and_the_drawn_weight(model):
  params, tokens, lengths, weights = model
  got = serrano_smith.serrano_smith_flip(CFG, params, SRC, SRC_LEN, tokens, lengths, ('attention',), seed=3)
  single, mask = got['attention']['single'], got['mask']
  drawn = single['position_other']
  top = weights.argmax(-1)
  assert ((drawn != top) & (drawn >= 0) & (drawn < SRC_LEN[:, None]))[mask].all() and (drawn[~mask] == -1).all()

  def zeroed(b, t):
    rows = []
    for i in (top[b, t], max(drawn[b, t], 0)):
      w = weights[b, t].astype(np.float64).copy()
      w[i] = 0.0
      rows.append(w / w.sum() if w.sum() > 0 else w)
    return rows

  batch, rows = one_step_rows(weights, tokens, lengths, zeroed)
  before = softmax(np.asarray(table_logits(params, SRC, SRC_LEN, tokens, weights), np.float64))
  after_logits = np.asarray(table_logits(params, *batch), np.float64)
  after = softmax(after_logits)
  counts = dict.fromkeys(('both', 'only_top', 'only_other', 'neither'), 0)
  flips = {}
  for r, (b, t, k) in enumerate(rows):
    if not mask[b, t]:
      continue
    p, q = before[b, t], after[r, t]
    m = (p + q) / 2
    js = 0.5 * (np.sum(p * np.log(p / m)) + np.sum(q * np.log(q / m)))
    name = ('top', 'other')[k]
    assert single[f'jsd_{name}'][b, t] == pytest.approx(js, abs=1e-5)
    assert single[f'weight_{name}'][b, t] == pytest.approx(weights[b, t, (top[b, t], drawn[b, t])[k]], abs=1e-6)
    flips[b, t, name] = choice(after_logits[r, t]) != tokens[b, t]
    assert single[f'flip_{name}'][b, t] == flips[b, t, name]
  for b, t in zip(*np.nonzero(mask)):
    key = {(True, True): 'both', (True, False): 'only_top', (False, True): 'only_other', (False, False): 'neither'}
    counts[key[flips[b, t, 'top'], flips[b, t, 'other']]] += 1
  c = single['counts']
  assert {k: c[k] for k in counts} == counts and c['steps'] == mask.sum() == sum(counts.values())
  assert c['jsd_diff_sum'] == pytest.approx(np.nansum(single['jsd_top'] - single['jsd_other']), abs=1e-6)
  assert c['jsd_top_larger'] == int(np.sum((single['jsd_top'] > single['jsd_other'])[mask]))


def test_serrano_smith_paired_comparison_counts_by_hand():
  # removed at the first flip (0: never): a sooner, b sooner, same, a only, b only, neither, a sooner, masked
  a = np.array([[1, 3, 2, 2, 0, 0, 1, 1]])
  b = np.array([[2, 1, 2, 0, 4, 0, 3, 5]])
  mask = np.array([[True] * 7 + [False]])
  got = serrano_smith.paired(a, b, mask)
  assert got == {'a_sooner': 3, 'b_sooner': 2, 'same': 1, 'of': 6, 'neither': 1}
  assert serrano_smith.paired(b, a, mask) == {**got, 'a_sooner': 2, 'b_sooner': 3}


def test_permutation_test_equals_each_permutation_teacher_forced_at_that_step(model):
  params, tokens, lengths, weights = model
  got = jain_wallace.permutation_test(CFG, params, SRC, SRC_LEN, tokens, lengths, permutations=7, seed=2, keep=True)
  mask, permuted = got['mask'], got['permuted']
  assert permuted.shape == (7, *weights.shape)
  np.testing.assert_array_equal(mask, (np.arange(T)[None] < lengths[:, None]) & (SRC_LEN[:, None] >= 3))
  batch, rows = one_step_rows(weights, tokens, lengths, lambda b, t: list(permuted[:, b, t]))
  before = softmax(np.asarray(table_logits(params, SRC, SRC_LEN, tokens, weights), np.float64))
  logits = np.asarray(table_logits(params, *batch), np.float64)
  differences, flips = {}, {}
  for r, (b, t, k) in enumerate(rows):
    n = SRC_LEN[b]
    w, v = weights[b, t], permuted[k, b, t]
    assert v[n - 1] == w[n - 1] and (v[n:] == w[n:]).all()  # the final EOS keeps its weight
    np.testing.assert_allclose(np.sort(v[: n - 1]), np.sort(w[: n - 1]), rtol=0, atol=0)  # the words' permuted
    differences.setdefault((b, t), []).append(0.5 * np.abs(softmax(logits[r, t]) - before[b, t]).sum())
    flips.setdefault((b, t), []).append(choice(logits[r, t]) != tokens[b, t])
  for b, t in zip(*np.nonzero(mask)):
    assert got['median_difference'][b, t] == pytest.approx(np.median(differences[b, t]), abs=1e-6)
    assert got['flipped_share'][b, t] == pytest.approx(np.mean(flips[b, t]))
    assert got['max_attention'][b, t] == pytest.approx(weights[b, t, : SRC_LEN[b] - 1].max())
  assert np.nanmax(got['median_difference']) > 0 and np.isnan(got['median_difference'][~mask]).all()
  moved = np.array([not np.array_equal(permuted[k, 0, 0], weights[0, 0]) for k in range(7)])
  assert moved.any()  # the draws differ from the identity
  free = jain_wallace.permutation_test(CFG, blind(params), SRC, SRC_LEN, tokens, lengths, permutations=5)
  assert np.nanmax(free['median_difference']) < 1e-6 and np.nanmax(free['flipped_share']) == 0
  with pytest.raises(ConfigError, match='permutations=0'):
    jain_wallace.permutation_test(CFG, params, SRC, SRC_LEN, tokens, lengths, permutations=0)


def test_adversarial_attention_holds_its_bound_and_moves_freely_when_attention_is_ignored(model):
  params, tokens, lengths, _ = model
  options = dict(epsilon=0.01, steps=60, candidates=2, learning_rate=0.1)
  got = jain_wallace.adversarial_attention(CFG, params, SRC, SRC_LEN, tokens, lengths, **options)
  mask = got['mask']
  assert (got['jsd'][2, : lengths[2]] == 0).all() and got['held'][2, : lengths[2]].all()  # one position: nowhere to go
  # Recomputed independently: each held candidate's output stays within epsilon, and its JSD is the reported one.
  weights = np.asarray(decoding.forced_attention(CFG, params, SRC, SRC_LEN, tokens))
  before = softmax(np.asarray(table_logits(params, SRC, SRC_LEN, tokens, weights), np.float64))
  strict = got['strict']
  batch, rows = one_step_rows(weights, tokens, lengths, lambda b, t: [got['weights'][b, t], strict['weights'][b, t]])
  after = softmax(np.asarray(table_logits(params, *batch), np.float64))

  def js(p, q):
    m = (p + q) / 2
    kl = lambda x: np.sum(np.where(x > 0, x * np.log(np.where(x > 0, x, 1) / np.where(m > 0, m, 1)), 0))
    return 0.5 * (kl(p) + kl(q))

  for r, (b, t, k) in enumerate(rows):
    distance = 0.5 * np.abs(after[r, t] - before[b, t]).sum()
    pick, bound = ((got, 0.05), (strict, 0.01))[k]
    if pick['held'][b, t]:
      assert distance <= bound + 1e-5 and distance == pytest.approx(pick['tvd'][b, t], abs=1e-5)
      p, q = weights[b, t].astype(np.float64), pick['weights'][b, t].astype(np.float64)
      words = np.arange(len(p)) < SRC_LEN[b] - 1  # theirs: the JSD of the words' slices, not renormalised
      want = js(np.where(words, p, 0), np.where(words, q, 0)) if k == 0 else js(p, q)
      assert pick['jsd'][b, t] == pytest.approx(want, abs=1e-5)
  assert (got['held'] >= strict['held']).all()  # within 0.01 is within 0.05
  free = jain_wallace.adversarial_attention(CFG, blind(params), SRC, SRC_LEN, tokens, lengths, **options)
  assert free['held'][mask].all() and np.nanmax(free['tvd']) < 1e-6
  assert np.nanmin(free['jsd'][:2][mask[:2]]) > 0.2  # bounded by ln 2 = 0.69


def test_uniform_baseline_and_frozen_attention_against_teacher_forcing(model):
  params, tokens, lengths, weights = model
  mask = np.arange(T)[None] < lengths[:, None]
  uniform = interventions.build('uniform')
  forced_uniform = jax.jit(Seq2Seq(CFG, uniform).apply)
  tgt_in = np.concatenate([np.full((len(SRC), 1), BOS), tokens[:, :-1]], 1)
  flat = choice(np.asarray(forced_uniform({'params': params}, SRC, SRC_LEN, tgt_in)[0]))
  other = jax.tree.map(lambda x: 3.0 * x, init_params(CFG, jax.random.key(1)))
  got = wiegreffe_pinter.uniform_baseline(CFG, params, SRC, SRC_LEN, tokens, lengths, trained_uniform=(CFG, other))
  np.testing.assert_array_equal(got['correct']['own'], mask)  # its own greedy output, teacher-forced
  np.testing.assert_array_equal(got['correct']['uniform'], (flat == tokens) & mask)
  other_choice = choice(np.asarray(jax.jit(Seq2Seq(CFG).apply)({'params': other}, SRC, SRC_LEN, tgt_in)[0]))
  np.testing.assert_array_equal(got['correct']['trained_uniform'], (other_choice == tokens) & mask)
  assert got['counts']['tokens'] == mask.sum() and got['counts']['agreement'] == ((flat == tokens) & mask).sum()
  blind_got = wiegreffe_pinter.uniform_baseline(CFG, blind(params), SRC, SRC_LEN, tokens, lengths)
  assert blind_got['counts']['agreement'] == mask.sum()  # attention ignored: uniform weights change nothing

  # The decoder reading given weights at every step, its state following them: logits equal teacher forcing.
  other_weights = np.asarray(decoding.forced_attention(CFG, other, SRC, SRC_LEN, tokens))
  logits, _ = measures.greedy_path(CFG, params, SRC, SRC_LEN, tokens, given_BxTxS=other_weights)
  np.testing.assert_allclose(logits, table_logits(params, SRC, SRC_LEN, tokens, other_weights), atol=1e-5)
  logits, _ = measures.greedy_path(CFG, params, SRC, SRC_LEN, tokens, intervention=uniform)
  np.testing.assert_allclose(logits, forced_uniform({'params': params}, SRC, SRC_LEN, tgt_in)[0], atol=1e-5)

  same = wiegreffe_pinter.frozen_attention(CFG, params, CFG, params, SRC, SRC_LEN, tokens, lengths)
  assert same['counts']['agrees'] == mask.sum()
  np.testing.assert_array_equal(same['agrees_uniform'], (flat == tokens) & mask)
  guided = wiegreffe_pinter.frozen_attention(CFG, other, CFG, params, SRC, SRC_LEN, tokens, lengths)
  want = choice(np.asarray(table_logits(params, SRC, SRC_LEN, tokens, other_weights))) == tokens
  np.testing.assert_array_equal(guided['agrees'], want & mask)


def test_seed_variance_by_hand():
  base = np.array([[[0.5, 0.5, 0.0]], [[1.0, 0.0, 0.0]]])  # B=2, T=1, S=3
  seed1 = np.array([[[0.5, 0.5, 0.0]], [[0.0, 1.0, 0.0]]])
  seed2 = np.array([[[0.0, 1.0, 0.0]], [[0.5, 0.5, 0.0]]])
  seed3 = np.array([[[0.5, 0.5, 0.0]], [[0.0, 0.0, 1.0]]])
  weights = np.stack([base, seed1, seed2, seed3])
  logits = np.zeros((4, 2, 1, 2))
  logits[1, 0, 0] = [np.log(3.0), 0.0]  # seed 1 gives (3/4, 1/4) against the base's (1/2, 1/2): TVD 1/4
  got = wiegreffe_pinter.seed_variance(weights, np.array([[True], [True]]), logits)
  # JSD(1/2 1/2, 0 1) = 1/2 [1/2 ln(1/2 / 1/4) + 1/2 ln(1/2 / 3/4)] + 1/2 ln(1 / 3/4); disjoint point masses: ln 2.
  half_vs_point = 0.5 * (0.5 * np.log(2.0) + 0.5 * np.log(2 / 3)) + 0.5 * np.log(4 / 3)
  assert got['jsd_median'][0, 0] == pytest.approx(0.0, abs=1e-7)  # median of (0, half_vs_point, 0)
  assert got['jsd_median'][1, 0] == pytest.approx(np.log(2.0))  # median of (ln 2, half_vs_point, ln 2)
  assert half_vs_point < np.log(2.0)
  np.testing.assert_allclose(got['max_attention'], [[0.5], [1.0]])
  np.testing.assert_allclose(got['tvd_mean'], [[0.25 / 3], [0.0]], atol=1e-7)


class _Pieces:
  """A tokenizer's vocabulary as id_to_piece reads it."""

  def __init__(self, pieces, kind):
    self.pieces, self.kind, self.vocab_size = pieces, kind, len(pieces)

  def id_to_piece(self, i):
    return self.pieces[i]


def test_moradi_function_tokens_are_their_classes():
  # Their function_words.txt: '</s>', punctuation and clitics, then words; a whole vocabulary entry is looked up.
  spm = ['<pad>', '<s>', '</s>', '<unk>', '▁de', '▁casa', 's', '▁,', '.', '▁la', 'la', '▁De', '¿', '▁']
  words = frozenset({'de', 'la'})
  listed, marks = moradi.function_token_ids(_Pieces(spm, 'sentencepiece'), words)
  assert listed | marks == {2, 4, 7, 8, 9, 11, 12}  # EOS, ▁de, ▁, (punctuation), ., ▁la, ▁De, ¿; not la (continued)
  assert listed == {4, 9, 11} and marks == {2, 7, 8, 12}
  plain = ['<pad>', '<s>', '</s>', '<unk>', 'de', 'casa', '!', 'La', '--']
  assert frozenset().union(*moradi.function_token_ids(_Pieces(plain, 'word'), words)) == {2, 4, 6, 7, 8}
  assert moradi.function_token_ids(_Pieces(plain, 'word'), frozenset({'und'}))[0] == frozenset()
