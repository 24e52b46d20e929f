"""The trainer keeps the traced step of a variant for the process: the same model and train section train again
without tracing it, to the same parameters bit for bit."""

import sys

import jax
import numpy as np
import pytest

from attnmt.training import checkpoints, trainer
from experiments.configs import tiny


def _params(workdir):
  return jax.tree.leaves(checkpoints.restore_params(str(workdir), 'latest')[0])


@pytest.mark.slow
def test_the_same_variant_trains_again_on_its_cached_step(tmp_path):
  config = tiny.get_config()
  config.data.data_dir = str(tmp_path / 'data')
  config.train.seeds = '0'
  config.train.num_steps = config.train.checkpoint_every = 2
  config.train.eval_every = 0
  trainer._seed_functions.cache_clear()
  trainer.train_and_evaluate(config, str(tmp_path / 'a'))
  trainer.train_and_evaluate(config, str(tmp_path / 'b'))
  info = trainer._seed_functions.cache_info()
  assert (info.hits, info.misses) == (1, 1)
  for a, b in zip(_params(tmp_path / 'a'), _params(tmp_path / 'b')):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.slow
def test_runs_given_one_corpora_dict_prepare_their_corpus_once(tmp_path, monkeypatch):
  """A sweep's runs in one process pass one `corpora` dict (data.prepare_once): the corpus is prepared for the
  first run only, and a run on the shared corpus trains to the parameters of a run that prepared its own."""
  config = tiny.get_config()
  config.data.data_dir = str(tmp_path / 'data')
  config.train.seeds = '0'
  config.train.num_steps = config.train.checkpoint_every = 2
  config.train.eval_every = 0
  trainer.train_and_evaluate(config, str(tmp_path / 'own'))  # builds the corpus files; prepares its own
  module = sys.modules['attnmt.data.prepare']
  calls, prepare = [], module.prepare
  monkeypatch.setattr(module, 'prepare', lambda cfg: calls.append(cfg.name) or prepare(cfg))
  corpora = {}
  trainer.train_and_evaluate(config, str(tmp_path / 'a'), corpora)
  trainer.train_and_evaluate(config, str(tmp_path / 'b'), corpora)
  assert calls == [config.data.name] and len(corpora) == 1
  for own, shared in zip(_params(tmp_path / 'own'), _params(tmp_path / 'b')):
    np.testing.assert_array_equal(np.asarray(own), np.asarray(shared))
