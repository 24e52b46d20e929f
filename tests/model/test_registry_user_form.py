"""A researcher's own decoder form, defined here and selected by import path without touching attnmt: Bahdanau
et al.'s maxout output layer (2015, Appendix A.2.2), through the checks the built-in forms pass: a NumPy
reference, teacher forcing = step-by-step decoding, greedy and beam search, FLOPs, a training run.
(docs/extending.md, "The three examples, run by a test": examples/components/maxout.py.)"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnmt.errors import ConfigError
from attnmt.model import decoding, forms
from attnmt.model.config import ModelConfig
from attnmt.model.registry import matmul_flops
from attnmt.model.seq2seq import BOS, Seq2Seq, init_params
from attnmt.training import trainer
from benchmarks import flops
from experiments.configs import tiny
from small_model import OPTIONS, SMALL, sized


class Maxout(forms.Bahdanau):
  """Bahdanau's deep output with maxout units: t = max over pairs of W_g [s_t ; c_t ; E y_{t-1}] + b_g."""

  def params(self, param):
    c, g = self.cfg, self.deep_output_size  # Bahdanau's option, which the subclass inherits
    return {
      'W_g': param('W_g', (c.decoder_hidden_size + c.annotation_size + c.embed_size, 2 * g)),
      'b_g': param('b_g', (2 * g,), jax.nn.initializers.zeros),
    }

  def hidden(self, p, out, emb_xE):
    pre = jnp.concatenate([out['s'], out['context'], emb_xE], -1) @ p['W_g'] + p['b_g']
    return jnp.max(pre.reshape(pre.shape[:-1] + (-1, 2)), axis=-1)

  def flops(self, rows):
    return 2 * super().flops(rows)


NAME = f'{__name__}:Maxout'


def config(**over):
  return ModelConfig.from_dict(sized({**SMALL, 'query_timing': NAME, **over}))


def test_selected_by_import_path_and_bad_paths_name_the_fix():
  assert isinstance(forms.build(config()), Maxout)
  assert config().query_timing == f'{NAME}(deep_output_size=7)'  # the option it inherits, written out
  assert forms.build(config(query_timing=f'{NAME}(deep_output_size=3)')).deep_output_size == 3
  with pytest.raises(ConfigError, match=r"model.query_timing 'no_such_pkg.forms:Maxout': cannot import module"):
    config(query_timing='no_such_pkg.forms:Maxout')
  with pytest.raises(ConfigError, match="'Minout' in .* is not a attnmt.model.forms.DecoderForm subclass"):
    config(query_timing=f'{__name__}:Minout')
  with pytest.raises(ConfigError, match=r"unknown model.query_timing 'maxout'; valid: bahdanau, luong, or an import"):
    config(query_timing='maxout')


