"""The `data` section of an attnmt config: which corpus, how to tokenise and batch it. Every setting is one
row of DATA (default, meaning, accepted values); validate_data checks a section against it and the
combinations it needs.

Use: `config.data = get_data_config()`, override with `--config.data.name=tsv_pairs`.
"""

import ml_collections

from attnmt import schema
from attnmt.errors import ConfigError
from attnmt.schema import Setting

DATA = (
  # Corpus.
  Setting(
    'name',
    'bible_en_es',
    "'bible_en_es', 'tsv_pairs', 'synthetic_numbers', or a TFDS catalogue name such as 'ted_hrlr_translate/pt_to_en'.",
  ),
  Setting('data_dir', './data_cache', 'Builds in <data_dir>/tfds, vocabularies in <data_dir>/vocab.'),
  Setting('source_lang', '', "Source feature key ('' = dataset default: en, digits, pt, ...)."),
  Setting('target_lang', '', "Target feature key ('' = dataset default: es, de, en, ...)."),
  Setting('books', '', "bible_en_es: comma-separated books ('Ruth,Jonah,John'); '' = whole Bible."),
  Setting('sword_path', '', "bible_en_es: SWORD library ('' = $SWORD_PATH or /usr/share/sword)."),
  Setting('tsv_path', '', "tsv_pairs: the file, lines 'source<TAB>target[<TAB>attribution]'."),
  Setting('skip_bad_lines', False, 'tsv_pairs: skip (and count) malformed lines instead of failing.'),
  Setting(
    'alignment_path',
    '',
    "tsv_pairs: gold word alignments, a Pharaoh file ('0-0 1-2 ...': 0-based source-target word indices), line k for the pair on line k of tsv_path.",
  ),
  Setting('validation_fraction', 0.05, 'tsv_pairs: share of source sentences for validation.', lo='>0', hi='<1'),
  Setting('test_fraction', 0.05, 'tsv_pairs: share of source sentences for test.', lo='>0', hi='<1'),
  Setting('synthetic_size', 20000, 'synthetic_numbers: training sentences.', lo=1),
  Setting('synthetic_eval_size', 1000, 'synthetic_numbers: validation and test sentences, each.', lo=1),
  Setting('synthetic_min_numbers', 1, 'synthetic_numbers: fewest numbers in a sentence.', lo=1),
  Setting('synthetic_max_numbers', 4, 'synthetic_numbers: most numbers in a sentence.', lo=1),
  Setting('synthetic_max_digits', 3, 'synthetic_numbers: most digits in a number (1 to 3).', lo=1, hi=3),
  Setting('seed', 0, 'synthetic_numbers: generation seed.'),
  # Tokenisation (trained on the training split, one vocabulary per side).
  Setting(
    'tokenizer',
    'sentencepiece',
    "'sentencepiece' or 'word' (lower case, no punctuation).",
    choices=('sentencepiece', 'word'),
  ),
  Setting('sp_model_type', 'unigram', "sentencepiece: 'unigram' or 'bpe'.", choices=('unigram', 'bpe')),
  Setting('vocab_size', 8000, 'Per side, including the 4 reserved ids (0 PAD 1 BOS 2 EOS 3 UNK).', lo=5),
  # Length filtering (lengths count the EOS; 0 = no limit).
  Setting('max_source_length', 64, 'Training examples with longer sources are removed.', lo=0),
  Setting('max_target_length', 64, 'Training examples with longer targets are removed.', lo=0),
  Setting('eval_max_source_length', 0, 'The same for validation/test (0: keep every sentence).', lo=0),
  Setting('eval_max_target_length', 0, 'The same for validation/test targets.', lo=0),
  # Batching.
  Setting('batch_size', 64, 'Sentences per batch (the last batch of an epoch may be smaller).', lo=1),
  Setting('batch_tokens', 0, 'If > 0: batches hold up to this many padded tokens instead.', lo=0),
  Setting('bucket', True, 'Group sentences of similar length to cut padding.'),
  Setting('bucket_window', 100, 'Bucketing sorts windows of this many batches.', lo=1),
  Setting('pad_to_multiple', 8, "Pad each batch's length up to a multiple of this.", lo=1),
  Setting('eval_pad_to_multiple', 0, 'Validation/test batches: this multiple instead (0 = pad_to_multiple).', lo=0),
  Setting(
    'equal_widths',
    False,
    'Pad source and target to one width, the larger (unless one is fixed): fewer shapes to compile, more padding.',
  ),
  Setting(
    'train_shapes',
    0,
    'If > 0: training batches take at most this many widths (each compiles the step), chosen from the run\'s '
    'own batches for the fewest padded positions (0: every multiple of pad_to_multiple its own).',
    lo=0,
    resumable=True,
  ),
  Setting('fixed_source_length', 0, 'If > 0: every batch has exactly this source width.', lo=0),
  Setting('fixed_target_length', 0, 'If > 0: every batch has exactly this target width.', lo=0),
  Setting('drop_remainder', False, "Drop an epoch's last, smaller batch (sentence batches only)."),
  Setting('num_epochs', 0, 'Training split: passes over the data (0 = repeat forever).', lo=0),
  Setting('shuffle_seed', 0, 'Order of the training batches (epoch e uses seed (shuffle_seed, e)).', lo=0),
)


def get_data_config() -> ml_collections.ConfigDict:
  """Defaults: the embedded Bible, sentencepiece 8000 per side, bucketed batches of 64."""
  return schema.defaults(DATA)


def validate_data(d) -> None:
  """Every value of a data section (DATA), and the combinations that cannot work. The section is complete: a
  config starts from get_data_config, and a stored run's is filled by checkpoints.load_config."""
  schema.check('data', DATA, d)
  if not d.name:
    raise ConfigError("data.name is empty; name a dataset, e.g. 'bible_en_es', 'tsv_pairs' or 'synthetic_numbers'")
  if d.name == 'tsv_pairs' and not d.tsv_path:
    raise ConfigError('data.name=tsv_pairs needs data.tsv_path, the sentence-pair file')
  if d.alignment_path and d.name != 'tsv_pairs':
    raise ConfigError(
      f'data.alignment_path is read only beside a tsv_pairs corpus, and data.name={d.name}; set '
      "data.name=tsv_pairs with data.tsv_path, or data.alignment_path=''"
    )
  if d.validation_fraction + d.test_fraction >= 1:
    raise ConfigError(
      f'data.validation_fraction + data.test_fraction must be < 1 (the rest trains), got '
      f"{d.validation_fraction} + {d.test_fraction}"
    )
  if d.synthetic_max_numbers < d.synthetic_min_numbers:
    raise ConfigError(
      f'data.synthetic_max_numbers ({d.synthetic_max_numbers}) must be >= '
      f'data.synthetic_min_numbers ({d.synthetic_min_numbers})'
    )
