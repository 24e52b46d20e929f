"""A researcher's own score, defined here and selected by import path without touching attnmt, through the
checks every built-in score passes: a NumPy reference, teacher forcing = step-by-step decoding, zero weight
and gradient on padding, greedy and beam search, FLOPs, a training run. (docs/extending.md, "A new attention score".)"""

import os
import subprocess
import sys
import textwrap

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnmt.model import attention, decoding, normalizers, scores, windows
from attnmt.training import trainer
from attnmt.errors import CheckpointError, ConfigError
from attnmt.model.config import ModelConfig
from attnmt.model.seq2seq import BOS, Seq2Seq, init_params
from benchmarks import flops
from experiments.configs import tiny
from small_model import SMALL, sized, steps_equal_teacher_forcing


class Cosine(scores.Score):
  """e_i = g cos(W q, h_i): scaled cosine similarity between the projected query and each annotation."""

  def params(self, param):
    return {
      'W': param('W', (self.cfg.decoder_hidden_size, self.cfg.annotation_size)),
      'g': param('g', (), nn.initializers.constant(5.0)),
    }

  def keys(self, p, annotations_SxH):  # unit annotations, once per sentence
    return annotations_SxH * jax.lax.rsqrt(jnp.sum(annotations_SxH**2, -1, keepdims=True) + 1e-6)

  def query(self, p, query_BxQ):  # W q, once per step for the whole batch
    return query_BxQ @ p['W']

  def scores(self, p, half_H, keys_SxH):  # g (k_i . Wq) / |Wq|
    return p['g'] * (keys_SxH @ half_H) * jax.lax.rsqrt(jnp.sum(half_H**2) + 1e-6)

  def flops(self, src_len):
    q, h = self.cfg.decoder_hidden_size, self.cfg.annotation_size
    return 0, scores.matmul_flops(1, h, q) + scores.matmul_flops(src_len, 1, h)


NAME = f'{__name__}:Cosine'


def np_cosine(p, q, h):
  wq = p['W'].T @ q
  return np.array([p['g'] * (hi @ wq) / (np.linalg.norm(hi) * np.linalg.norm(wq)) for hi in h])


def config(**over):
  return ModelConfig.from_dict(sized({**SMALL, 'score': NAME, **over}))


def test_selected_by_import_path_and_bad_paths_name_the_fix():
  assert isinstance(scores.build(config()), Cosine)
  with pytest.raises(ConfigError, match=r"cannot import module 'no_such_pkg.scores' \(No module named 'no_such_pkg'\)"):
    config(score='no_such_pkg.scores:Cosine')
  with pytest.raises(ConfigError, match="'Sine' in .* is not a attnmt.model.scores.Score subclass"):
    config(score=f'{__name__}:Sine')
  with pytest.raises(ConfigError, match=r"unknown model.score 'cosine'; valid: none, additive.*or an import path"):
    config(score='cosine')


def test_scores_match_numpy():
  cfg = config()
  p = attention.AttentionParams(cfg).apply({'params': attention.AttentionParams(cfg).init(jax.random.key(0))['params']})
  rng = np.random.default_rng(0)
  q_BxQ = rng.normal(size=(3, 12)).astype(np.float32)
  h_BxSxH = rng.normal(size=(3, 7, 12)).astype(np.float32)
  score = scores.build(cfg)
  got = jax.jit(jax.vmap(lambda q, h: score.scores(p, score.query(p, q[None])[0], score.keys(p, h))))(q_BxQ, h_BxSxH)
  pn = jax.tree.map(np.asarray, p)
  want = np.stack([np_cosine(pn, q, h) for q, h in zip(q_BxQ, h_BxSxH)])
  np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize('timing,window', [('bahdanau', 'global'), ('luong', 'local_p'), ('luong', 'local_m')])
def test_teacher_forced_logits_equal_step_by_step_and_padding_gets_nothing(timing, window):
  cfg = config(query_timing=timing, window=window)
  params = {'params': init_params(cfg, jax.random.key(0))}
  model = Seq2Seq(cfg)
  rng = np.random.default_rng(1)
  src = jnp.asarray(rng.integers(4, 20, size=(3, 7)))
  lengths = jnp.array([7, 3, 5])
  tgt = jnp.asarray(rng.integers(4, 23, size=(3, 6)))
  logits, weights, _ = steps_equal_teacher_forcing(model, params, src, lengths, tgt)
  for b, n in enumerate(np.asarray(lengths)):
    assert np.all(np.asarray(weights)[b, :, n:] == 0.0)

  # Source embeddings read only at padded positions get exactly zero gradient.
  padded_src = jnp.where(jnp.arange(7) < lengths[:, None], src, 3)  # token 3 occurs in padding only

  def loss(embed):
    p = {'params': {**params['params'], 'encoder': {**params['params']['encoder'], 'embed': embed}}}
    return jnp.sum(model.apply(p, padded_src, lengths, tgt)[0] ** 2)

  g = np.asarray(jax.jit(jax.grad(loss))(params['params']['encoder']['embed']))
  assert np.all(g[3] == 0.0) and np.abs(g).sum() > 0


