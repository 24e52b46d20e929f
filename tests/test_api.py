"""The Python API (attnmt/api.py) on a tiny trained run of two seeds, pinned against independent paths: each
sentence decoded alone as decoding.greedy / beam_search decode it, what experiments/translate.py prints, the
analysis's forced-decoding attention and per-seed BLEU; and its one-line errors."""

import dataclasses
import json
import os
import re
import subprocess
import sys

import jax.numpy as jnp
import matplotlib.figure
import numpy as np
import pytest

import attnmt
from attnmt import api, data
from attnmt.analysis import inspection
from attnmt.faithfulness import counterfactual, figures, page
from attnmt.errors import CheckpointError, InputError
from attnmt.model import decoding, interventions
from attnmt.training import evaluation, trainer
from experiments.configs import tiny

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
pytestmark = pytest.mark.xdist_group('api_trained')  # one worker trains the module's run, not both
# the tiny run's variant: its name shows the options that differ from their defaults (tiny's sizes)
TINY_VARIANT = 'additive/bahdanau/global'


@pytest.fixture(scope='module')
def trained(tmp_path_factory):
  """A tiny run of seeds 0 and 1 (10 steps), its test split, and the run reloaded with its corpus."""
  config = tiny.get_config()
  config.data.data_dir = str(tmp_path_factory.mktemp('data'))
  config.train.num_steps = 10
  config.train.eval_every = 10
  config.train.seeds = '0,1'
  workdir = str(tmp_path_factory.mktemp('runs') / 'run')
  trainer.train_and_evaluate(config, workdir)
  full = inspection.load_run(workdir)
  sources, references = data.raw_texts(full.prepared, 'test')
  return workdir, full, sources, references


def _alone(run, params, text, beam_size):
  """One sentence decoded alone, as experiments/translate.py decoded before the API: (ids, weights)."""
  ids = run.src_tokenizer.encode(text) + [data.EOS_ID]
  src, src_len = jnp.asarray([ids], jnp.int32), jnp.asarray([len(ids)], jnp.int32)
  max_len = evaluation.decode_length(len(ids), run.config.train.max_decode_factor)
  if beam_size:
    out = decoding.beam_search(
      run.cfg, params, src, src_len, beam_size=beam_size, max_len=max_len, alpha=run.config.train.beam_alpha
    )
    out = decoding.Decoded(*(x[:, 0] for x in out))
  else:
    out = decoding.greedy(run.cfg, params, src, src_len, max_len=max_len)
  n = int(out.lengths[0])
  return np.asarray(out.tokens[0, :n]).tolist(), np.asarray(out.weights[0, :n, : len(ids)])


@pytest.mark.parametrize('beam_size', [0, 2])
@pytest.mark.slow
def test_translate_gives_each_sentence_what_it_gets_decoded_alone(trained, beam_size):
  workdir, _, sources, _ = trained
  run, model = attnmt.load(workdir), inspection.load_model(workdir)
  texts = sources[:2]
  for seed_index, seed in enumerate(run.seeds if beam_size == 0 else run.seeds[1:]):
    out = run.translate(texts, beam_size=beam_size, seed=seed)
    params = evaluation.seed_params(model.params, run.seeds.index(seed))
    assert [x.source for x in out] == texts and all(x.seed == seed for x in out)
    for x in out:
      ids, weights = _alone(model, params, x.source, beam_size)
      assert x.text == model.tgt_tokenizer.decode(ids)
      assert x.tokens == ['</s>' if i == data.EOS_ID else model.tgt_tokenizer.id_to_piece(i) for i in ids]
      assert x.source_tokens == [model.src_tokenizer.id_to_piece(i) for i in model.src_tokenizer.encode(x.source)] + [
        '</s>'
      ]
      assert x.attention.shape == (len(x.tokens), len(x.source_tokens))
      np.testing.assert_allclose(x.attention, weights, atol=1e-5)
      np.testing.assert_allclose(x.attention.sum(1), 1.0, rtol=1e-5)  # each output token's distribution
  assert run.translate(texts[:1])[0].seed == 0  # the first seed by default


