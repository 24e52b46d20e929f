"""TFDS catalogue datasets by name, read as data sources from TFDS's own mock data (no
network, no TensorFlow)."""

import numpy as np
import pytest
import tensorflow_datasets as tfds

from attnmt.data import batches, catalogue, get_data_config, prepare, raw_texts


def _cfg(name, data_dir):
  cfg = get_data_config()
  cfg.name, cfg.data_dir, cfg.vocab_size, cfg.batch_size = name, str(data_dir), 40, 8
  return cfg


def test_ted_hrlr_through_the_pipeline(tmp_path):
  cfg = _cfg('ted_hrlr_translate/pt_to_en', tmp_path)
  with tfds.testing.mock_data(num_examples=20, policy=tfds.testing.MockPolicy.USE_CODE):
    prepared = prepare(cfg)
  assert (prepared.source_lang, prepared.target_lang) == ('pt', 'en')
  assert {s: d['pairs'] for s, d in prepared.stats['splits'].items()} == {'train': 20, 'validation': 20, 'test': 20}
  batch_list = list(batches(prepared, 'train', cfg, num_epochs=1))
  assert sum(len(b['index']) for b in batch_list) == 20
  sources, targets = raw_texts(prepared, 'train')
  first = batch_list[0]
  i, n = first['index'][0], first['src_len'][0]
  assert prepared.src_tokenizer.decode(first['src'][0]) == ' '.join(sources[i].split())
  assert first['src'][0, n - 1] == 2


def test_wmt14_is_registered_and_readable_without_tensorflow(tmp_path):
  assert catalogue.is_catalogue_name('wmt14_translate/de-en')
  cfg = _cfg('wmt14_translate/de-en', tmp_path)
  cfg.source_lang, cfg.target_lang = 'en', 'de'  # reversed direction
  with tfds.testing.mock_data(num_examples=12, policy=tfds.testing.MockPolicy.USE_CODE):
    prepared = prepare(cfg)
  assert (prepared.source_lang, prepared.target_lang) == ('en', 'de')
  assert prepared.stats['splits']['test']['pairs'] == 12
  batch = next(batches(prepared, 'test', cfg))
  assert batch['src'].dtype == np.int32


def test_missing_language_is_a_clear_error(tmp_path):
  cfg = _cfg('ted_hrlr_translate/pt_to_en', tmp_path)
  cfg.source_lang, cfg.target_lang = 'pt', 'fr'
  with tfds.testing.mock_data(num_examples=5, policy=tfds.testing.MockPolicy.USE_CODE):
    with pytest.raises(ValueError, match="has no language 'fr'; it has pt, en"):
      prepare(cfg)
