"""Hostile input to the analysis surfaces (issue 53): `analyze --from_translations` into a folder that holds a
richer analysis, runs given twice, heatmap indices out of range, runs pooled that were not trained alike, and
translations of different test sets saved into one file. Each gets one line naming the input, the problem and
the fix, exit status 2, and nothing written or overwritten (or, where nothing is refused, a line saying what
was left out)."""

import gzip
import json
import os
import re
import subprocess
import sys

import ml_collections
import pytest

import attnmt
from attnmt import data

from attnmt.analysis import inspection, report, stored
from attnmt.errors import ConfigError, InputError
from attnmt.training import checkpoints
from experiments.configs import tiny

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENV = dict(os.environ, JAX_PLATFORMS='cpu', PYTHONPATH=ROOT)


def analyze(*args):
  cmd = [sys.executable, '-m', 'experiments.analyze', *map(str, args)]
  return subprocess.run(cmd, cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)


def last_line(res) -> str:
  return res.stderr.strip().splitlines()[-1]


def _doc(n=12):
  refs = [f'the cat sat on mat {i}' for i in range(n)]
  return {
    'format': stored.FORMAT,
    'references': refs,
    'sources': [f'w w w {i}' for i in range(n)],
    'variants': [
      {'variant': 'none/bahdanau/global', 'seeds': [0, 1], 'attends': False, 'greedy': [refs[::-1], refs[1:] + ['x']]},
      {'variant': 'additive/bahdanau/global', 'seeds': [0, 1], 'attends': True, 'greedy': [refs, refs[:-1] + ['y']]},
    ],
  }


def _write(path, doc):
  with gzip.open(path, 'wt', encoding='utf-8') as f:
    json.dump(doc, f)
  return str(path)


def _snapshot(folder):
  return {name: (folder / name).read_bytes() for name in sorted(os.listdir(folder))}


def test_from_translations_refuses_an_out_holding_a_runs_analysis(tmp_path):
  """The folder of a --runs analysis: its analysis.json has AER and attention statistics the stored
  translations cannot give back; recomputing into it is refused and nothing there changes."""
  folder = tmp_path / 'analysis'
  folder.mkdir()
  path = _write(folder / stored.FILE, _doc())
  (folder / 'analysis.json').write_text(json.dumps([{'variant': 'none/bahdanau/global', 'workdir': 'r', 'aer': [0.4]}]))
  (folder / 'analysis.md').write_text('| variant | AER |\n')
  before = _snapshot(folder)
  res = analyze(f'--from_translations={path}', f'--out={folder}')
  assert res.returncode == 2, res.stderr
  assert last_line(res) == (
    f'error: --out {folder} holds an analysis (analysis.json) that is not a recomputation of {path} and would be '
    'replaced, losing what it has beyond the stored translations (AER, attention, beam); give another --out '
    '(a new folder) for the recomputation'
  )
  assert _snapshot(folder) == before
  (folder / 'analysis.json').unlink()  # a page: analysis.md beside the stored translations, no analysis.json
  before = _snapshot(folder)
  res = analyze(f'--from_translations={path}', f'--out={folder}')
  assert res.returncode == 2 and last_line(res) == (
    f'error: --out {folder} holds analysis.md, which this recomputation would replace; give another --out '
    '(a new folder) for the recomputation'
  )
  assert _snapshot(folder) == before


@pytest.mark.slow
def test_from_translations_may_recompute_into_its_own_earlier_out(tmp_path):
  """A folder holding a recomputation of the same file is the same analysis again: it is replaced. With
  --pool_seeds, an --out holding the input file itself is refused (the pooled file would replace it)."""
  path = _write(tmp_path / stored.FILE, _doc())
  out = tmp_path / 'again'
  for _ in range(2):
    res = analyze(f'--from_translations={path}', f'--out={out}')
    assert res.returncode == 0, res.stderr
  assert all(r['source'] == path for r in json.loads((out / 'analysis.json').read_text()))
  before = _snapshot(tmp_path / 'again')
  res = analyze(f'--from_translations={path}', f'--out={tmp_path}', '--pool_seeds')
  assert res.returncode == 2 and last_line(res) == (
    f'error: --out {tmp_path} holds {path} itself, which the pooled {stored.FILE} would replace; give another '
    '--out (a new folder) for the recomputation'
  )
  assert _snapshot(tmp_path / 'again') == before and not (tmp_path / 'analysis.md').exists()