@pytest.mark.slow
def test_translate_py_prints_the_api_translations(trained, tmp_path):
  workdir, _, sources, _ = trained
  (tmp_path / 'in.txt').write_text('\n'.join(sources[:3]) + '\n')
  res = subprocess.run(
    [sys.executable, '-m', 'experiments.translate', f'--run={workdir}', f'--input={tmp_path / "in.txt"}']
    + ['--beam_size=2', '--seed_index=1'],
    cwd=ROOT,
    env=dict(os.environ, JAX_PLATFORMS='cpu', PYTHONPATH=ROOT),
    capture_output=True,
    text=True,
    timeout=600,
  )
  assert res.returncode == 0, res.stderr[-2000:]
  wanted = [x.text for x in attnmt.load(workdir).translate(sources[:3], beam_size=2, seed=1)]
  assert res.stdout.splitlines() == wanted


def test_attend_is_the_analysis_forced_attention(trained):
  workdir, full, sources, references = trained
  run = attnmt.load(workdir)
  words = run.attend(sources[:8], references[:8], level='word', seed=1)
  pieces = run.attend(sources[:3], references[:3], level='subword')
  expected = inspection.split_word_attention(full, 1, 'test')
  assert len(words) == 8 and len(expected) == 40
  for i, x in enumerate(words):
    weights, src_words, tgt_words = expected[i]
    assert (x.source_tokens, x.tokens) == (src_words + ['</s>'], tgt_words + ['</s>'])
    np.testing.assert_allclose(x.attention[:-1, :-1], weights, atol=1e-6)
    np.testing.assert_allclose(x.attention.sum(1), 1.0, rtol=1e-5)
  for x in pieces:  # the word tokenizer: a word is a piece
    assert x.level == 'subword' and x.seed == 0 and x.attention.shape == (len(x.tokens), len(x.source_tokens))


def test_heatmap_draws_side_by_side(trained, tmp_path):
  run = attnmt.load(trained[0])
  out = run.translate(trained[2][:2])
  fig = attnmt.heatmap(*out, titles=['first', 'second'])
  assert isinstance(fig, matplotlib.figure.Figure)
  panels = [ax for ax in fig.axes if ax.get_title()]
  assert [ax.get_title() for ax in panels] == ['first', 'second']
  assert [len(ax.get_yticklabels()) for ax in panels] == [len(x.tokens) for x in out]
  fig.savefig(tmp_path / 'heatmap.png')


def test_compare_is_the_analysis_table_as_data(trained):
  workdir = trained[0]
  table = attnmt.compare([workdir])
  (row,) = table.variants
  variant = TINY_VARIANT
  assert row['variant'] == variant and row['seeds'] == 2 and row['sd'] is not None
  # the per-seed test BLEU that training measured on its own (results.json), greedy on the best checkpoint
  trained_bleu = json.load(open(os.path.join(workdir, 'results.json')))['test_bleu']
  assert row['per_seed'] == pytest.approx(trained_bleu) and len(set(row['per_seed'])) == 2
  headers, rows, _ = table.cells()
  assert headers[:3] == ['variant', 'seeds', 'greedy BLEU per seed'] and len(rows) == 1
  assert table.markdown() == table._repr_markdown_() and f'| {variant} | 2 |' in table.markdown()
  assert isinstance(table.bleu_by_length(), matplotlib.figure.Figure)


