"""Tokenisers with the project's fixed reserved ids: 0 PAD, 1 BOS, 2 EOS, 3 UNK.

Two kinds, same interface: sentencepiece (unigram or BPE) and word level with the classic
preprocessing (lower case, punctuation removed). Both are trained on the training split
only and saved to a directory (`tokenizer.json` plus the model), so that a checkpoint can
always find its vocabulary: `load_tokenizer(dir)` restores either kind.
"""

import collections
import io
import json
import os
import re
import unicodedata
from typing import Iterable, Sequence

import sentencepiece as spm

PAD_ID, BOS_ID, EOS_ID, UNK_ID = 0, 1, 2, 3
RESERVED = ('<pad>', '<s>', '</s>', '<unk>')
_META = 'tokenizer.json'


def _visible(ids: Iterable[int]) -> list[int]:
  """The ids to decode: up to the first EOS, without PAD and BOS."""
  out = []
  for i in ids:
    i = int(i)
    if i == EOS_ID:
      break
    if i not in (PAD_ID, BOS_ID):
      out.append(i)
  return out


def _train_sentencepiece(sentences, model, vocab_size, model_type, character_coverage) -> None:
  """SentencePieceTrainer.train, deterministic (one thread, no sampling), into `model`."""
  spm.SentencePieceTrainer.train(
    sentence_iterator=iter(sentences),
    model_writer=model,
    vocab_size=vocab_size,
    model_type=model_type,
    character_coverage=character_coverage,
    pad_id=PAD_ID,
    bos_id=BOS_ID,
    eos_id=EOS_ID,
    unk_id=UNK_ID,
    pad_piece=RESERVED[0],
    bos_piece=RESERVED[1],
    eos_piece=RESERVED[2],
    unk_piece=RESERVED[3],
    hard_vocab_limit=False,
    num_threads=1,
    input_sentence_size=0,
    shuffle_input_sentence=False,
    minloglevel=2,
  )


class SentencePieceTokenizer:
  """A sentencepiece model; `encode` adds no BOS/EOS, `decode` stops at EOS."""

  kind = 'sentencepiece'

  def __init__(self, model_proto: bytes):
    self._proto = model_proto
    self._sp = spm.SentencePieceProcessor(model_proto=model_proto)

  @classmethod
  def train(
    cls, sentences: Sequence[str], vocab_size: int, model_type: str = 'unigram', character_coverage: float = 1.0
  ) -> 'SentencePieceTokenizer':
    """Trains on `sentences`. The size is an upper bound (small corpora get fewer
    pieces); one thread and no sampling keep the result deterministic."""
    model = io.BytesIO()
    try:
      _train_sentencepiece(sentences, model, vocab_size, model_type, character_coverage)
    except RuntimeError as e:
      text = str(e).strip().splitlines()[-1]
      text = text.split('] ', 1)[-1].split('. Increase')[0]  # sentencepiece's own words
      needed = re.search(r'(\d+) vs (\d+)', text)
      if not sentences:
        raise ValueError('no training sentences to build a sentencepiece vocabulary from') from None
      hint = (
        f'raise data.vocab_size to at least {needed.group(2)}'
        if needed
        else 'raise data.vocab_size, or use data.tokenizer=word'
      )
      raise ValueError(
        f'sentencepiece cannot train a vocabulary of data.vocab_size={vocab_size} on this corpus ({text}); {hint}'
      ) from None
    return cls(model.getvalue())

  @property
  def vocab_size(self) -> int:
    return self._sp.get_piece_size()

  def encode(self, text: str) -> list[int]:
    return self._sp.encode(text)

  def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
    return self._sp.encode(list(texts))

  def decode(self, ids: Iterable[int]) -> str:
    return self._sp.decode(_visible(ids))

  def id_to_piece(self, i: int) -> str:
    return self._sp.id_to_piece(int(i))

  def save(self, directory: str) -> None:
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, 'spm.model'), 'wb') as f:
      f.write(self._proto)
    _write_meta(directory, {'kind': self.kind, 'model': 'spm.model'})

  @classmethod
  def load(cls, directory: str) -> 'SentencePieceTokenizer':
    with open(os.path.join(directory, 'spm.model'), 'rb') as f:
      return cls(f.read())