def test_logits_match_numpy_and_equal_step_by_step():
  """The teacher-forced logits of the first step, from the parameters by NumPy: the maxout of the pairs of
  W_g [s_1 ; c_1 ; E BOS] + b_g, then W_out; and every step's logits from decode steps equal teacher forcing."""
  cfg = config()
  params = {'params': init_params(cfg, jax.random.key(0))}
  model = Seq2Seq(cfg)
  rng = np.random.default_rng(1)
  src, lengths = jnp.asarray(rng.integers(4, 20, size=(3, 7))), jnp.array([7, 3, 5])
  tgt = jnp.asarray(rng.integers(4, 23, size=(3, 6))).at[:, 0].set(BOS)
  logits, weights = jax.jit(model.apply)(params, src, lengths, tgt)
  memory, state = model.apply(params, src, lengths, method=Seq2Seq.encode)
  step = jax.jit(lambda m, s, y: model.apply(params, m, s, y, method=Seq2Seq.decode_step))
  p = jax.tree.map(np.asarray, params['params']['decoder'])
  for t in range(tgt.shape[1]):
    new_state, step_logits, step_weights = step(memory, state, tgt[:, t])
    np.testing.assert_allclose(step_logits, logits[:, t], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(step_weights, weights[:, t], rtol=1e-5, atol=1e-6)
    if t == 0:  # s_1 is the new top state, c_1 the context the weights give
      s1 = np.asarray(new_state.rnn[-1][0])
      c1 = np.einsum('bs,bsh->bh', np.asarray(step_weights), np.asarray(memory.annotations))
      pre = np.concatenate([s1, c1, p['embed'][np.full(3, BOS)]], -1) @ p['W_g'] + p['b_g']
      hidden = np.maximum(pre[:, 0::2], pre[:, 1::2])
      np.testing.assert_allclose(step_logits, hidden @ p['W_out'] + p['b_out'], rtol=1e-4, atol=1e-5)
    state = new_state
  assert p['W_out'].shape == (OPTIONS['query_timing']['deep_output_size'], SMALL['target_vocab_size'])


def test_greedy_and_beam_search_score_what_teacher_forcing_scores():
  """Greedy's and the beam's best hypotheses score the sum of their tokens' teacher-forced log-probabilities."""
  cfg = config()
  params = init_params(cfg, jax.random.key(3))
  rng = np.random.default_rng(3)
  src, lengths = jnp.asarray(rng.integers(4, 20, size=(3, 6))), jnp.array([6, 4, 5])
  g = decoding.greedy(cfg, params, src, lengths, max_len=8)
  b3 = decoding.beam_search(cfg, params, src, lengths, beam_size=3, max_len=8, alpha=0.0)
  apply = jax.jit(Seq2Seq(cfg).apply)  # one program for both searches' tokens
  for tokens, found, n_B in ((g.tokens, g.scores, g.lengths), (b3.tokens[:, 0], b3.scores[:, 0], b3.lengths[:, 0])):
    tgt_in = jnp.concatenate([jnp.full((3, 1), BOS), tokens[:, :-1]], 1)
    logp = jax.nn.log_softmax(apply({'params': params}, src, lengths, tgt_in)[0])
    logp = np.asarray(jnp.take_along_axis(logp, tokens[..., None], -1)[..., 0])
    for row in range(3):
      np.testing.assert_allclose(found[row], logp[row, : int(n_B[row])].sum(), rtol=1e-5, atol=1e-5)


def test_flops_come_from_the_definition():
  """The form's own products are counted from its flops(): twice Bahdanau's W_g product per step."""
  mine = config()
  base = ModelConfig.from_dict(sized({**SMALL, 'query_timing': 'bahdanau'}))
  c, g = SMALL, OPTIONS['query_timing']['deep_output_size']
  extra = matmul_flops(4 * 5, g, 12 + 2 * c['encoder_hidden_size'] + c['embed_size'])
  assert flops.decoder_flops(mine, rows=4, src_len=7, steps=5) - flops.decoder_flops(base, 4, 7, 5) == extra

  class NoFlops(forms.DecoderForm):
    pass

  with pytest.raises(NotImplementedError, match='must define flops'):
    NoFlops(base).flops(4)


class WrongWidth(forms.Bahdanau):
  def output_size(self):
    return self.deep_output_size + 1  # says one more than hidden() gives


class NegativeInput(forms.Bahdanau):
  def input_size(self):
    return -1


def test_a_form_whose_sizes_do_not_hold_is_refused_with_one_line():
  with pytest.raises(
    ConfigError, match=r'decoder form NegativeInput.input_size\(\) returned -1; expected an integer >= 0'
  ):
    config(query_timing=f'{__name__}:NegativeInput')
  cfg = config(query_timing=f'{__name__}:WrongWidth')
  with pytest.raises(
    ConfigError, match=r'decoder form WrongWidth returned shape \(2, 3, 7\) from hidden\(\); expected'
  ):
    init_params(cfg, jax.random.key(0), batch=2, tgt_len=3)


@pytest.mark.slow
def test_trains_through_the_experiment_code(tmp_path):
  """A few steps of the real training loop: checkpoint, the import path in the variant's name, test perplexity."""
  cfg = tiny.get_config()
  cfg.data.data_dir = str(tmp_path / 'data')
  cfg.model.query_timing = f'{NAME}(deep_output_size=16)'  # tiny's size
  cfg.train.num_steps = 4
  cfg.train.checkpoint_every = 4
  result = trainer.train_and_evaluate(cfg, str(tmp_path / 'run'))
  assert NAME in result['variant'] and np.isfinite(result['test_perplexity'][0])
  assert (tmp_path / 'run' / 'checkpoints' / '4').is_dir()


class ClashingOutput(forms.Bahdanau):
  def params(self, param):
    g = self.deep_output_size
    return {**super().params(param), 'W_out': param('W_out', (g, g))}


def test_a_form_parameter_named_like_the_decoders_is_refused_with_one_line(tmp_path):
  """A form's 'W_out' would be a 55-line Flax NameInUseError from inside setup: one line, when the config is
  built (before any data is prepared), naming the class, the name and the fix."""
  with pytest.raises(ConfigError) as e:
    config(query_timing=f'{__name__}:ClashingOutput')
  assert str(e.value) == (
    "decoder form ClashingOutput declares a parameter named 'W_out', a name the decoder uses for its own; rename it "
    '(the decoder uses embed, attention, layers, layer0, W_out, b_out, W_bridge, b_bridge)'
  )
  train = tiny.get_config()
  train.data.data_dir = str(tmp_path / 'data')
  train.model.query_timing = f'{__name__}:ClashingOutput'
  with pytest.raises(ConfigError, match="^decoder form ClashingOutput declares a parameter named 'W_out'"):
    trainer.train_and_evaluate(train, str(tmp_path / 'run'))
  assert not (tmp_path / 'data').exists() and not (tmp_path / 'run').exists()  # refused before the data
  cfg = config()
  own = set(init_params(cfg, jax.random.key(0))['decoder']) - set(Maxout(cfg).params(lambda n, *a, **k: 0))
  assert own == set(forms.decoder_names(cfg)) - {'layers'}  # the names refused are the decoder's own