def test_weight_gradients_through_the_deferred_scan_equal_plain_autodiff():
  """W reaches the query only as `q @ p['W']`: inside the scan its gradient is the deferred product."""
  cfg = config()
  params = init_params(cfg, jax.random.key(2))
  rng = np.random.default_rng(2)
  src, lengths = jnp.asarray(rng.integers(4, 20, size=(2, 6))), jnp.array([6, 4])
  tgt = jnp.asarray(rng.integers(4, 23, size=(2, 5)))
  loss = lambda p: jnp.sum(Seq2Seq(cfg).apply({'params': p}, src, lengths, tgt)[0] ** 2)
  g = jax.jit(jax.grad(loss))(params)['decoder']['attention']

  def step_by_step(p):  # the same logits from decode steps, which never defer
    model, v = Seq2Seq(cfg), {'params': p}
    memory, state = model.apply(v, src, lengths, method=Seq2Seq.encode)
    total = 0.0
    for t in range(tgt.shape[1]):
      state, logits, _ = model.apply(v, memory, state, tgt[:, t], method=Seq2Seq.decode_step)
      total += jnp.sum(logits**2)
    return total

  want = jax.jit(jax.grad(step_by_step))(params)['decoder']['attention']
  for k in ('W', 'g'):
    np.testing.assert_allclose(g[k], want[k], rtol=2e-4, atol=1e-5)
  assert np.abs(np.asarray(g['W'])).sum() > 0


def test_greedy_and_beam_search():
  cfg = config()
  params = init_params(cfg, jax.random.key(3))
  rng = np.random.default_rng(3)
  src, lengths = jnp.asarray(rng.integers(4, 20, size=(3, 6))), jnp.array([6, 4, 5])
  g = decoding.greedy(cfg, params, src, lengths, max_len=8)
  b1 = decoding.beam_search(cfg, params, src, lengths, beam_size=1, max_len=8, alpha=0.0)
  np.testing.assert_array_equal(b1.tokens[:, 0], g.tokens)
  np.testing.assert_allclose(b1.scores[:, 0], g.scores, rtol=1e-5)
  b3 = decoding.beam_search(cfg, params, src, lengths, beam_size=3, max_len=8, alpha=0.0)
  tokens = b3.tokens[:, 0]
  tgt_in = jnp.concatenate([jnp.full((3, 1), BOS), tokens[:, :-1]], 1)
  logp = jax.nn.log_softmax(jax.jit(Seq2Seq(cfg).apply)({'params': params}, src, lengths, tgt_in)[0])
  logp = np.asarray(jnp.take_along_axis(logp, tokens[..., None], -1)[..., 0])
  for row in range(3):
    n = int(b3.lengths[row, 0])
    np.testing.assert_allclose(b3.scores[row, 0], logp[row, :n].sum(), rtol=1e-5, atol=1e-5)
    assert np.all(np.asarray(b3.weights[row, 0, :, int(lengths[row]) :]) == 0.0)


def test_flops_come_from_the_definition():
  base = config()
  additive = ModelConfig.from_dict(sized({**SMALL, 'score': 'additive'}))
  step = flops.attention_step_flops(base, rows=4, src_len=7) - flops.attention_step_flops(
    ModelConfig.from_dict({**SMALL, 'score': 'none'}), rows=4, src_len=7
  )
  assert step == 4 * (2 * 12 * 12 + 2 * 7 * 12)  # W q and k_i . Wq per query
  assert flops.attention_step_flops(additive, 4, 7) != flops.attention_step_flops(base, 4, 7)

  class NoFlops(Cosine):
    flops = scores.Score.flops

  with pytest.raises(NotImplementedError, match='must define flops'):
    NoFlops(base).flops(7)