def test_bad_input_gets_one_line(trained, tmp_path):
  workdir = trained[0]
  run = attnmt.load(workdir)
  cases = [
    (lambda: attnmt.load(str(tmp_path / 'nowhere')), CheckpointError, 'does not exist; pass the workdir'),
    (lambda: attnmt.load(workdir, 'first'), InputError, "pass 'best' or 'latest'"),
    (lambda: run.translate([]), InputError, 'no sentences given'),
    (lambda: run.translate('4 2'), InputError, 'not one string'),
    (lambda: run.translate(None), InputError, 'sentences: pass a list of strings, not NoneType'),
    (lambda: run.translate([4, 2]), InputError, r'sentences\[0\] is of type int, not a string'),
    (lambda: attnmt.load(str(tmp_path)), CheckpointError, 'is not an attnmt run directory'),
    (lambda: attnmt.compare([str(tmp_path)]), CheckpointError, 'is not an attnmt run directory'),
    (lambda: run.translate(['4 2', '  ']), InputError, r'sentences\[1\] is empty'),
    (lambda: run.translate(['4 2'], seed=7), InputError, r"seed 7 is not one of this run's seeds \(0, 1\)"),
    (lambda: run.translate(['4 2'], beam_size=-1), InputError, 'pass 0 \\(greedy search\\)'),
    (lambda: run.attend(['4 2'], ['a', 'b']), InputError, '1 sources but 2 references'),
    (lambda: run.attend(['4 2'], ['a'], level='char'), InputError, 'pass one of word, subword'),
    (lambda: attnmt.heatmap(), InputError, 'at least one'),
    (lambda: attnmt.compare([]), InputError, 'no run_dirs given'),
    (
      lambda: run.translate(['4 2'], intervention=3),
      InputError,
      r'^intervention=3 \(of type int\) is not an intervention; pass its name \(one of identity, uniform, .*\) or an '
      r'attnmt\.model\.interventions\.Intervention$',
    ),
    (lambda: run.intervene(['4 2'], 3, beam_size=2), InputError, r'^intervention=3 \(of type int\) is not an'),
    (
      lambda: run.intervene(['4 2'], 'zero_top_k', k=1.5),
      InputError,
      r'^intervention zero_top_k.k must be an integer >= 1, got 1\.5$',
    ),
    (
      lambda: run.intervene(['4 2'], 'zero_top_k(k=1.5)'),
      InputError,
      r'^intervention zero_top_k.k must be an integer >= 1, got 1\.5$',
    ),
    (
      lambda: run.intervene(['4 2'], 'zero_top_k(k=2', beam_size=2),
      InputError,
      r"^intervention 'zero_top_k\(k=2' does not close its options",
    ),
    (
      lambda: run.intervene(['4 2'], 'permute', draw_seed=1.5),
      InputError,
      r'^draw_seed=1\.5 is not a whole number >= 0',
    ),
    (
      lambda: run.intervene(['4 2'], interventions.build('first'), k=3),
      InputError,
      r'^intervention options k given with an Intervention object',
    ),
    (
      lambda: attnmt.heatmap(run.translate(['4 2'])),
      InputError,
      r'^heatmap item 0 is a list, not a Translation or Attention; .*as separate arguments: heatmap\(\*items\)$',
    ),
    (lambda: attnmt.heatmap(*run.translate(['4 2']), titles='one'), InputError, r'^heatmap titles: pass a list'),
    (
      lambda: attnmt.load(os.path.join(workdir, 'config.json')),
      CheckpointError,
      rf'^{re.escape(os.path.join(workdir, "config.json"))} is a file; attnmt\.load needs the run directory .*: '
      rf'pass {re.escape(workdir)}$',
    ),
    (lambda: attnmt.load(None), InputError, r'^run_dir=None \(of type NoneType\): pass the run directory'),
  ]
  for call, kind, message in cases:
    with pytest.raises(kind, match=message) as e:
      call()
    assert '\n' not in str(e.value)


def test_reading_a_run_writes_nothing_into_its_directory(trained):
  """load, translate, attend and compare only read: a run directory that is read-only (a shared or archived run)
  or in use serves them all (checked by every file's size and modification time, which holds as root too)."""
  workdir = trained[0]

  def listing():
    return {
      os.path.join(d, f): (os.stat(os.path.join(d, f)).st_size, os.stat(os.path.join(d, f)).st_mtime_ns)
      for d, _, files in os.walk(workdir)
      for f in files
    }

  before = listing()
  run = attnmt.load(workdir, 'latest')
  run.translate(['4 2 7'], beam_size=2)
  run.attend(['4 2 7'], [trained[3][0]])
  attnmt.compare([workdir])
  assert listing() == before


