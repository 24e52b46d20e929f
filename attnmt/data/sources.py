"""One entry to every corpus: a dataset name from the config becomes TFDS data sources.

All four kinds of source are TFDS builders read as array_record data sources, so they
share the rest of the pipeline: `bible_en_es`, `tsv_pairs`, `synthetic_numbers` (defined
in this package) and any TFDS catalogue name ('ted_hrlr_translate/pt_to_en').
"""

import dataclasses
import functools
import os
from typing import Optional

import tensorflow_datasets as tfds

from attnmt import progress
from attnmt.data import bible_en_es, catalogue, pharaoh, synthetic_numbers, tsv_pairs

OWN_DATASETS = ('bible_en_es', 'tsv_pairs', 'synthetic_numbers')
SPLITS = ('train', 'validation', 'test')


@dataclasses.dataclass
class RawSplit:
  """Untokenised text of one split, in data-source order (the example `index`)."""

  source: list[str]
  target: list[str]
  ids: list[str]  # Bible reference, file line, or position
  alignment: Optional[list[str]] = None  # Pharaoh strings: the synthetic task's, or data.alignment_path's


@dataclasses.dataclass
class RawCorpus:
  """The splits of a dataset and what its build reported."""

  dataset_id: str  # 'bible_en_es/full/1.0.0', names the vocabulary directory
  source_lang: str
  target_lang: str
  splits: dict[str, RawSplit]
  build_report: dict


def _text(value) -> str:
  return value.decode('utf-8') if isinstance(value, bytes) else str(value)


def _read_split(source, src_key: str, tgt_key: str, id_key: Optional[str], at_once: bool = False) -> RawSplit:
  # In order; the position is the example index. `at_once`: the builder's own ArrayRecord data source reads a list
  # of keys at once, faster than one by one; other sources (a catalogue dataset's, which TFDS's mock data
  # replaces in tests without a working __getitems__) are iterated.
  records = list(source.__getitems__(list(range(len(source))))) if at_once else list(source)
  has_alignment = bool(records) and 'alignment' in records[0]
  return RawSplit(
    source=[_text(r[src_key]) for r in records],
    target=[_text(r[tgt_key]) for r in records],
    ids=[_text(r[id_key]) if id_key else str(i) for i, r in enumerate(records)],
    alignment=[_text(r['alignment']) for r in records] if has_alignment else None,
  )


def _own_builder(cfg, tfds_dir: str) -> tfds.core.GeneratorBasedBuilder:
  """The builder of one of this package's datasets for `cfg`, prepared in `tfds_dir`."""
  if cfg.name == 'bible_en_es':
    books = cfg.books.split(',') if isinstance(cfg.books, str) else cfg.books
    config = bible_en_es.bible_config(books)
    builder_cls = functools.partial(bible_en_es.BibleEnEs, sword_path=cfg.sword_path or None)
  elif cfg.name == 'tsv_pairs':
    tsv_pairs.read_pairs(cfg.tsv_path, cfg.skip_bad_lines)  # Fails fast, one clear line.
    config = tsv_pairs.tsv_config(
      cfg.tsv_path,
      cfg.source_lang or 'source',
      cfg.target_lang or 'target',
      cfg.skip_bad_lines,
      cfg.validation_fraction,
      cfg.test_fraction,
    )
    builder_cls = tsv_pairs.TsvPairsBuilder
  else:
    config = synthetic_numbers.numbers_config(
      cfg.synthetic_size,
      cfg.synthetic_eval_size,
      cfg.synthetic_min_numbers,
      cfg.synthetic_max_numbers,
      cfg.synthetic_max_digits,
      cfg.seed,
    )
    builder_cls = synthetic_numbers.SyntheticNumbers
  builder = builder_cls(config=config, data_dir=tfds_dir, file_format='array_record')
  builder.download_and_prepare()
  return builder


def _language_keys(cfg, default: tuple[str, str], features) -> tuple[str, str]:
  keys = (cfg.source_lang or default[0], cfg.target_lang or default[1])
  for key in keys:
    if key not in features:
      raise ValueError(f'{cfg.name} has no language {key!r}; it has {", ".join(k for k in features if k in default)}')
  return keys


def unknown_name_error(name: str) -> ValueError:
  """The one-line error for a dataset name that is neither ours nor in the catalogue."""
  translation = sorted({n for n in catalogue.known_names() if 'translate' in n})
  return ValueError(
    f'unknown dataset {name!r}; valid: {", ".join(OWN_DATASETS)}, or a TFDS catalogue '
    f'name with its config (e.g. ted_hrlr_translate/pt_to_en) among {", ".join(translation)}'
  )


def tsv_alignments(cfg) -> Optional[dict[int, str]]:
  """The gold links of a tsv_pairs corpus by TSV line number, from `data.alignment_path` (None without one)."""
  if cfg.name != 'tsv_pairs' or not cfg.alignment_path:
    return None
  return pharaoh.read_alignments(
    cfg.alignment_path, cfg.tsv_path, tsv_pairs.read_pairs(cfg.tsv_path, cfg.skip_bad_lines)
  )


def load_corpus(cfg, tfds_dir: str) -> RawCorpus:
  """Builds (once) and reads the dataset that `cfg.name` names; see get_data_config."""
  gold_by_line = tsv_alignments(cfg)  # first: a bad alignment file fails before anything is built
  tfds.display_progress_bar(progress.interactive())  # TFDS's own bars redraw lines: a terminal only
  if cfg.name in OWN_DATASETS:
    builder = _own_builder(cfg, tfds_dir)
    src_key, tgt_key = _language_keys(cfg, builder.info.supervised_keys, builder.info.features)
    id_key = {'bible_en_es': 'ref', 'tsv_pairs': 'line'}.get(cfg.name)
    data, at_once = builder.as_data_source(), True
    dataset_id = f'{builder.name}/{builder.builder_config.name}/{builder.version}'
    report = dict(builder.info.metadata or {})
  elif catalogue.is_catalogue_name(cfg.name):
    src_key, tgt_key = catalogue.language_keys(cfg.name, tfds_dir, cfg.source_lang, cfg.target_lang)
    id_key = None
    data, at_once = catalogue.data_sources(cfg.name, tfds_dir), False
    dataset_id = cfg.name.replace(':', '_')
    report = {}
  else:
    raise unknown_name_error(cfg.name)
  splits = {s: _read_split(data[s], src_key, tgt_key, id_key, at_once) for s in SPLITS}
  if gold_by_line is not None:  # a tsv_pairs example's id is its line in the file
    for split in splits.values():
      split.alignment = [gold_by_line[int(line)] for line in split.ids]
  return RawCorpus(os.path.join(dataset_id, f'{src_key}-{tgt_key}'), src_key, tgt_key, splits, report)
