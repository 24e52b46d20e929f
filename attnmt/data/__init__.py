"""attnmt data: corpora as TFDS builders (no TensorFlow), tokenisers, batches.

cfg = get_data_config()            # or config.data of a full attnmt config
prepared = prepare(cfg)            # builds once into cfg.data_dir, trains vocabularies
for batch in batches(prepared, 'train', cfg): ...
sources, targets = raw_texts(prepared, 'test')   # batch['index'] points into these
save_tokenizers(prepared, checkpoint_dir)       # load_tokenizers(checkpoint_dir) later
"""

from attnmt.data.config import get_data_config
from attnmt.data.prepare import (
  PreparedData,
  batch_options,
  batches,
  check_batches,
  corpus_key,
  length_limits,
  load_tokenizers,
  prepare,
  prepare_once,
  raw_texts,
  removed_by_length,
  save_tokenizers,
)
from attnmt.data.tokenizers import BOS_ID, EOS_ID, PAD_ID, UNK_ID, load_tokenizer, train_tokenizer

__all__ = [
  'get_data_config',
  'PreparedData',
  'batch_options',
  'batches',
  'check_batches',
  'corpus_key',
  'length_limits',
  'load_tokenizers',
  'prepare',
  'prepare_once',
  'raw_texts',
  'removed_by_length',
  'save_tokenizers',
  'BOS_ID',
  'EOS_ID',
  'PAD_ID',
  'UNK_ID',
  'load_tokenizer',
  'train_tokenizer',
]
