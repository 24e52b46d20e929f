"""The embedded Bible corpus, built from the real Debian SWORD modules (never skipped:
without them these tests fail and say how to install them)."""

import pytest

from attnmt.data import (
  bible_pairs,
  get_data_config,
  load_tokenizers,
  osis_clean,
  prepare,
  save_tokenizers,
  sword,
  verse_align,
)

BOOKS = 'Ruth,Jonah,John'  # 85 + 48 + 879 verses in both modules


@pytest.fixture(scope='module')
def bibles():
  return (sword.open_bible(sword.ENGLISH_MODULE), sword.open_bible(sword.SPANISH_MODULE))


@pytest.fixture(scope='module')
def prepared(tmp_path_factory):
  cfg = get_data_config()
  cfg.data_dir = str(tmp_path_factory.mktemp('bible'))
  cfg.books = BOOKS
  cfg.vocab_size = 1000
  return prepare(cfg)


def _verse(bible, book, chapter, verse, spanish=False):
  raw = sword.read_verses(bible, [book])[(book, chapter, verse)]
  return bible_pairs.clean_spanish(raw) if spanish else osis_clean.clean_osis(raw)


def test_missing_modules_give_the_install_command(tmp_path):
  cfg = get_data_config()
  cfg.data_dir, cfg.sword_path, cfg.books = str(tmp_path / 'data'), str(tmp_path), 'Ruth'
  with pytest.raises(sword.SwordModulesMissingError) as error:
    prepare(cfg)
  message = str(error.value)
  assert '\n' not in message
  assert message.endswith('run: sudo apt-get install -y sword-text-web sword-text-sparv')


def test_john_3_16_is_clean_in_both_languages(prepared):
  ids = {ref: (split, i) for split, raw in prepared.corpus.splits.items() for i, ref in enumerate(raw.ids)}
  split, i = ids['John.3.16']
  raw = prepared.corpus.splits[split]
  # The English module has a footnote between "born" and "Son" (pysword: "bornSon").
  assert raw.source[i] == (
    'For God so loved the world, that he gave his only born Son, that '
    'whoever believes in him should not perish, but have eternal life.'
  )
  assert raw.target[i] == (
    'Porque de tal manera amó Dios al mundo, que ha dado á su Hijo '
    'unigénito, para que todo aquel que en él cree, no se pierda, mas '
    'tenga vida eterna.'
  )


def test_markup_cleaning_on_known_verses(bibles):
  english, spanish = bibles
  # Footnote between two words: a space, not "Godcreated".
  assert _verse(english, 'Gen', 1, 1) == ('In the beginning, God created the heavens and the earth.')
  # Canonical psalm title kept (the Spanish verse 1 has it too), line markup gone.
  assert _verse(english, 'Ps', 3, 1) == (
    'A Psalm by David, when he fled from Absalom his son. Yahweh, how my adversaries have '
    'increased! Many are those who rise up against me.'
  )
  # Speaker heading of the Song of Songs dropped.
  assert _verse(english, 'Song', 1, 2) == (
    'Let him kiss me with the kisses of his mouth; for your love is better than wine.'
  )
  # The glossary appended after the end of Revelation is not part of the last verse.
  assert _verse(english, 'Rev', 22, 21) == ('The grace of the Lord Jesus Christ be with all the saints. Amen.')
  # Added words touching their neighbours: a space, or an enclitic joined to its verb.
  assert 'que es Ramat del mediodía' in _verse(spanish, 'Josh', 19, 8, spanish=True)
  assert 'y díjole Dios: Pide' in _verse(spanish, '1Kgs', 3, 5, spanish=True)
  assert 'Josué los circuncidó' in _verse(spanish, 'Josh', 5, 4, spanish=True)
  # The epistle's subscription is not scripture and has no English counterpart.
  assert _verse(spanish, 'Rom', 16, 27, spanish=True).endswith('para siempre. Amén.')


def test_length_alignment_finds_a_merged_verse():
  c, s2 = 1.0, 2.0
  src = [100, 40, 60, 120, 80]
  tgt = [101, 99, 121, 79]  # verses 2 and 3 merged into one
  beads = verse_align.align_lengths(src, tgt, c, s2)
  assert beads == [([0], [0]), ([1, 2], [1]), ([3], [2]), ([4], [3])]


def test_splits_are_disjoint_by_verse_and_chapter(prepared):
  splits = prepared.corpus.splits
  verses = {s: set(raw.ids) for s, raw in splits.items()}
  chapters = {s: {ref.rsplit('.', 1)[0] for ref in refs} for s, refs in verses.items()}
  for a, b in (('train', 'validation'), ('train', 'test'), ('validation', 'test')):
    assert not verses[a] & verses[b]
    assert not chapters[a] & chapters[b]
  assert all(len(raw.ids) == len(set(raw.ids)) for raw in splits.values())


def test_pair_counts_and_drop_report(prepared):
  counts = {s: len(raw.source) for s, raw in prepared.corpus.splits.items()}
  assert 960 <= sum(counts.values()) <= 1012, counts
  assert counts['train'] > 700 and counts['validation'] > 0 and counts['test'] > 0
  dropped = prepared.stats['build_report']['dropped']
  # Jonah 1:17 is empty in the Spanish module, which numbers Jonah 2 from it.
  assert dropped['empty_in_one_module'] >= 1
  assert dropped['versification_mismatch'] >= 9
  assert all(s and t for raw in prepared.corpus.splits.values() for s, t in zip(raw.source, raw.target))


def test_tokenizer_round_trip_and_bucketing(prepared):
  for text in prepared.corpus.splits['train'].source[:50]:
    assert prepared.src_tokenizer.decode(prepared.src_tokenizer.encode(text)) == text
  for text in prepared.corpus.splits['train'].target[:50]:
    assert prepared.tgt_tokenizer.decode(prepared.tgt_tokenizer.encode(text)) == text
  padding = prepared.stats['train_padding']
  assert padding['bucketed'] < padding['unbucketed']


def test_second_prepare_reuses_the_build_and_tokenizers_travel(prepared, tmp_path_factory):
  cfg = get_data_config()
  cfg.data_dir = str(prepared.vocab_dir).split('/vocab/')[0]
  cfg.books = BOOKS
  cfg.vocab_size = 1000
  again = prepare(cfg)
  assert again.corpus.splits['test'].ids == prepared.corpus.splits['test'].ids
  assert again.src_tokenizer.encode('In the beginning') == prepared.src_tokenizer.encode('In the beginning')
  checkpoint = str(tmp_path_factory.mktemp('checkpoint'))
  save_tokenizers(prepared, checkpoint)
  src, tgt = load_tokenizers(checkpoint)
  text = prepared.corpus.splits['test'].target[0]
  assert tgt.encode(text) == prepared.tgt_tokenizer.encode(text)
  assert src.vocab_size == prepared.src_tokenizer.vocab_size
