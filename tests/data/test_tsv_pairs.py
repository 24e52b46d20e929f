"""Tab-separated pair files: errors name the file and line; bad lines can be skipped."""

import pytest

from attnmt.data import get_data_config, prepare, sources, tsv_pairs

ATTRIBUTION = 'CC-BY 2.0 (France) Attribution: tatoeba.org #538123 (CM) & #431736 (Leono)'


def _write(path, lines):
  path.write_text(''.join(line + '\n' for line in lines), encoding='utf-8')
  return str(path)


def _good_lines(n=60):
  return [f'Sentence number {i}.\tFrase número {i}.\t{ATTRIBUTION}' for i in range(n)]


def _cfg(data_dir, path, skip=False):
  cfg = get_data_config()
  cfg.name, cfg.data_dir, cfg.tsv_path = 'tsv_pairs', str(data_dir), path
  cfg.skip_bad_lines = skip
  cfg.source_lang, cfg.target_lang = 'en', 'es'
  cfg.tokenizer, cfg.vocab_size = 'word', 100
  return cfg


def test_malformed_line_names_file_and_line(tmp_path):
  path = _write(tmp_path / 'pairs.tsv', _good_lines(3) + ['no tab here'] + _good_lines(2))
  with pytest.raises(tsv_pairs.TsvFormatError) as error:
    prepare(_cfg(tmp_path / 'data', path))
  message = str(error.value)
  assert message.startswith(f'{path}:4: expected 2 or 3 tab-separated fields')
  assert 'found 1' in message and '\n' not in message


def test_too_many_fields_and_empty_side_are_malformed(tmp_path):
  path = _write(tmp_path / 'a.tsv', ['a\tb\tc\td'])
  with pytest.raises(tsv_pairs.TsvFormatError, match=r'a\.tsv:1: .*found 4'):
    tsv_pairs.read_pairs(path)
  path = _write(tmp_path / 'b.tsv', ['ok\tbien', '\tvacío'])
  with pytest.raises(tsv_pairs.TsvFormatError, match=r'b\.tsv:2: empty source or target'):
    tsv_pairs.read_pairs(path)


def test_skip_bad_lines_reports_the_count(tmp_path):
  lines = _good_lines(30) + ['bad', 'a\tb\tc\td', ''] + _good_lines(30)[::-1]
  path = _write(tmp_path / 'pairs.tsv', lines[:30] + lines[30:33] + [f'Other {i}.\tOtra {i}.' for i in range(30)])
  prepared = prepare(_cfg(tmp_path / 'data', path, skip=True))
  report = prepared.stats['build_report']
  assert report['skipped_lines'] == 2
  assert report['first_skipped_lines'] == [31, 32]
  assert report['blank_lines'] == 1
  assert sum(s['pairs'] for s in prepared.stats['splits'].values()) == 60
  assert prepared.source_lang == 'en' and prepared.target_lang == 'es'


def test_empty_and_unreadable_files(tmp_path):
  empty = _write(tmp_path / 'empty.tsv', [])
  with pytest.raises(tsv_pairs.TsvFormatError, match='no sentence pairs'):
    prepare(_cfg(tmp_path / 'data', empty))
  missing = str(tmp_path / 'missing.tsv')
  with pytest.raises(tsv_pairs.TsvFormatError, match='cannot read sentence-pair file'):
    prepare(_cfg(tmp_path / 'data', missing))
  latin1 = tmp_path / 'latin1.tsv'
  latin1.write_bytes('ok\tbien\nniño\tchild\n'.encode('latin-1'))
  with pytest.raises(tsv_pairs.TsvFormatError, match=r'latin1\.tsv:2: not valid UTF-8'):
    tsv_pairs.read_pairs(str(latin1))


def test_a_source_with_several_translations_stays_in_one_split(tmp_path):
  lines = [f'Hello {i % 40}.\tHola {i}.' for i in range(200)]
  prepared = prepare(_cfg(tmp_path / 'data', _write(tmp_path / 'p.tsv', lines)))
  sources = {s: set(raw.source) for s, raw in prepared.corpus.splits.items()}
  assert not sources['train'] & sources['test']
  assert not sources['train'] & sources['validation']
  assert all(sources.values())
  lines_of = prepared.corpus.splits['test'].ids
  assert all(lines[int(n) - 1].split('\t')[0] in sources['test'] for n in lines_of)


def test_splits_are_read_in_example_order_at_once_or_one_by_one(tmp_path):
  """load_corpus reads each split with the data source's __getitems__ (every key at once); the texts equal those
  read record by record, and a source that can only be iterated gives the same split."""
  lines = [f'Line {i}.\tLínea {i}.' for i in range(90)]
  cfg = _cfg(tmp_path / 'data', _write(tmp_path / 'p.tsv', lines))
  corpus = sources.load_corpus(cfg, str(tmp_path / 'data' / 'tfds'))
  builder = sources._own_builder(cfg, str(tmp_path / 'data' / 'tfds'))
  data = builder.as_data_source()
  for split, raw in corpus.splits.items():
    one_by_one = [data[split][i] for i in range(len(data[split]))]
    assert raw.source == [r['en'].decode() for r in one_by_one]
    assert raw.target == [r['es'].decode() for r in one_by_one]
    assert raw.ids == [str(r['line']) for r in one_by_one]
    assert [lines[int(n) - 1] for n in raw.ids] == [f'{s}\t{t}' for s, t in zip(raw.source, raw.target)]

  class Iterable:  # a source that can only be iterated
    def __init__(self, records):
      self.records = records

    def __iter__(self):
      return iter(self.records)

    def __len__(self):
      return len(self.records)

  records = [data['train'][i] for i in range(len(data['train']))]
  plain = sources._read_split(Iterable(records), 'en', 'es', 'line')
  assert plain.source == corpus.splits['train'].source and plain.ids == corpus.splits['train'].ids