def test_trains_through_the_experiment_code(tmp_path):
  """A few steps of the real training loop: checkpoint, config.json with the import path, test BLEU."""
  cfg = tiny.get_config()
  cfg.data.data_dir = str(tmp_path / 'data')
  cfg.model.score = NAME
  cfg.train.num_steps = 4
  cfg.train.checkpoint_every = 4
  result = trainer.train_and_evaluate(cfg, str(tmp_path / 'run'))
  assert result['variant'].startswith(NAME) and np.isfinite(result['test_perplexity'][0])
  assert (tmp_path / 'run' / 'checkpoints' / '4').is_dir()


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PER_SENTENCE = textwrap.dedent("""
  import jax.numpy as jnp
  from attnmt.model import scores

  class PerSentence(scores.Score):  # one number per sentence: broadcast, it would make attention uniform
    def scores(self, p, half, keys_SxH):
      return jnp.sum(keys_SxH @ half[: keys_SxH.shape[1]])

    def flops(self, src_len):
      return 0, 0
""")


def test_a_score_returning_one_number_per_sentence_is_refused_through_train(tmp_path):
  """One line naming the class and the expected shape, status 2, before any data is prepared."""
  (tmp_path / 'per_sentence.py').write_text(PER_SENTENCE)
  res = subprocess.run(
    [
      sys.executable,
      '-m',
      'experiments.train',
      '--config=experiments/configs/tiny.py',
      f'--workdir={tmp_path / "run"}',
      f'--config.data.data_dir={tmp_path / "data"}',
      '--config.model.score=per_sentence:PerSentence',
    ],
    cwd=ROOT,
    env=dict(os.environ, JAX_PLATFORMS='cpu', PYTHONPATH=f'{ROOT}:{tmp_path}'),
    capture_output=True,
    text=True,
    timeout=300,
  )
  assert res.returncode == 2, res.stderr
  assert res.stderr.strip().splitlines() == [
    'error: score PerSentence returned shape () per query; expected (source_len,) = (3,) (one number where there '
    'should be one per source position)'
  ]
  assert not (tmp_path / 'data').exists() and not (tmp_path / 'run').exists()


class OnePerBatch(Cosine):
  def scores(self, p, half_H, keys_SxH):
    return super().scores(p, half_H, keys_SxH)[:1]  # (1,): one score per sentence


class IntegerScores(Cosine):
  def scores(self, p, half_H, keys_SxH):
    return jnp.argsort(super().scores(p, half_H, keys_SxH))


class FlatCentre(windows.Window):
  def centre(self, p, query_BxQ, length_B, t):
    return jnp.zeros((query_BxQ.shape[0], 1))

  def flops(self):
    return 0


class TransposedSoftmax(normalizers.Normalizer):
  def normalize(self, e_S, mask_S):
    return normalizers.masked_softmax(e_S, mask_S)[None]


@pytest.mark.parametrize(
  'over,message',
  [
    (
      dict(score=f'{__name__}:OnePerBatch'),
      r'^score OnePerBatch returned shape \(1,\) per query; expected \(source_len,\) = \(3,\)',
    ),
    (
      dict(score=f'{__name__}:IntegerScores'),
      r'^score IntegerScores returned dtype int32 per query; expected a floating-point',
    ),
    (
      dict(window=f'{__name__}:FlatCentre'),
      r'^window FlatCentre returned shape \(2, 1\) from centre\(\); expected \(batch,\) = \(2,\)',
    ),
    (
      dict(normalizer=f'{__name__}:TransposedSoftmax'),
      r'^normaliser TransposedSoftmax returned shape \(1, 3\) per query; expected \(source_len,\) = \(3,\)',
    ),
  ],
)
def test_user_outputs_are_checked_once_at_trace_time(over, message):
  cfg = config(**over)
  with pytest.raises(ConfigError, match=message):
    attention.check_user_code(cfg)
  params = init_params(config(), jax.random.key(0))  # the checks also guard every traced model, not only the probe
  if 'score' in over:
    src, lengths = jnp.ones((2, 5), jnp.int32), jnp.array([5, 3])
    with pytest.raises(ConfigError, match=message.replace('(3,)', '(5,)').replace('\\(3,\\)', '\\(5,\\)')):
      decoding.greedy(cfg, params, src, lengths, max_len=4)


def test_the_built_in_classes_pass_the_checks():
  for score in ('additive', 'dot', 'general', 'concat', 'location', 'none'):
    attention.check_user_code(ModelConfig.from_dict(sized({**SMALL, 'score': score, 'decoder_hidden_size': 12})))
  for window in ('local_m', 'local_p'):
    attention.check_user_code(ModelConfig.from_dict(sized({**SMALL, 'score': 'additive', 'window': window})))
  for normalizer in ('sparsemax', 'entmax15', 'monotonic'):
    attention.check_user_code(ModelConfig.from_dict(sized({**SMALL, 'score': 'additive', 'normalizer': normalizer})))


