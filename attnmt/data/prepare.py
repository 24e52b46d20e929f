"""The data entry point: `prepare(cfg)` once, then `batches(prepared, split, cfg)`.

`prepare` builds the TFDS dataset into `<data_dir>/tfds` (once; later calls read it),
trains the tokenisers on the training split or loads them from `<data_dir>/vocab/...`,
encodes every split, and gathers statistics.
"""

import concurrent.futures
import contextlib
import dataclasses
import fcntl
import json
import os
from typing import Optional

import numpy as np

from attnmt import progress
from attnmt.data import batching, pipeline, sources, stats as stats_lib, tokenizers


@dataclasses.dataclass
class PreparedData:
  """A corpus ready to batch: raw text, token ids, tokenisers, statistics."""

  corpus: sources.RawCorpus
  tokenized: dict[str, pipeline.TokenizedSplit]
  src_tokenizer: object
  tgt_tokenizer: object
  vocab_dir: str  # Holds source/ and target/ tokenizers: copy beside a checkpoint.
  stats: dict

  @property
  def source_lang(self) -> str:
    return self.corpus.source_lang

  @property
  def target_lang(self) -> str:
    return self.corpus.target_lang


def _vocab_dir(cfg, corpus: sources.RawCorpus) -> str:
  kind = (
    f'sp_{cfg.sp_model_type}_{cfg.vocab_size}'
    if cfg.tokenizer == 'sentencepiece'
    else f'{cfg.tokenizer}_{cfg.vocab_size}'
  )
  return os.path.join(cfg.data_dir, 'vocab', corpus.dataset_id, kind)


def _tokenizers(cfg, corpus: sources.RawCorpus, directory: str):
  """Loads the tokenisers from `directory`, or trains them on the training split: the two sides on two threads
  (sentencepiece trains without Python's lock, so the two overlap)."""
  sides = {'source': corpus.splits['train'].source, 'target': corpus.splits['train'].target}

  def load_or_train(side: str):
    path = os.path.join(directory, side)
    if os.path.exists(os.path.join(path, 'tokenizer.json')):
      return tokenizers.load_tokenizer(path)
    tokenizer = tokenizers.train_tokenizer(cfg.tokenizer, sides[side], cfg.vocab_size, cfg.sp_model_type)
    tokenizer.save(path)
    return tokenizer

  with concurrent.futures.ThreadPoolExecutor(len(sides)) as pool:
    return tuple(pool.map(load_or_train, sides))


def prepare_once(cfg, corpora: Optional[dict]) -> 'PreparedData':
  """prepare(cfg), or the corpus prepared before for the same data config when `corpora` (data config as JSON ->
  PreparedData, kept by the caller) holds it: the runs of a sweep, and the runs an analysis reads, share one corpus
  (nothing in a PreparedData is changed by its users)."""
  if corpora is None:
    return prepare(cfg)
  key = corpus_key(cfg)
  if key not in corpora:
    corpora[key] = prepare(cfg)
  return corpora[key]


def corpus_key(cfg) -> str:
  """The key of a data config in prepare_once's `corpora`: every setting, as JSON."""
  return json.dumps(cfg.to_dict(), sort_keys=True)


def batch_options(cfg, split: str = 'train', widths: tuple = ()) -> batching.BatchOptions:
  """The BatchOptions that `cfg` (a data config) describes for `split`: validation and test
  batches pad to `eval_pad_to_multiple` when it is set (fewer widths, fewer compilations). `widths`: the
  only widths a batch may take (training with data.train_shapes; attnmt.training.shapes chooses them)."""
  pad = cfg.pad_to_multiple
  if split != 'train' and cfg.eval_pad_to_multiple:
    pad = cfg.eval_pad_to_multiple
  return batching.BatchOptions(
    batch_size=cfg.batch_size,
    batch_tokens=cfg.batch_tokens,
    bucket=cfg.bucket,
    bucket_window=cfg.bucket_window,
    pad_to_multiple=pad,
    fixed_source_length=cfg.fixed_source_length,
    fixed_target_length=cfg.fixed_target_length,
    drop_remainder=cfg.drop_remainder,
    equal_widths=cfg.equal_widths,
    widths=tuple(widths),
  )


def length_limits(cfg, split: str) -> tuple[int, int]:
  """(max source, max target) length for `split`; a fixed width is also a limit."""
  if split == 'train':
    limits = [cfg.max_source_length, cfg.max_target_length]
  else:
    limits = [cfg.eval_max_source_length, cfg.eval_max_target_length]
  for k, fixed in enumerate((cfg.fixed_source_length, cfg.fixed_target_length)):
    if fixed:
      limits[k] = min(limits[k], fixed) if limits[k] else fixed
  return limits[0], limits[1]