def test_a_run_given_twice_is_refused(tmp_path):
  run = tmp_path / 'runs' / 'a'
  res = analyze(f'--runs={run},{tmp_path}/runs/./a/', f'--out={tmp_path / "out"}')
  assert res.returncode == 2 and last_line(res) == (
    f'error: --runs names the run directory {os.path.realpath(run)} twice (as {run} and {tmp_path}/runs/./a/); '
    'give each run once'
  )
  assert not (tmp_path / 'out').exists()


def test_an_out_holding_the_analysis_of_other_runs_is_refused(tmp_path):
  """`analyze --runs=B --out=DIR` where DIR holds the analysis of A: refused before any run is read, DIR
  untouched; the same runs again may replace their own analysis (it gets past the check to the missing run)."""
  out = tmp_path / 'analysis'
  out.mkdir()
  (out / 'analysis.json').write_text(json.dumps([{'variant': 'a', 'workdir': str(tmp_path / 'a')}]))
  (out / 'analysis.md').write_text('the analysis of a')
  before = _snapshot(out)
  res = analyze(f'--runs={tmp_path / "b"}', f'--out={out}')
  assert res.returncode == 2 and last_line(res) == (
    f'error: --out {out} holds the analysis of other runs (its analysis.json), which this one would replace; '
    'give another --out (a new folder), or the same --runs to analyse those runs again'
  ), res.stderr[-2000:]
  assert _snapshot(out) == before
  again = analyze(f'--runs={tmp_path / "a"}', f'--out={out}')
  assert again.returncode != 0 and 'holds the analysis of other runs' not in again.stderr


def test_a_negative_sentence_index_is_refused_before_any_run_is_read(tmp_path):
  """The run does not exist: the index is refused before it is looked for, let alone decoded."""
  res = analyze(f'--runs={tmp_path / "missing"}', '--sentences=3,-1', f'--out={tmp_path / "out"}')
  assert res.returncode == 2 and last_line(res) == (
    'error: --sentences -1: test-split indices start at 0; pass indices >= 0'
  )
  assert not (tmp_path / 'out').exists()


def test_an_index_beyond_the_split_is_refused_before_decoding(tmp_path, monkeypatch):
  """The split's size is known from the run's config and data, before its checkpoint is loaded: an index
  beyond the split of any run is refused before the first run is decoded."""
  sizes = {'a': 5, 'b': 3}
  monkeypatch.setattr(
    checkpoints,
    'load_config',
    lambda workdir: ml_collections.ConfigDict({'data': {'name': workdir}, 'variant': workdir}),
  )
  monkeypatch.setattr(report.data, 'prepare_once', lambda d, corpora: d.name)
  monkeypatch.setattr(report.data, 'raw_texts', lambda name, split: (['s'] * sizes[name], ['r'] * sizes[name]))

  def never(*args):
    raise AssertionError('a run was loaded before the indices were checked')

  monkeypatch.setattr(inspection, 'load_run', never)
  with pytest.raises(ValueError) as e:
    report.analyze_runs(['a', 'b'], str(tmp_path / 'out'), heatmap_sentences=[1, 4])
  assert str(e.value) == '--sentences 4: the test split of b has 3 sentences; pass indices from 0 to 2'
  assert not (tmp_path / 'out').exists()


def test_a_family_naming_no_variant_here_is_refused_before_any_run_is_loaded(tmp_path, monkeypatch):
  """The declared family is read from the runs' configs: a contrast the runs cannot form is refused before the
  first checkpoint is read, the decoding started or a file written (attnmt.compare and analyze alike)."""
  runs = [str(_fake_run(tmp_path / v, f'{v}/bahdanau/global', 4)) for v in ('none', 'additive')]

  def never(*args):
    raise AssertionError('a run was loaded before the family was checked')

  monkeypatch.setattr(inspection, 'load_run', never)
  refused = {
    'all,X': "'all' is every pair already and takes no other entry",
    'X': "'X' is not a variant compared here (none/bahdanau/global, additive/bahdanau/global)",
    'none~none': "contrast 'none~none' compares a variant with itself",
  }
  for spec, message in refused.items():
    with pytest.raises(ConfigError, match=re.escape(message)):
      report.analyze_runs(runs, str(tmp_path / 'out'), contrasts=spec)
  seeds = [str(_fake_run(tmp_path / f's{k}', f'dot/luong/global/seeds={k}', 4)) for k in (0, 1)]
  with pytest.raises(ConfigError, match=re.escape("'X' is not a variant compared here (dot/luong/global);")):
    report.analyze_runs(seeds, None, contrasts='X', seeds_as_runs=True)  # pooled: the variant's name
  assert not (tmp_path / 'out').exists()


