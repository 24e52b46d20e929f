"""Tokenisers: fixed reserved ids, round trips, save/load, the word-level option."""

import pytest

from attnmt.data import tokenizers
from attnmt.data.tokenizers import BOS_ID, EOS_ID, PAD_ID, UNK_ID

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
