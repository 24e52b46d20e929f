"""The `data` section of an attnmt config: which corpus, how to tokenise and batch it.

Use: `config.data = get_data_config()`, override with `--config.data.name=tsv_pairs`.
"""

import ml_collections


def get_data_config() -> ml_collections.ConfigDict:
  """Defaults: the embedded Bible, sentencepiece 8000 per side, bucketed batches of 64."""
  c = ml_collections.ConfigDict()
  # Corpus.
  c.name = 'bible_en_es'  # 'bible_en_es', 'tsv_pairs', 'synthetic_numbers', or a TFDS
  #                         catalogue name such as 'ted_hrlr_translate/pt_to_en'.
  c.data_dir = './data_cache'  # Builds in <data_dir>/tfds, vocabularies in <data_dir>/vocab.
  c.source_lang = ''  # Source feature key ('' = dataset default: en, digits, pt, ...).
  c.target_lang = ''  # Target feature key ('' = dataset default: es, de, en, ...).
  c.books = ''  # bible_en_es: comma-separated books ('Ruth,Jonah,John'); '' = whole Bible.
  c.sword_path = ''  # bible_en_es: SWORD library ('' = $SWORD_PATH or /usr/share/sword).
  c.tsv_path = ''  # tsv_pairs: the file, lines 'source<TAB>target[<TAB>attribution]'.
  c.skip_bad_lines = False  # tsv_pairs: skip (and count) malformed lines instead of failing.
  c.alignment_path = ''  # tsv_pairs: gold word alignments, a Pharaoh file ('0-0 1-2 ...': 0-based
  #                        source-target word indices), line k for the pair on line k of tsv_path.
  c.validation_fraction = 0.05  # tsv_pairs: share of source sentences for validation.
  c.test_fraction = 0.05  # tsv_pairs: share of source sentences for test.
  c.synthetic_size = 20000  # synthetic_numbers: training sentences.
  c.synthetic_eval_size = 1000  # synthetic_numbers: validation and test sentences, each.
  c.synthetic_min_numbers = 1  # synthetic_numbers: fewest numbers in a sentence.
  c.synthetic_max_numbers = 4  # synthetic_numbers: most numbers in a sentence.
  c.synthetic_max_digits = 3  # synthetic_numbers: most digits in a number (1 to 3).
  c.seed = 0  # synthetic_numbers: generation seed.
  # Tokenisation (trained on the training split, one vocabulary per side).
  c.tokenizer = 'sentencepiece'  # 'sentencepiece' or 'word' (lower case, no punctuation).
  c.sp_model_type = 'unigram'  # sentencepiece: 'unigram' or 'bpe'.
  c.vocab_size = 8000  # Per side, including the 4 reserved ids (0 PAD 1 BOS 2 EOS 3 UNK).
  # Length filtering (lengths count the EOS; 0 = no limit).
  c.max_source_length = 64  # Training examples with longer sources are removed.
  c.max_target_length = 64  # Training examples with longer targets are removed.
  c.eval_max_source_length = 0  # The same for validation/test (0: keep every sentence).
  c.eval_max_target_length = 0
  # Batching.
  c.batch_size = 64  # Sentences per batch (the last batch of an epoch may be smaller).
  c.batch_tokens = 0  # If > 0: batches hold up to this many padded tokens instead.
  c.bucket = True  # Group sentences of similar length to cut padding.
  c.bucket_window = 100  # Bucketing sorts windows of this many batches.
  c.pad_to_multiple = 8  # Pad each batch's length up to a multiple of this.
  c.eval_pad_to_multiple = 0  # Validation/test batches: this multiple instead (0 = pad_to_multiple).
  c.fixed_source_length = 0  # If > 0: every batch has exactly this source width.
  c.fixed_target_length = 0  # If > 0: every batch has exactly this target width.
  c.drop_remainder = False  # Drop an epoch's last, smaller batch (sentence batches only).
  c.num_epochs = 0  # Training split: passes over the data (0 = repeat forever).
  c.shuffle_seed = 0  # Order of the training batches (epoch e uses seed (shuffle_seed, e)).
  return c