def test_a_source_longer_than_a_location_model_takes_is_refused_not_cut():
  """Only score 'location' has a limit (one weight per position up to its option `positions`)."""
  model = inspection.LoadedRun('run', None, None, None, [0], 1, _Words(), _Words())
  for score, limit in (('additive', 0), ('location(positions=4)', 4)):
    run = api.Run(**vars(dataclasses.replace(model, cfg=api.ModelConfig(score=score))))
    assert run.max_source_tokens == limit and run.tokenize('1 2 3 4') == ['1', '2', '3', '4', '</s>']
  with pytest.raises(
    InputError,
    match=r"source 1 has 5 tokens \(with EOS\), more than the 4 score 'location\(positions=4\)' can address",
  ):
    run.translate(['1 2', '1 2 3 4'])  # refused before anything is decoded (the stand-in has no parameters)


class _Words:
  """A stand-in word tokenizer: ids 3.. for the digits."""

  def encode(self, text):
    return [3 + int(w) for w in text.split()]

  def encode_batch(self, texts):
    return [self.encode(t) for t in texts]

  def id_to_piece(self, i):
    return str(i - 3)


def test_the_package_exports_the_api_lazily():
  assert attnmt.load is api.load and 'compare' in dir(attnmt)
  with pytest.raises(AttributeError):
    attnmt.nothing  # noqa: B018


def test_intervene_decodes_with_counterfactual_attention(trained):
  """Run.intervene: the attention the context read is the counterfactual one (all on the first source token);
  the identity gives what translate gives; a bad name or option is one line naming the valid ones."""
  workdir, _, sources, _ = trained
  run = attnmt.load(workdir)
  texts = sources[:3]
  first = run.intervene(texts, 'first', seed=1)
  for x in first:
    assert x.seed == 1 and np.all(x.attention[:, 0] == 1.0) and np.all(x.attention[:, 1:] == 0.0)
  same, plain = run.intervene(texts, 'identity'), run.translate(texts)
  assert [x.text for x in same] == [x.text for x in plain]
  for a, b in zip(same, plain):
    np.testing.assert_array_equal(a.attention, b.attention)
  with pytest.raises(InputError, match=r"^unknown intervention 'shuffle'; valid: identity, uniform"):
    run.intervene(texts, 'shuffle')
  with pytest.raises(
    InputError,
    match=r"^intervention options: zero_top_k has no option depth; valid: k, draw_seed \(draw_seed is the seed of the "
    r"draw; seed= picks the model's\)$",
  ):
    run.intervene(texts, 'zero_top_k', depth=3)
  # an option given as a keyword is the option written in the selection
  by_keyword, written = run.intervene(texts, 'zero_top_k', k=1), run.intervene(texts, 'zero_top_k(k=1)')
  assert [x.text for x in by_keyword] == [x.text for x in written]
  for a, b in zip(by_keyword, written):
    np.testing.assert_array_equal(a.attention, b.attention)