@contextlib.contextmanager
def _building(data_dir: str):
  """Holds an exclusive lock on <data_dir>/.prepare.lock while the dataset and tokenisers are built or
  read, so that processes sharing a data_dir (the shards of a sweep) build them once, one after the other.
  A data_dir that cannot be written (a read-only cache that is already built) is read without the lock."""
  try:
    os.makedirs(data_dir, exist_ok=True)
    handle = open(os.path.join(data_dir, '.prepare.lock'), 'a')
  except OSError:
    yield
    return
  with handle:
    fcntl.flock(handle, fcntl.LOCK_EX)
    try:
      yield
    finally:
      fcntl.flock(handle, fcntl.LOCK_UN)


# What prepare does, in order: a progress bar names them when they take more than a second.
PREPARE_STAGES = ('corpus (built once)', 'tokenizers (trained once)', 'encoding', 'statistics')


def prepare(cfg) -> PreparedData:
  """Builds or loads everything the data config `cfg` names (see get_data_config)."""
  bar = progress.stages(PREPARE_STAGES, f'prepare {cfg.name}')
  with _building(cfg.data_dir):
    bar.set_postfix_str(PREPARE_STAGES[0])
    corpus = sources.load_corpus(cfg, os.path.join(cfg.data_dir, 'tfds'))
    bar.update()
    bar.set_postfix_str(PREPARE_STAGES[1])
    vocab_dir = _vocab_dir(cfg, corpus)
    src_tok, tgt_tok = _tokenizers(cfg, corpus, vocab_dir)
    bar.update()
  bar.set_postfix_str(PREPARE_STAGES[2])
  tokenized = {s: pipeline.tokenize_split(corpus.splits[s], src_tok, tgt_tok) for s in sources.SPLITS}
  bar.update()
  bar.set_postfix_str(PREPARE_STAGES[3])
  stats = stats_lib.corpus_stats(corpus, tokenized, src_tok, tgt_tok)
  train = tokenized['train']
  keep = pipeline.length_filter(train, *length_limits(cfg, 'train'))
  stats['train_length_filter'] = {
    'limits': list(length_limits(cfg, 'train')),
    'kept': int(len(keep)),
    'removed': int(len(train) - len(keep)),
  }
  stats['train_padding'] = stats_lib.padding_report(
    train.src_len[keep], train.tgt_len[keep], batch_options(cfg), cfg.shuffle_seed
  )
  _write_stats(os.path.join(vocab_dir, 'stats.json'), stats)
  bar.update()
  bar.close()
  return PreparedData(corpus, tokenized, src_tok, tgt_tok, vocab_dir, stats)


def _write_stats(path: str, stats: dict) -> None:
  """stats.json beside the tokenisers, written whole (temporary file, then rename) and only when it changes,
  so that readers of a run need no write access to the data cache."""
  text = json.dumps(stats, indent=1)
  try:
    with open(path) as f:
      if f.read() == text:
        return
  except OSError:
    pass
  tmp = f'{path}.tmp-{os.getpid()}'
  try:
    with open(tmp, 'w') as f:
      f.write(text)
    os.replace(tmp, path)
  except OSError:
    if not os.path.exists(path):
      raise


