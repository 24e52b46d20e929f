"""Attention exports (attnmt/analysis/exports.py), each read back: Pharaoh through the project's own AER code, NPZ and
JSON against the matrices, the Nematus/SoftAlignments text through SoftAlignments' own reader (the
`softalignments` package) and ours; and the analyze flag."""

import importlib
import json
import os
import subprocess
import sys
import types

import numpy as np
import pytest

from attnmt.analysis import exports, inspection
from attnmt.training import trainer
import references
from experiments.configs import tiny

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope='session')  # with xdist_group: built once, though xdist interleaves modules
def run_and_attention(tmp_path_factory):
  config = tiny.get_config()
  config.data.data_dir = str(tmp_path_factory.mktemp('data'))
  config.train.num_steps = 10
  workdir = str(tmp_path_factory.mktemp('runs') / 'run')
  trainer.train_and_evaluate(config, workdir)
  run = inspection.load_run(workdir)
  return workdir, config.data.data_dir, inspection.split_word_attention(run, 0, 'test')


@pytest.fixture(scope='session')  # with xdist_group: built once, though xdist interleaves modules
def attention_eos(run_and_attention):
  run = inspection.load_run(run_and_attention[0])
  return inspection.split_word_attention(run, 0, 'test', eos=True)


@pytest.mark.xdist_group('exports_run')  # one worker trains the shared run
def test_the_eos_row_and_column_leave_the_words_weights_as_they_are(run_and_attention, attention_eos):
  _, _, attention = run_and_attention
  for i, (w, src, tgt) in attention_eos.items():
    assert w.shape == (len(tgt), len(src)) and src[-1] == tgt[-1] == '</s>'
    np.testing.assert_allclose(w.sum(1), 1.0, rtol=1e-5)  # every row, the EOS step's too, is a distribution
    np.testing.assert_allclose(w[:-1, :-1], attention[i][0], rtol=1e-6)
    assert (src[:-1], tgt[:-1]) == (attention[i][1], attention[i][2])


def softalignments_reader():
  """readNematus of the `softalignments` package (SoftAlignments' own reader). Its module imports `imp`, gone
  from Python 3.12, for a `reload` it never calls: importlib's stands in where `imp` is missing."""
  if importlib.util.find_spec('imp') is None:
    sys.modules['imp'] = types.SimpleNamespace(reload=importlib.reload)
  from softalignments.functions import readNematus

  return readNematus


@pytest.mark.xdist_group('exports_run')  # one worker trains the shared run
def test_every_format_reads_back(run_and_attention, attention_eos, tmp_path):
  _, _, attention = run_and_attention
  order = sorted(attention)
  paths = exports.write(attention_eos, str(tmp_path), list(exports.FORMATS))
  assert [os.path.basename(p) for p in paths] == [exports.FILES[f] for f in exports.FORMATS]

  # Pharaoh: line i is sentence i; read with the AER code's parser, the links are the attention's argmax links.
  lines = open(paths[0]).read().splitlines()
  assert len(lines) == len(order) == 40
  predicted = [references.parse_pharaoh(line)[0] for line in lines]
  wanted = [inspection.attention_alignment(attention[i][0]) for i in order]
  assert predicted == wanted and inspection.alignment_error_rate(predicted, wanted) == 0.0
  assert all(len(p) == attention[i][0].shape[0] for p, i in zip(predicted, order))  # one link per target word

  npz = np.load(paths[1])
  assert npz['index'].tolist() == order
  for i in order:
    np.testing.assert_allclose(npz[f'weights_{i}'], attention[i][0], rtol=1e-6)

  records = json.load(open(paths[2], encoding='utf-8'))
  assert [r['index'] for r in records] == order
  for r in records:
    w, src, tgt = attention[r['index']]
    assert r['source'] == src and r['target'] == tgt
    np.testing.assert_allclose(r['weights'], w, atol=1e-6)
    assert np.all(np.sum(r['weights'], axis=1) <= 1.0 + 1e-4)  # a row's share of the words (EOS left out)

  soft = exports.read_softalign(paths[3])
  assert [s[0] for s in soft] == order
  for index, w, src, tgt in soft:
    assert (src, tgt) == (attention_eos[index][1], attention_eos[index][2])
    np.testing.assert_allclose(w, attention_eos[index][0], atol=1e-6)
  header = open(paths[3], encoding='utf-8').readline().split(' ||| ')
  assert (
    header[0] == str(order[0])
    and header[2] == '0'
    and header[4].split() == [str(len(attention[order[0]][1]) + 1), str(len(attention[order[0]][2]) + 1)]
  )


@pytest.mark.xdist_group('exports_run')  # one worker trains the shared run
def test_softalignments_reads_the_export_with_its_own_reader(attention_eos, tmp_path):
  order = sorted(attention_eos)
  (path,) = exports.write(attention_eos, str(tmp_path), ['softalign'])
  srcs, tgts, alis = softalignments_reader()(path, 'Nematus')
  assert len(srcs) == len(tgts) == len(alis) == len(order) == 40
  for i, src, tgt, ali in zip(order, srcs, tgts, alis):
    w, src_words, tgt_words = attention_eos[i]
    # the reader appends <EOS> to both sides and turns the matrix to source x target
    assert src == src_words[:-1] + ['<EOS>'] and tgt == tgt_words[:-1] + ['<EOS>']
    assert ali.shape == (len(src), len(tgt)), (ali.shape, len(src), len(tgt))
    np.testing.assert_allclose(ali, w.T, atol=1e-6)


def test_unknown_format_is_one_line():
  with pytest.raises(ValueError, match=r"unknown --export format\(s\) csv; valid: pharaoh, npz, json, softalign"):
    exports.parse_formats('pharaoh,csv')


@pytest.mark.xdist_group('exports_run')  # one worker trains the shared run
def test_analyze_exports_beside_its_analysis(run_and_attention, tmp_path):
  workdir, data_dir, attention = run_and_attention
  env = dict(os.environ, JAX_PLATFORMS='cpu', PYTHONPATH=ROOT)
  res = subprocess.run(
    [
      sys.executable,
      '-m',
      'experiments.analyze',
      f'--runs={workdir}',
      f'--out={tmp_path}',
      '--beam_size=0',
      '--num_heatmaps=0',
      '--export=pharaoh,softalign',
    ],
    cwd=ROOT,
    env=env,
    capture_output=True,
    text=True,
    timeout=600,
  )
  assert res.returncode == 0, res.stderr[-3000:]
  run_dir = tmp_path / 'additive-bahdanau-global'
  lines = (run_dir / 'alignments.pharaoh').read_text().splitlines()
  assert [references.parse_pharaoh(line)[0] for line in lines] == [
    inspection.attention_alignment(attention[i][0]) for i in sorted(attention)
  ]
  assert (run_dir / 'attention.softalign').exists() and not (run_dir / 'attention.npz').exists()
