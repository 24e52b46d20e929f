"""TFDS builder `bible_en_es`: verse-aligned English-Spanish pairs from two Debian SWORD
modules (World English Bible, Reina-Valera 1909), written as array_record, no TensorFlow.

The whole Bible is the config `full`; `bible_config(books)` builds a subset (tests use a
few books). Counts of dropped verses, per reason, are in `builder.info.metadata`.
"""

import dataclasses
import hashlib
from typing import Optional

import tensorflow_datasets as tfds

from attnmt.data import bible_pairs, sword

VALIDATION_FRACTION = 0.05  # of chapters
TEST_FRACTION = 0.05  # of chapters


@dataclasses.dataclass(eq=False)
class BibleConfig(tfds.core.BuilderConfig):
  """Which books to read (OSIS or English names; empty: all)."""

  books: tuple[str, ...] = ()


FULL = BibleConfig(name='full', description='All books in both modules.')


def bible_config(books=()):
  """The config for `books`: 'full' (a name TFDS knows) for all of them, else a custom
  config named by a hash of the list, so that each subset gets its own directory."""
  books = tuple(b.strip() for b in books if b.strip())
  if not books:
    return FULL.name
  key = ','.join(books)
  name = 'books_' + hashlib.sha256(key.encode()).hexdigest()[:10]
  return BibleConfig(name=name, description=f'Books: {key}', books=books)


class BibleEnEs(tfds.core.GeneratorBasedBuilder):
  """English (WEB) - Spanish (RV1909) verse pairs; splits disjoint by chapter."""

  VERSION = tfds.core.Version('1.0.0')  # Bump when cleaning, alignment or splits change.
  RELEASE_NOTES = {'1.0.0': 'Markup cleaning, length realignment, chapter splits.'}
  BUILDER_CONFIGS = [FULL]

  def __init__(self, *, sword_path: Optional[str] = None, **kwargs):
    """`sword_path`: the SWORD library (None: $SWORD_PATH or /usr/share/sword)."""
    self._sword_path = sword_path
    super().__init__(**kwargs)

  def _info(self) -> tfds.core.DatasetInfo:
    return self.dataset_info_from_configs(
      features=tfds.features.FeaturesDict(
        {
          'en': tfds.features.Text(),
          'es': tfds.features.Text(),
          'ref': tfds.features.Text(),  # OSIS reference, e.g. 'John.3.16'
        }
      ),
      supervised_keys=('en', 'es'),
      homepage='https://ebible.org/',
      metadata=tfds.core.MetadataDict(),
    )

  def _split_generators(self, dl_manager):
    del dl_manager  # Nothing to download: the modules are Debian packages.
    config = self.builder_config
    english = sword.open_bible(sword.ENGLISH_MODULE, self._sword_path)
    spanish = sword.open_bible(sword.SPANISH_MODULE, self._sword_path)
    books = sword.resolve_books(english, config.books)
    by_split, dropped = bible_pairs.build_pairs(
      sword.read_verses(english, books), sword.read_verses(spanish, books), VALIDATION_FRACTION, TEST_FRACTION
    )
    self.info.metadata['dropped'] = dropped
    self.info.metadata['books'] = books
    return {split: self._generate_examples(pairs) for split, pairs in by_split.items()}

  def _generate_examples(self, pairs):
    for pair in pairs:
      yield pair['ref'], pair