EDITED_SCORE = textwrap.dedent("""
  import jax.numpy as jnp
  from attnmt.model import scores

  class Dot(scores.Score):  # a projected dot product; the edit under test renames or reshapes {name}
    def params(self, param):
      return {{'{name}': param('{name}', (self.cfg.decoder_hidden_size, {width}))}}

    def keys(self, p, annotations_SxH):
      return annotations_SxH

    def query(self, p, query_BxQ):
      return query_BxQ @ p['{name}']

    def scores(self, p, half_H, keys_SxH):
      return keys_SxH[:, :{width}] @ half_H

    def flops(self, src_len):
      return 0, 0
""")


@pytest.fixture(scope='module')
def trained_user_run(tmp_path_factory):
  """A tiny run trained with a user's score module, which each test then edits (and restores after)."""
  root = tmp_path_factory.mktemp('edited')
  module = root / 'edited_user_score.py'

  def write(name='W', width='self.cfg.annotation_size'):
    module.write_text(EDITED_SCORE.format(name=name, width=width))
    sys.modules.pop('edited_user_score', None)
    for cached in (root / '__pycache__').glob('*'):
      cached.unlink()

  write()
  sys.path.insert(0, str(root))
  cfg = tiny.get_config()
  cfg.data.data_dir = str(root / 'data')
  cfg.model.score = 'edited_user_score:Dot'
  cfg.train.num_steps = 2
  cfg.train.checkpoint_every = 2
  cfg.train.eval_every = 0
  trainer.train_and_evaluate(cfg, str(root / 'run'))
  yield cfg, root / 'run', write
  write()
  sys.path.remove(str(root))


@pytest.mark.parametrize(
  'edit,difference',
  [
    (dict(name='W2'), 'the run has decoder/attention/W, which the code no longer declares'),
    (dict(width=6), 'the run holds decoder/attention/W as (32, 32), the code declares (32, 6)'),
  ],
)
@pytest.mark.slow
def test_a_loaded_run_whose_user_score_changed_names_that_code(trained_user_run, edit, difference):
  """attnmt.load / translate: one line naming the user's class and the fix, not Flax's ScopeParamNotFoundError."""
  from attnmt.analysis import inspection

  _, run, write = trained_user_run
  write(**edit)
  try:
    with pytest.raises(CheckpointError) as e:
      inspection.load_model(str(run))
  finally:
    write()
  assert str(e.value) == (
    f"user code model.score 'edited_user_score:Dot' no longer matches the parameters run {run} was trained with "
    f'({difference}); restore that code as it was when the run was trained, or train a new run with it'
  )
  assert inspection.load_model(str(run)).step == 2  # the code as trained loads as before


def test_a_resumed_run_whose_user_score_changed_names_that_code(trained_user_run):
  """Resuming blames the user's score, not 'another format than this attnmt trains', and moves nothing."""
  cfg, run, write = trained_user_run
  cfg = cfg.copy_and_resolve_references()
  cfg.train.num_steps = 4
  write(name='W2')
  try:
    with pytest.raises(CheckpointError) as e:
      trainer.train_and_evaluate(cfg, str(run))
  finally:
    write()
  assert str(e.value) == (
    f"checkpoint {run}/checkpoints/2 does not match user code model.score 'edited_user_score:Dot' (the run has "
    'params/decoder/attention/W, which the code no longer declares): that code changed since the run was trained; '
    'nothing was moved; restore that code as it was, or train a new run in another --workdir'
  )
  assert sorted(os.listdir(run / 'checkpoints')) == ['2'] and not (run / 'damaged').exists()


@pytest.mark.slow
def test_translate_with_a_changed_user_score_exits_2_with_one_line(trained_user_run):
  """experiments/translate.py: `error: <that line>` and status 2 instead of a Flax traceback."""
  _, run, write = trained_user_run
  write(name='W2')
  try:
    res = subprocess.run(
      [sys.executable, '-m', 'experiments.translate', f'--run={run}', '--beam_size=0'],
      cwd=ROOT,
      env=dict(os.environ, JAX_PLATFORMS='cpu', PYTHONPATH=f'{ROOT}:{run.parent}'),
      input='a b c\n',
      capture_output=True,
      text=True,
      timeout=300,
    )
  finally:
    write()
  assert res.returncode == 2, res.stderr
  assert res.stderr.strip().splitlines() == [
    f"error: user code model.score 'edited_user_score:Dot' no longer matches the parameters run {run} was trained "
    'with (the run has decoder/attention/W, which the code no longer declares); restore that code as it was when '
    'the run was trained, or train a new run with it'
  ]