_APOSTROPHES = re.compile(r"['’‘`]")


def classic_preprocess(text: str) -> str:
  """Lower case; apostrophes deleted ("don't" -> "dont"), other punctuation a space."""
  text = _APOSTROPHES.sub('', unicodedata.normalize('NFC', text).lower())
  return ' '.join(''.join(' ' if unicodedata.category(ch).startswith('P') else ch for ch in text).split())


class WordTokenizer:
  """Whitespace words after classic_preprocess; the most frequent words get ids."""

  kind = 'word'

  def __init__(self, words: Sequence[str]):
    self._words = list(RESERVED) + [w for w in words if w not in RESERVED]
    self._ids = {w: i for i, w in enumerate(self._words)}

  @classmethod
  def train(cls, sentences: Iterable[str], vocab_size: int) -> 'WordTokenizer':
    """Keeps the `vocab_size - 4` most frequent words, ties broken alphabetically."""
    counts = collections.Counter(w for s in sentences for w in classic_preprocess(s).split())
    ranked = sorted(counts, key=lambda w: (-counts[w], w))
    return cls(ranked[: max(0, vocab_size - len(RESERVED))])

  @property
  def vocab_size(self) -> int:
    return len(self._words)

  def encode(self, text: str) -> list[int]:
    return [self._ids.get(w, UNK_ID) for w in classic_preprocess(text).split()]

  def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
    return [self.encode(t) for t in texts]

  def decode(self, ids: Iterable[int]) -> str:
    return ' '.join(self._words[i] for i in _visible(ids))

  def id_to_piece(self, i: int) -> str:
    return self._words[int(i)]

  def save(self, directory: str) -> None:
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, 'vocab.txt'), 'w', encoding='utf-8') as f:
      f.write('\n'.join(self._words) + '\n')
    _write_meta(directory, {'kind': self.kind, 'model': 'vocab.txt'})

  @classmethod
  def load(cls, directory: str) -> 'WordTokenizer':
    with open(os.path.join(directory, 'vocab.txt'), encoding='utf-8') as f:
      return cls(f.read().split('\n')[:-1])


_KINDS = {'sentencepiece': SentencePieceTokenizer, 'word': WordTokenizer}


def _write_meta(directory: str, meta: dict) -> None:
  """Written last and whole (temporary file, then rename): its presence says the tokenizer is complete, so a
  process stopped while saving leaves a directory that is trained again, never half read."""
  meta = {**meta, 'pad_id': PAD_ID, 'bos_id': BOS_ID, 'eos_id': EOS_ID, 'unk_id': UNK_ID}
  path = os.path.join(directory, _META)
  with open(f'{path}.tmp-{os.getpid()}', 'w') as f:
    json.dump(meta, f, indent=1)
  os.replace(f'{path}.tmp-{os.getpid()}', path)


def load_tokenizer(directory: str):
  """Restores a tokenizer saved with `save(directory)`, whichever kind it is."""
  path = os.path.join(directory, _META)
  if not os.path.exists(path):
    raise FileNotFoundError(f'no tokenizer in {directory} (missing {_META})')
  with open(path) as f:
    kind = json.load(f)['kind']
  return _KINDS[kind].load(directory)


def train_tokenizer(kind: str, sentences: Sequence[str], vocab_size: int, sp_model_type: str = 'unigram'):
  """A new tokenizer of `kind` ('sentencepiece' or 'word') trained on `sentences`."""
  if kind == 'sentencepiece':
    return SentencePieceTokenizer.train(sentences, vocab_size, sp_model_type)
  if kind == 'word':
    return WordTokenizer.train(sentences, vocab_size)
  raise ValueError(f'unknown tokenizer {kind!r}; valid: {", ".join(_KINDS)}')


def token_labels(tokenizer, ids: Sequence[int]) -> list[str]:
  """The pieces of `ids` as heatmaps and tables label them, EOS as '</s>' (one rule for every caller)."""
  return ['</s>' if i == EOS_ID else tokenizer.id_to_piece(i) for i in ids]
