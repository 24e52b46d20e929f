"""evaluation.translate_seeds: every seed's translations, decoded seed after seed (the CPU's way) or for every
seed in one vmapped program (an accelerator's way); both give each seed what `translate` gives it alone."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnmt.model.config import ModelConfig
from attnmt.training import evaluation, train_step
from tests.small_model import SMALL


class _Ids:
  """A target tokenizer stand-in: ids as text."""

  def decode(self, ids):
    return ' '.join(map(str, ids))


def _batch(rows, width, empty_rows=0, first_index=0):
  """A batch of `rows` random sources of lengths 2..width, then `empty_rows` padding rows (index -1)."""
  rng = np.random.default_rng(width + rows)
  lengths = rng.integers(2, width + 1, size=rows)
  src = np.zeros((rows + empty_rows, width), np.int32)
  for i, n in enumerate(lengths):
    src[i, :n] = rng.integers(4, SMALL['source_vocab_size'], size=n)
  src_len = np.concatenate([lengths, np.zeros(empty_rows, int)]).astype(np.int32)
  index = np.concatenate([np.arange(first_index, first_index + rows), -np.ones(empty_rows, int)])
  return {'src': src, 'src_len': src_len, 'index': index}


def _stacked_params(cfg, seeds):
  opt = train_step.make_optimizer(1e-3)
  return jax.tree.map(lambda *x: jnp.stack(x), *(train_step.init_train_state(cfg, opt, s).params for s in seeds))


@pytest.mark.parametrize('beam_size', [0, 3])
@pytest.mark.slow
def test_every_seed_in_one_program_equals_each_seed_alone(beam_size):
  cfg = ModelConfig(**SMALL)
  params = _stacked_params(cfg, [0, 1, 2])
  batches = [_batch(5, 8, empty_rows=1), _batch(2, 12, first_index=5)]
  kw = dict(keep_attention=True, n_best=bool(beam_size))
  together = evaluation.translate_seeds(cfg, params, 3, batches, _Ids(), beam_size, together=True, **kw)
  in_turn = evaluation.translate_seeds(cfg, params, 3, batches, _Ids(), beam_size, together=False, **kw)
  assert [len(t) for t in together] == [7, 7, 7] == [len(t) for t in in_turn]  # padding rows give none
  for k in range(3):
    alone = evaluation.translate(cfg, evaluation.seed_params(params, k), batches, _Ids(), beam_size, **kw)
    assert [x.index for x in alone] == list(range(7))
    for a, b, c in zip(together[k], in_turn[k], alone):
      assert a.index == b.index == c.index and a.ids == b.ids == c.ids and a.text == c.text
      np.testing.assert_allclose(a.score, c.score, rtol=1e-5, atol=1e-5)
      assert b.score == c.score  # seed after seed is translate itself
      np.testing.assert_allclose(a.attention, c.attention, rtol=1e-5, atol=1e-6)
      assert a.attention.shape == (len(c.ids), int(batches[0 if c.index < 5 else 1]['src_len'][c.index % 5]))
      if beam_size:
        assert [h[0] for h in a.hypotheses] == [h[0] for h in c.hypotheses] and len(c.hypotheses) >= 1
        np.testing.assert_allclose([h[1] for h in a.hypotheses], [h[1] for h in c.hypotheses], rtol=1e-5, atol=1e-5)
      else:
        assert a.hypotheses is None and c.hypotheses is None
  assert [x.ids for x in together[0]] != [x.ids for x in together[1]]  # the seeds differ, so the test can fail


def test_seeds_go_together_only_on_an_accelerator_with_one_device(monkeypatch):
  assert not evaluation.seeds_together(5)  # this CPU: seed after seed
  monkeypatch.setattr(jax, 'default_backend', lambda: 'gpu')
  assert evaluation.seeds_together(5) and not evaluation.seeds_together(1)
  mesh = jax.sharding.Mesh(np.array(jax.devices()[:1]), ('data',))
  assert evaluation.seeds_together(5, mesh)

  class TwoDevices:
    size = 2

  assert not evaluation.seeds_together(5, TwoDevices())


def test_n_best_needs_a_beam():
  cfg = ModelConfig(**SMALL)
  with pytest.raises(ValueError, match='n_best needs beam search'):
    evaluation.translate_seeds(cfg, _stacked_params(cfg, [0]), 1, [], _Ids(), 0, n_best=True)
