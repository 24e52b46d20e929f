"""The digits-to-German task: gold alignments by hand, determinism, batches."""

import re

import numpy as np
import pytest

from attnmt.data import batches, batching, get_data_config, numbers_task, pharaoh, pipeline, prepare


@pytest.mark.parametrize(
  'digits, target, alignment',
  [
    ('42', 'zwei und vierzig', '0-2 1-0'),  # units first: the links cross
    ('21', 'ein und zwanzig', '0-2 1-0'),
    ('17', 'siebzehn', '0-0 1-0'),  # a teen expresses both digits
    ('20', 'zwanzig', '0-0'),  # the unspoken 0 is unaligned
    ('0', 'null', '0-0'),
    ('7', 'sieben', '0-0'),
    ('105', 'ein hundert fünf', '0-0 0-1 2-2'),
    ('342', 'drei hundert zwei und vierzig', '0-0 0-1 1-4 2-2'),
  ],
)
def test_single_numbers(digits, target, alignment):
  source = ' '.join(digits)
  assert numbers_task.translate([digits]) == (source, target, alignment)


def test_sentence_of_numbers_aligns_separators():
  source, target, alignment = numbers_task.translate(['42', '3', '17'])
  assert source == '4 2 , 3 , 1 7'
  assert target == 'zwei und vierzig , drei , siebzehn'
  assert alignment == '0-2 1-0 2-3 3-4 4-5 5-6 6-6'
  assert sorted(pharaoh.parse_links('0-2 1-0')) == [(0, 2), (1, 0)]


def _cfg(tmp_path, seed=0, tokenizer='word'):
  cfg = get_data_config()
  cfg.name = 'synthetic_numbers'
  cfg.data_dir = str(tmp_path)
  cfg.synthetic_size, cfg.synthetic_eval_size, cfg.seed = 300, 30, seed
  cfg.tokenizer, cfg.vocab_size = tokenizer, 60
  cfg.batch_size = 16
  return cfg


@pytest.fixture(scope='module')
def prepared(tmp_path_factory):
  return prepare(_cfg(tmp_path_factory.mktemp('numbers'), tokenizer='sentencepiece'))


def test_deterministic_by_seed(prepared, tmp_path):
  again = prepare(_cfg(tmp_path / 'again', tokenizer='sentencepiece'))
  other = prepare(_cfg(tmp_path / 'other', seed=1, tokenizer='sentencepiece'))
  train = prepared.corpus.splits['train']
  assert again.corpus.splits['train'].source == train.source
  assert other.corpus.splits['train'].source != train.source
  assert len(train.source) == 300 and len(prepared.corpus.splits['test'].source) == 30
  seen = set(train.source)
  assert not seen & set(prepared.corpus.splits['test'].source)


def test_batch_alignment_follows_the_gold_words(prepared):
  batch = next(batches(prepared, 'validation', get_data_config()))
  raw = prepared.corpus.splits['validation']
  for row in range(len(batch['index'])):
    i = batch['index'][row]
    src_pieces = [prepared.src_tokenizer.encode(w) for w in raw.source[i].split()]
    tgt_pieces = [prepared.tgt_tokenizer.encode(w) for w in raw.target[i].split()]
    src_word = [w for w, p in enumerate(src_pieces) for _ in p]
    tgt_word = [w for w, p in enumerate(tgt_pieces) for _ in p]
    links = pharaoh.parse_links(raw.alignment[i])
    expected = np.zeros_like(batch['alignment'][row])
    for t, tw in enumerate(tgt_word):
      for s, sw in enumerate(src_word):
        expected[t, s] = (sw, tw) in links
    np.testing.assert_array_equal(batch['alignment'][row], expected)
    assert batch['src_len'][row] == len(src_word) + 1
    assert batch['tgt_len'][row] == len(tgt_word) + 1


def test_word_tokenizer_gold_alignment_of_a_two_digit_number(tmp_path):
  prepared = prepare(_cfg(tmp_path))
  raw = prepared.corpus.splits['train']
  i = next(k for k, s in enumerate(raw.source) if re.match(r'[2-9] [1-9]( ,|$)', s))
  assert raw.target[i].split()[1] == 'und'
  batch = pipeline.build_batch(prepared.tokenized['train'], np.array([i]), batching.BatchOptions())
  # "4 2" -> "zwei und vierzig": target 0 <- source 1, target 2 <- source 0, "und" none.
  assert batch['alignment'][0, 0, 1] == 1 and batch['alignment'][0, 0].sum() == 1
  assert batch['alignment'][0, 1].sum() == 0
  assert batch['alignment'][0, 2, 0] == 1 and batch['alignment'][0, 2].sum() == 1
