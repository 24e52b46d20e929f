"""Tokenisers: fixed reserved ids, round trips, save/load, the word-level option."""

import importlib

import pytest

from attnmt.data import get_data_config, sources, tokenizers
from attnmt.data.tokenizers import BOS_ID, EOS_ID, PAD_ID, UNK_ID

prepare_lib = importlib.import_module('attnmt.data.prepare')  # the module: attnmt.data.prepare is its function

CORPUS = [
  'In the beginning, God created the heavens and the earth.',
  'The earth was formless and empty. Darkness was on the surface of the deep.',
  'God said, “Let there be light,” and there was light.',
  'God saw the light, and saw that it was good.',
] * 20


@pytest.mark.parametrize('model_type', ['unigram', 'bpe'])
def test_sentencepiece_reserved_ids_and_round_trip(model_type, tmp_path):
  tok = tokenizers.train_tokenizer('sentencepiece', CORPUS, 120, model_type)
  assert (PAD_ID, BOS_ID, EOS_ID, UNK_ID) == (0, 1, 2, 3)
  assert [tok.id_to_piece(i) for i in range(4)] == ['<pad>', '<s>', '</s>', '<unk>']
  text = CORPUS[2]
  ids = tok.encode(text)
  assert BOS_ID not in ids and EOS_ID not in ids and PAD_ID not in ids
  assert tok.decode(ids) == text
  assert tok.decode([BOS_ID] + ids + [EOS_ID] + ids + [PAD_ID]) == text
  assert tok.decode([PAD_ID, BOS_ID] + ids) == text
  tok.save(str(tmp_path / 'tok'))
  loaded = tokenizers.load_tokenizer(str(tmp_path / 'tok'))
  assert loaded.encode(text) == ids and loaded.vocab_size == tok.vocab_size
  assert 4 < tok.vocab_size <= 120


def test_sentencepiece_training_is_deterministic():
  a = tokenizers.train_tokenizer('sentencepiece', CORPUS, 100)
  b = tokenizers.train_tokenizer('sentencepiece', CORPUS, 100)
  assert [a.id_to_piece(i) for i in range(a.vocab_size)] == [b.id_to_piece(i) for i in range(b.vocab_size)]


SPANISH = [
  'En el principio creó Dios los cielos y la tierra.',
  'Y la tierra estaba desordenada y vacía, y las tinieblas estaban sobre la haz del abismo.',
  'Y dijo Dios: Sea la luz: y fué la luz.',
  'Y vió Dios que la luz era buena.',
] * 20


def test_prepare_trains_both_sides_on_threads_as_each_alone(tmp_path):
  """prepare's tokenizers (the two sides trained on two threads) equal each side trained alone, and a second
  call loads them from the directory instead of training."""
  train = sources.RawSplit(source=CORPUS, target=SPANISH, ids=[str(i) for i in range(len(CORPUS))])
  corpus = sources.RawCorpus('toy/en-es', 'en', 'es', {'train': train}, {})
  cfg = get_data_config()
  cfg.tokenizer, cfg.vocab_size, cfg.sp_model_type = 'sentencepiece', 100, 'unigram'
  src, tgt = prepare_lib._tokenizers(cfg, corpus, str(tmp_path / 'vocab'))
  for tok, side in ((src, CORPUS), (tgt, SPANISH)):
    alone = tokenizers.train_tokenizer('sentencepiece', side, 100)
    assert [tok.id_to_piece(i) for i in range(tok.vocab_size)] == [
      alone.id_to_piece(i) for i in range(alone.vocab_size)
    ]
  assert src.encode(CORPUS[0]) != tgt.encode(CORPUS[0])  # each side its own model
  (tmp_path / 'vocab' / 'source' / 'marker').write_text('')  # loading keeps the folder as it is
  again = prepare_lib._tokenizers(cfg, corpus, str(tmp_path / 'vocab'))
  assert [t.encode(SPANISH[1]) for t in again] == [src.encode(SPANISH[1]), tgt.encode(SPANISH[1])]
  assert (tmp_path / 'vocab' / 'source' / 'marker').exists()


def test_word_tokenizer_classic_preprocessing(tmp_path):
  assert tokenizers.classic_preprocess('“Don’t,” said GOD; ¿Quién? Baal-peor.') == ('dont said god quién baal peor')
  tok = tokenizers.train_tokenizer('word', CORPUS, 10)
  assert tok.vocab_size == 10
  # By frequency (the 140, and 80, was 80, god 60, light 60), ties alphabetical.
  assert [tok.id_to_piece(i) for i in range(4, 8)] == ['the', 'and', 'was', 'god']
  ids = tok.encode('The deep was GOOD!')
  assert tok.decode(ids + [EOS_ID, 5]) == 'the <unk> was <unk>'
  assert ids[1] == UNK_ID
  tok.save(str(tmp_path / 'w'))
  assert tokenizers.load_tokenizer(str(tmp_path / 'w')).encode('the god') == tok.encode('the god')
  # The labels every heatmap and table shows: the pieces, EOS as '</s>' (an unknown word stays '<unk>').
  assert tokenizers.token_labels(tok, ids + [EOS_ID]) == ['the', '<unk>', 'was', '<unk>', '</s>']


def test_unknown_tokenizer_and_missing_directory(tmp_path):
  with pytest.raises(ValueError, match='valid: sentencepiece, word'):
    tokenizers.train_tokenizer('chars', CORPUS, 10)
  with pytest.raises(FileNotFoundError, match='no tokenizer'):
    tokenizers.load_tokenizer(str(tmp_path))