@pytest.mark.parametrize('beam_size', [1, 2])
@pytest.mark.slow
def test_intervene_with_a_beam_is_the_beam_search_of_the_counterfactual(trained, beam_size):
  """Beam search under an intervention (it once failed: forced_attention took the Intervention as an array): the
  output is decoding.beam_search's with that intervention, each sentence alone; the attention, of the output's
  shape, is the counterfactual one (`first`: all on the first source token; `uniform`: 1 / length); translate's
  `intervention=` gives the same."""
  workdir, _, sources, _ = trained
  run, model = attnmt.load(workdir), inspection.load_model(workdir)
  texts = sources[:3]
  params = evaluation.seed_params(model.params, 1)
  for name in ('first', 'uniform'):
    iv = interventions.build(name)
    out = run.intervene(texts, name, seed=1, beam_size=beam_size)
    assert [x.text for x in out] == [x.text for x in run.translate(texts, beam_size, 1, intervention=iv)]
    for x in out:
      assert x.seed == 1 and x.attention.shape == (len(x.tokens), len(x.source_tokens))
      if name == 'uniform':
        want = np.full_like(x.attention, 1.0 / len(x.source_tokens))
      else:
        want = np.zeros_like(x.attention)
        want[:, 0] = 1.0
      np.testing.assert_allclose(x.attention, want, rtol=1e-6)
      ids = model.src_tokenizer.encode(x.source) + [data.EOS_ID]
      src, src_len = jnp.asarray([ids], jnp.int32), jnp.asarray([len(ids)], jnp.int32)
      alone = decoding.beam_search(
        model.cfg,
        params,
        src,
        src_len,
        beam_size=beam_size,
        max_len=evaluation.decode_length(len(ids), run.config.train.max_decode_factor),
        alpha=run.config.train.beam_alpha,
        beta=run.config.train.beam_coverage_penalty,
        intervention=iv,
      )
      n = int(alone.lengths[0, 0])
      assert x.text == model.tgt_tokenizer.decode(np.asarray(alone.tokens[0, 0, :n]).tolist())
      assert x.score == pytest.approx(float(alone.scores[0, 0]), rel=1e-5)


def test_intervene_seed_picks_the_model_and_draw_seed_the_draw(trained):
  """Two seeds, named apart: `seed` the model's parameters, `draw_seed` the counterfactual's randomness
  (Intervention.seed), in greedy and beam search alike."""
  workdir, _, sources, _ = trained
  run = attnmt.load(workdir)
  texts = sources[:3]
  for beam_size in (0, 2):
    drawn = run.intervene(texts, 'random', seed=1, beam_size=beam_size, draw_seed=5)
    same = run.translate(texts, beam_size, 1, intervention=interventions.build('random', seed=5))
    other = run.intervene(texts, 'random', seed=1, beam_size=beam_size, draw_seed=0)
    assert all(x.seed == 1 for x in drawn)
    for a, b in zip(drawn, same):
      assert a.text == b.text
      np.testing.assert_array_equal(a.attention, b.attention)
    assert any(
      a.attention.shape != b.attention.shape or not np.allclose(a.attention, b.attention) for a, b in zip(drawn, other)
    )
    # the draw's seed does not pick the model: seed 0's parameters under draw seed 5
    assert all(x.seed == 0 for x in run.intervene(texts[:1], 'random', beam_size=beam_size, draw_seed=5))


def test_translate_py_refuses_a_file_inside_the_run_with_one_line(trained, tmp_path):
  workdir = trained[0]
  (tmp_path / 'in.txt').write_text('4 2\n')
  config = os.path.join(workdir, 'config.json')
  res = subprocess.run(
    [sys.executable, '-m', 'experiments.translate', f'--run={config}', f'--input={tmp_path / "in.txt"}'],
    cwd=ROOT,
    env=dict(os.environ, JAX_PLATFORMS='cpu', PYTHONPATH=ROOT),
    capture_output=True,
    text=True,
    timeout=600,
  )
  assert res.returncode == 2 and res.stdout == ''
  assert res.stderr.strip().splitlines()[-1] == (
    f'error: {config} is a file; attnmt.load needs the run directory (the workdir train.py or sweep.py wrote), '
    f'not a file inside it: pass {workdir}'
  )


