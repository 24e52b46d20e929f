"""Greedy and beam search: agreement, scores equal to recomputed log-probabilities, attention history."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnmt.model import decoding, toy
from attnmt.training import train_step
from attnmt.model.config import ModelConfig
from attnmt.model.seq2seq import BOS, EOS, PAD, Seq2Seq

# A model trained briefly on the reverse task: uncertain enough that beams and lengths genuinely differ
# (random weights give degenerate outputs: every hypothesis ends at once or never).
CFG = ModelConfig(
  dropout=0.0,
  source_vocab_size=14,
  target_vocab_size=14,
  embed_size=16,
  encoder_hidden_size=16,
  decoder_hidden_size=32,
  score='additive(size=16)',
  query_timing='bahdanau(deep_output_size=16)',
)
_BATCH = toy.reverse_batch(np.random.default_rng(9), 4, 10, np.ones(8) / 8, held_out=True)
SRC, SRC_LEN = jnp.asarray(_BATCH['src']), jnp.asarray(_BATCH['src_len'])
pytestmark = pytest.mark.xdist_group('decoding_params')  # one worker trains the module's parameters


@pytest.fixture(scope='module')
def params():
  opt = train_step.make_optimizer(3e-3)
  state = train_step.init_train_state(CFG, opt, 0)
  step = jax.jit(functools.partial(train_step.train_step, CFG, opt))
  rng = np.random.default_rng(0)
  for _ in range(120):
    state, _ = step(state, toy.reverse_batch(rng, 32, 10, np.ones(8) / 8))
  return state.params


_apply = jax.jit(Seq2Seq(CFG).apply)  # compiled once per output width, not run operation by operation


def teacher_forced(params, src, src_len, tokens_BxT):
  """Log-probabilities and attention of given output sequences, by one teacher-forced pass."""
  tgt_in = jnp.concatenate([jnp.full((tokens_BxT.shape[0], 1), BOS), tokens_BxT[:, :-1]], 1)
  logits, weights = _apply({'params': params}, src, src_len, tgt_in)
  logp = jnp.take_along_axis(jax.nn.log_softmax(logits), tokens_BxT[..., None], -1)[..., 0]
  return np.asarray(logp), np.asarray(weights)


def test_greedy_matches_teacher_forcing_and_stops_at_eos(params):
  out = decoding.greedy(CFG, params, SRC, SRC_LEN, max_len=12)
  tokens, lengths = np.asarray(out.tokens), np.asarray(out.lengths)
  logp, weights = teacher_forced(params, SRC, SRC_LEN, out.tokens)
  for b in range(len(lengths)):
    n = lengths[b]
    if n < 10:
      assert tokens[b, n - 1] == EOS and EOS not in tokens[b, : n - 1]
    assert np.all(tokens[b, n:] == PAD)
    np.testing.assert_allclose(out.scores[b], logp[b, :n].sum(), rtol=1e-5)
    np.testing.assert_allclose(out.weights[b, :n], weights[b, :n], rtol=1e-5, atol=1e-6)
    assert np.all(np.asarray(out.weights[b, n:]) == 0.0)


def test_beam_of_one_equals_greedy(params):
  g = decoding.greedy(CFG, params, SRC, SRC_LEN, max_len=12)
  b = decoding.beam_search(CFG, params, SRC, SRC_LEN, beam_size=1, max_len=12, alpha=0.0)
  np.testing.assert_array_equal(b.tokens[:, 0], g.tokens)
  np.testing.assert_array_equal(b.lengths[:, 0], g.lengths)
  np.testing.assert_allclose(b.scores[:, 0], g.scores, rtol=1e-5)
  np.testing.assert_allclose(b.weights[:, 0], g.weights, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize('alpha', [0.0, 0.6, 1.0])
def test_beam_scores_equal_recomputed_log_probabilities(params, alpha):
  """Every returned hypothesis: score = sum log p / lp(len), best first, attention = teacher-forced."""
  out = decoding.beam_search(CFG, params, SRC, SRC_LEN, beam_size=4, max_len=12, alpha=alpha)
  scores = np.asarray(out.scores)
  assert np.all(np.diff(scores, axis=1) <= 1e-6)  # best first, non-increasing
  for k in range(4):
    tokens = out.tokens[:, k]
    logp, weights = teacher_forced(params, SRC, SRC_LEN, tokens)
    for b in range(SRC.shape[0]):
      n = int(out.lengths[b, k])
      assert int(tokens[b, n - 1]) == EOS and n < 12
      want = logp[b, :n].sum() / decoding.length_penalty(n, alpha)
      np.testing.assert_allclose(scores[b, k], want, rtol=1e-5, atol=1e-5)
      # The attention history survived the reordering of beams: it is the attention of this sequence.
      np.testing.assert_allclose(out.weights[b, k, :n], weights[b, :n], rtol=1e-4, atol=1e-5)
      assert np.all(np.asarray(out.weights[b, k, n:]) == 0.0)


def test_beam_search_finds_at_least_greedy_score(params):
  g = decoding.greedy(CFG, params, SRC, SRC_LEN, max_len=12)
  b = decoding.beam_search(CFG, params, SRC, SRC_LEN, beam_size=5, max_len=12, alpha=0.0)
  assert np.all(np.asarray(b.scores[:, 0]) >= np.asarray(g.scores) - 1e-5)
  # On this model the search matters: for some sentence the best beam is not the greedy output.
  assert np.any(np.asarray(b.tokens[:, 0]) != np.asarray(g.tokens))


def test_beam_prefix_scores_never_increase(params):
  """Along the best hypothesis, the running log-probability only falls as tokens are added."""
  b = decoding.beam_search(CFG, params, SRC, SRC_LEN, beam_size=3, max_len=12, alpha=0.0)
  logp, _ = teacher_forced(params, SRC, SRC_LEN, b.tokens[:, 0])
  running = np.cumsum(logp, axis=1)
  assert np.all(np.diff(running, axis=1) <= 0.0)


def test_hypotheses_within_a_sentence_are_distinct(params):
  b = decoding.beam_search(CFG, params, SRC, SRC_LEN, beam_size=4, max_len=12, alpha=0.6)
  for row in np.asarray(b.tokens):
    assert len({tuple(r) for r in row}) == len(row)


def test_decoding_stops_before_max_len_when_all_ended(params):
  """The while loop ends once every hypothesis has ended: lengths below max_len, PAD after."""
  g = decoding.greedy(CFG, params, SRC, SRC_LEN, max_len=40)
  assert np.all(np.asarray(g.lengths) < 40)


def test_nan_logits_end_the_hypothesis_instead_of_emitting_an_id_outside_the_vocabulary(params):
  """NaN parameters give NaN logits, whose arg-max is no token: greedy emitted the id V (an IndexError in the
  detokeniser later). Every decoder now ends such a row with EOS."""
  poisoned = jax.tree.map(lambda x: x * jnp.nan, params)
  g = decoding.greedy(CFG, poisoned, SRC, SRC_LEN, max_len=12)
  b = decoding.beam_search(CFG, poisoned, SRC, SRC_LEN, beam_size=3, max_len=12)
  for tokens in (np.asarray(g.tokens), np.asarray(b.tokens)):
    assert tokens.min() >= 0 and tokens.max() < CFG.target_vocab_size
  np.testing.assert_array_equal(np.asarray(g.tokens)[:, 0], EOS)
  np.testing.assert_array_equal(np.asarray(b.tokens)[:, 0, 0], EOS)
  np.testing.assert_array_equal(np.asarray(g.lengths), 1)
  logits = jnp.array([[0.5, 2.0, 1.0, jnp.nan, 0.1], [0.5, 2.0, 1.0, 3.0, 0.1]])
  np.testing.assert_array_equal(decoding.finite_or_eos(logits)[1], logits[1])  # finite rows are untouched


def test_forced_attention_equals_the_attention_beam_search_kept(params):
  """translate --show_attention with a beam recomputes the best hypothesis's attention by forced decoding
  instead of carrying K reordered histories: the same matrix."""
  b = decoding.beam_search(CFG, params, SRC, SRC_LEN, beam_size=3, max_len=12, keep_attention=True)
  for row in range(SRC.shape[0]):
    n = int(b.lengths[row, 0])
    forced = decoding.forced_attention(
      CFG, params, SRC[row : row + 1], SRC_LEN[row : row + 1], b.tokens[row : row + 1, 0, :n]
    )
    np.testing.assert_allclose(forced[0], b.weights[row, 0, :n], rtol=1e-5, atol=1e-6)


class _IdsAsText:
  """A detokeniser that writes the ids themselves, so a test can read the tokens back from the text."""

  def decode(self, ids):
    return ' '.join(map(str, ids))


def test_translate_with_n_best_returns_every_finished_hypothesis_best_first(params):
  """evaluation.translate(n_best=True), the one beam-and-unpack the analysis and the report use: each
  sentence's hypotheses are the beam's rows in order, token for token and score for score, without the
  rows the beam never finished; the best is the SplitTranslation itself."""
  from attnmt.training import evaluation

  batch = {'src': np.asarray(SRC), 'src_len': np.asarray(SRC_LEN), 'index': np.array([3, -1, 0, 1])}
  trans = evaluation.translate(CFG, params, [batch], _IdsAsText(), beam_size=4, alpha=0.6, factor=0.2, n_best=True)
  assert [t.index for t in trans] == [0, 1, 3]  # sorted by index; the row marked -1 pads the batch
  max_len = evaluation.decode_length(SRC.shape[1], 0.2)
  b = decoding.beam_search(CFG, params, SRC, SRC_LEN, beam_size=4, max_len=max_len, alpha=0.6)
  tokens, lengths, scores = np.asarray(b.tokens), np.asarray(b.lengths), np.asarray(b.scores)
  for t, row in zip(trans, [2, 3, 0]):
    finished = [j for j in range(4) if j == 0 or scores[row, j] > decoding.NEG_INF / 2]
    expected = [[' '.join(map(str, tokens[row, j, : lengths[row, j]])), float(scores[row, j])] for j in finished]
    assert t.hypotheses == expected
    assert [t.text, t.score] == expected[0]
    assert [s for _, s in t.hypotheses] == sorted((s for _, s in t.hypotheses), reverse=True)
  with pytest.raises(ValueError, match='n_best needs beam search'):
    evaluation.translate(CFG, params, [batch], _IdsAsText(), beam_size=0, n_best=True)