def _fake_run(path, name, steps, eval_size=40):
  config = tiny.get_config()
  config.data.data_dir = str(path.parent / f'data{eval_size}')
  config.data.synthetic_eval_size = eval_size
  config.train.num_steps = steps
  config.variant = name
  checkpoints.save_config(str(path), config)
  return path


@pytest.mark.slow
def test_pool_seeds_refuses_runs_trained_for_other_steps_or_test_sets(tmp_path):
  """--pool_seeds with --interventions: runs that would pool into one variant must have trained for the same
  steps on the same test sentences; refused from their configs, before any checkpoint is read."""
  a = _fake_run(tmp_path / 'a', 'dot/luong/global/seeds=0', 4)
  b = _fake_run(tmp_path / 'b', 'dot/luong/global/seeds=1', 8)
  c = _fake_run(tmp_path / 'c', 'dot/luong/global/seeds=2', 4, eval_size=30)
  res = analyze(f'--runs={a},{b}', '--interventions=uniform', '--pool_seeds', f'--out={tmp_path / "out"}')
  assert res.returncode == 2 and last_line(res) == (
    f'error: --pool_seeds: {a} and {b} would pool into dot/luong/global but were trained for 4 and 8 steps; '
    'pool only runs trained alike on the same test set (or leave out --pool_seeds)'
  )
  res = analyze(f'--runs={a},{c}', '--interventions=uniform', '--pool_seeds', f'--out={tmp_path / "out"}')
  assert res.returncode == 2 and last_line(res) == (
    f'error: --pool_seeds: {a} and {c} would pool into dot/luong/global but translate different test sentences; '
    'pool only runs trained alike on the same test set (or leave out --pool_seeds)'
  )
  assert not (tmp_path / 'out').exists()
  with pytest.raises(InputError) as e:  # the API's compare(pool_seeds=True) checks the same, naming its argument
    attnmt.compare([str(a), str(b)], pool_seeds=True)
  assert str(e.value) == (
    f'pool_seeds=True: {a} and {b} would pool into dot/luong/global but were trained for 4 and 8 steps; '
    'pool only runs trained alike on the same test set (or leave out pool_seeds=True)'
  )
  alike = _fake_run(tmp_path / 'alike', 'dot/luong/global/seeds=3', 4)  # passes the check; has no checkpoint
  res = analyze(f'--runs={a},{alike}', '--interventions=uniform', '--pool_seeds', f'--out={tmp_path / "out"}')
  assert res.returncode == 2 and '--pool_seeds' not in last_line(res) and str(a) in last_line(res)


def test_stored_pool_seeds_refuses_a_run_of_another_test_set():
  """A document pooled without `load` (or put together by hand): a run with another number of outputs than the
  stored references translated other sentences; it is not pooled into the variant."""
  doc = _doc()
  doc['variants'] = [
    {'variant': 'dot/seeds=0', 'seeds': [0], 'attends': True, 'greedy': [doc['references']]},
    {'variant': 'dot/seeds=1', 'seeds': [1], 'attends': True, 'greedy': [doc['references'][:9]]},
  ]
  with pytest.raises(InputError) as e:
    stored.pool_seeds(doc)
  assert str(e.value) == (
    'dot/seeds=1: 9 outputs for the 12 stored references, so it translated other sentences than the runs it would '
    'pool with into dot; pool only runs that translated the same test set'
  )


def test_runs_of_one_data_config_share_one_prepared_corpus(monkeypatch):
  """The analysis prepares each data config's corpus once for all its runs (data.prepare_once); another
  data config gets its own, and without a shared dict every call prepares."""
  calls = []
  monkeypatch.setattr(sys.modules['attnmt.data.prepare'], 'prepare', lambda d: calls.append(d.vocab_size) or object())
  a, b = tiny.get_config().data, tiny.get_config().data
  b.vocab_size += 1
  corpora = {}
  first = data.prepare_once(a, corpora)
  assert data.prepare_once(tiny.get_config().data, corpora) is first
  assert data.prepare_once(b, corpora) is not first and len(corpora) == 2
  assert data.prepare_once(a, None) is not first
  assert calls == [a.vocab_size, b.vocab_size, a.vocab_size]