def test_faithfulness_of_a_run_per_seed_table_and_plot(trained, tmp_path):
  """analyze --interventions' computation on a 2-seed run: a value per seed for every measure, in range; the
  table shows the t interval over the 2 seeds; the plot is a PNG."""
  _, full, _, _ = trained
  chosen = interventions.parse('uniform,permute')
  result = counterfactual.analyze_run(full, chosen, max_sentences=8)
  assert result['attends'] and result['sentences'] >= 8 and result['seeds'] == [0, 1]
  for name in ('uniform', 'permute'):
    m = result['interventions'][name]
    assert set(m) == {'jsd', 'tvd', 'argmax_changed', 'bleu', 'bleu_own', 'chrf_own', 'function_kept', 'content_kept'}
    assert all(len(v) == 2 for v in m.values())
    assert all(0.0 <= x <= 1.0 for k in ('jsd', 'tvd', 'argmax_changed', 'function_kept', 'content_kept') for x in m[k])
  e, a = result['erasure'], result['agreement']
  assert len(e['changed_max']) == 2 and all(-1.0 <= x <= 1.0 for x in a['spearman'])
  table = page.counterfactual_markdown([result])
  assert "Student's t 95 % interval" in table and '| uniform | ' in table and ' [' in table
  path = figures.counterfactual_plot([result], str(tmp_path / 'f.png'))
  assert open(path, 'rb').read(8) == b'\x89PNG\r\n\x1a\n'


def test_analyze_interventions_refuses_a_bad_name_with_one_line(trained):
  workdir = trained[0]
  res = subprocess.run(
    [sys.executable, '-m', 'experiments.analyze', f'--runs={workdir}', '--interventions=uniform,shuffle'],
    cwd=ROOT,
    env=dict(os.environ, JAX_PLATFORMS='cpu'),
    capture_output=True,
    text=True,
    timeout=300,
  )
  assert res.returncode == 2, res.stderr
  assert res.stderr.strip().splitlines()[-1].startswith("error: unknown intervention 'shuffle'; valid: identity,")


def test_compare_says_which_runs_translated_other_sentences(trained, tmp_path):
  """Runs on different corpora (here synthetic data of another seed) are compared only among themselves: the
  Comparison names the groups, and its table starts with one line saying so."""
  workdir = trained[0]
  config = tiny.get_config()
  config.data.data_dir = trained[1].config.data.data_dir
  config.data.seed = 1
  config.train.num_steps = 2
  config.train.checkpoint_every = 2
  config.train.eval_every = 0
  other = str(tmp_path / 'other')
  trainer.train_and_evaluate(config, other)
  table = attnmt.compare([workdir, other])
  assert table.groups == [[workdir], [other]]
  assert table.pairs == []  # no contrast across the groups
  assert table.markdown().split('\n')[0] == (
    'Not every run translated the same test sentences (another corpus or test set): each run is compared only '
    f'with the runs of its own group; group 1: {TINY_VARIANT} ({workdir}); group 2: {TINY_VARIANT} ({other}).'
  )
  assert len(table.variants) == 2 and table.markdown().split('\n')[2].startswith('| variant |')
  alone = api.Comparison(table.results[:1], 'test')  # one set of sentences: no line about groups
  assert alone.groups == [[workdir]] and alone.markdown().startswith('| variant |')


@pytest.mark.slow
def test_explain_runs_the_papers_tests_as_the_analysis_does(trained):
  """Run.explain: the four papers' tests on the run's test split equal runner.analyze_run on the run the
  analysis loads (the same per-seed lists, one per seed), and an unknown test is one line naming the valid ones."""
  from attnmt.faithfulness import runner
  from attnmt.errors import ConfigError

  workdir, full, _, _ = trained
  run = attnmt.load(workdir)
  small = dict(max_sentences=8, adversarial_sentences=1, adversarial_steps=3, trained_steps=2, train_sentences=16)
  got = run.explain('moradi,jain_wallace', **small)
  want = runner.analyze_run(full, 'moradi,jain_wallace', **small)
  assert got['tests'] == want['tests'] and got['seeds'] == [0, 1]
  assert len(got['tests']['moradi']['shares']['uniform']['tokens']) == 2
  with pytest.raises(ConfigError, match=r'^explanation test\(s\) nonesuch: valid are moradi, serrano_smith'):
    run.explain('nonesuch')