def batches(
  prepared: PreparedData,
  split: str,
  cfg,
  seed: Optional[int] = None,
  state: Optional[dict] = None,
  num_epochs: Optional[int] = None,
  shuffle: Optional[bool] = None,
  row_multiple: int = 1,
  shard: tuple[int, int] = (0, 1),
  max_examples: int = 0,
  widths: tuple = (),
  fixed_rows: bool = False,
) -> pipeline.BatchIterator:
  """Batches of `split`. Training: shuffled, `cfg.num_epochs` passes (0 = forever), seed
  `cfg.shuffle_seed` unless given. Validation/test: one pass in a fixed order (sorted by
  length when bucketing). `state` (from `iterator.state()`) resumes exactly.

  `row_multiple` pads each batch with empty rows (length 0, index -1) to a multiple of it (the
  data-parallel device count); `shard=(process_index, process_count)` yields only this
  process's rows of each global batch (see pipeline.BatchIterator). `max_examples` > 0 keeps
  that many examples spread evenly over the split's source lengths (a validation subset that
  is not just its shortest sentences). `widths`: the only widths a batch may take (batch_options).
  `fixed_rows`: each batch is padded with empty rows to batching.eval_rows of its width, so that a program
  compiled for a width serves every batch of that width (evaluation and decoding; their readers skip rows
  whose index is -1)."""
  if split not in prepared.tokenized:
    raise ValueError(f'unknown split {split!r}; valid: {", ".join(prepared.tokenized)}')
  training = split == 'train'
  data = prepared.tokenized[split]
  keep = pipeline.length_filter(data, *length_limits(cfg, split))
  if 0 < max_examples < len(keep):
    by_length = keep[np.argsort(data.src_len[keep], kind='stable')]
    keep = np.sort(by_length[np.linspace(0, len(keep) - 1, max_examples).round().astype(int)])
  epochs = num_epochs if num_epochs is not None else (cfg.num_epochs if training else 1)
  return pipeline.BatchIterator(
    data,
    keep,
    batch_options(cfg, split, widths),
    cfg.shuffle_seed if seed is None else seed,
    epochs or None,
    training if shuffle is None else shuffle,
    split,
    state,
    row_multiple,
    shard,
    fixed_rows,
  )


def _limits_text(cfg, split: str) -> str:
  """The settings behind length_limits(cfg, split), as key=value."""
  prefix = '' if split == 'train' else 'eval_'
  keys = [f'{prefix}max_source_length', f'{prefix}max_target_length']
  keys += [k for k in ('fixed_source_length', 'fixed_target_length') if cfg[k]]
  return ', '.join(f'data.{k}={cfg[k]}' for k in keys)


def check_batches(prepared: PreparedData, cfg, num_steps: int = 0) -> None:
  """Refuses, with a ValueError naming the filter, data settings under which a split yields no batch
  (every sentence removed by a length limit, or by drop_remainder) or training runs out of batches
  before `num_steps` (data.num_epochs). Cheap: batch plans only, no batches are built."""
  for split in ('validation', 'test', 'train'):
    data = prepared.tokenized[split]
    if not len(data):
      raise ValueError(
        f'the {split} split of {cfg.name} is empty; give the dataset more sentences or '
        'change data.validation_fraction / data.test_fraction'
      )
    keep = pipeline.length_filter(data, *length_limits(cfg, split))
    if not len(keep):
      raise ValueError(
        f'no {split} sentence fits the length limits ({_limits_text(cfg, split)}): the shortest source '
        f'has {int(data.src_len.min())} tokens and the shortest target {int(data.tgt_len.min())} (EOS '
        'included); raise the limits (0: no limit)'
      )
  it = batches(prepared, 'train', cfg)
  if not it.epoch_plan(0):
    raise ValueError(
      f'data.drop_remainder=True drops every training batch: {len(keep)} sentences '
      f'are fewer than data.batch_size={cfg.batch_size}; lower the batch size or set '
      'data.drop_remainder=False'
    )
  if cfg.num_epochs and num_steps:
    total = sum(len(it.epoch_plan(e)) for e in range(cfg.num_epochs))
    if total < num_steps:
      raise ValueError(
        f'data.num_epochs={cfg.num_epochs} gives {total} training batches, fewer than '
        f'train.num_steps={num_steps}; raise data.num_epochs, or set it to 0 (repeat '
        'forever)'
      )


def save_tokenizers(prepared: PreparedData, directory: str) -> None:
  """Writes both tokenisers under `directory` (source/, target/), e.g. beside a checkpoint."""
  prepared.src_tokenizer.save(os.path.join(directory, 'source'))
  prepared.tgt_tokenizer.save(os.path.join(directory, 'target'))


def load_tokenizers(directory: str) -> tuple:
  """(source, target) tokenisers from a directory written by save_tokenizers, or from a
  PreparedData's `vocab_dir`."""
  return (
    tokenizers.load_tokenizer(os.path.join(directory, 'source')),
    tokenizers.load_tokenizer(os.path.join(directory, 'target')),
  )


def raw_texts(prepared: PreparedData, split: str) -> tuple[list[str], list[str]]:
  """Untokenised (sources, targets) of `split`; a batch's `index` points into them."""
  raw = prepared.corpus.splits[split]
  return raw.source, raw.target


def removed_by_length(prepared: PreparedData, split: str, cfg) -> int:
  """How many examples of `split` the length limits of `cfg` leave out of its batches."""
  data = prepared.tokenized[split]
  return int(len(data) - len(pipeline.length_filter(data, *length_limits(cfg, split))))
