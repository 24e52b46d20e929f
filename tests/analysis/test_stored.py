"""A page's statistics recomputed from its stored per-seed translations (attnmt/analysis/stored.py and
`analyze --from_translations`): the scores are sacrebleu's on the stored texts, the pair test is the
analysis's, and bad files get one line."""

import gzip
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import sacrebleu
import scipy.stats

from attnmt.analysis import comparison, report, significance, stored
from attnmt.errors import InputError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WORDS = 'the a cat dog sat on mat in house big small red'.split()


def _doc(n=60):
  rng = np.random.default_rng(0)
  refs = [' '.join(rng.choice(WORDS, int(rng.integers(3, 30)))) for _ in range(n)]
  srcs = [' '.join(['w'] * len(r.split())) for r in refs]

  def noisy(p, s):
    r = np.random.default_rng(s)
    return [' '.join(w if r.random() > p else str(r.choice(WORDS)) for w in x.split()) for x in refs]

  variants = [
    {'variant': 'none/bahdanau/global', 'seeds': [0, 1], 'attends': False, 'greedy': [noisy(0.6, 1), noisy(0.62, 2)]},
    {
      'variant': 'additive/bahdanau/global',
      'seeds': [0, 1, 2],
      'attends': True,
      'greedy': [noisy(0.2, s) for s in (3, 4, 5)],
    },
  ]
  return {'format': stored.FORMAT, 'references': refs, 'sources': srcs, 'variants': variants}


def _write(path, doc):
  with gzip.open(path, 'wt', encoding='utf-8') as f:
    json.dump(doc, f)
  return str(path)


def test_statistics_from_stored_translations(tmp_path):
  doc = _doc()
  path = _write(tmp_path / 'translations.json.gz', doc)
  results = report.analyze_translations(path, n_samples=200)
  for r, v in zip(results, doc['variants']):
    want = [sacrebleu.corpus_bleu(h, [doc['references']]).score for h in v['greedy']]
    assert r['greedy_bleu'] == pytest.approx(want) and r['seeds'] == v['seeds']
    assert r['significance']['corpus']['per_seed'] == pytest.approx(want)
  (pair,) = results[1]['significance']['pairs']
  names = [v['variant'] for v in doc['variants']]
  stats = [
    np.stack([significance.sentence_statistics(h, doc['references']) for h in v['greedy']]) for v in doc['variants']
  ]
  again = comparison.compare_statistics(names, stats, names[0], 200)['pairs'][0]
  assert pair['p_value'] == again['p_value'] and pair['verdict'] == again['verdict'] == f'{names[1]} > {names[0]}'


def test_the_baseline_is_the_variant_without_attention_not_a_name(tmp_path):
  """A baseline is chosen by what its score declares (attends False), whatever it is called; --baseline
  (here: the analysis's `baseline`) names another one."""
  doc = _doc()
  doc['variants'][0]['variant'] = 'my_pkg.scores:Flat/bahdanau/global'
  path = _write(tmp_path / 'translations.json.gz', doc)
  results = report.analyze_translations(path, n_samples=200)
  (pair,) = results[1]['significance']['pairs']
  assert pair['verdict'] == f"additive/bahdanau/global > {doc['variants'][0]['variant']}"
  assert all(r['significance']['baseline'] == doc['variants'][0]['variant'] for r in results)
  doc['variants'][0]['attends'] = True  # no variant without attention: no baseline, the pair is in the other family
  results = report.analyze_translations(_write(tmp_path / 'b.json.gz', doc), n_samples=200)
  assert report.default_baseline(results) is None
  again = report.analyze_translations(path, n_samples=200, baseline='additive/bahdanau/global')
  assert report.default_baseline(again, 'additive/bahdanau/global') == 'additive/bahdanau/global'
  with pytest.raises(ValueError, match=r'^--baseline x is not one of the variants compared: '):
    report.analyze_translations(path, n_samples=200, baseline='x')


def test_save_then_load_round_trips(tmp_path):
  doc = _doc(20)
  results = [{'variant': v['variant'], 'seeds': v['seeds'], 'attends': v['attends']} for v in doc['variants']]
  texts = [
    {'hypotheses': {'greedy': v['greedy']}, 'references': doc['references'], 'sources': doc['sources']}
    for v in doc['variants']
  ]
  path = stored.save(str(tmp_path / stored.FILE), results, texts)
  assert stored.load(path) == doc


def test_the_command_recomputes_a_page_and_refuses_bad_files(tmp_path):
  path = _write(tmp_path / 'translations.json.gz', _doc())
  out = tmp_path / 'out'
  env = dict(os.environ, JAX_PLATFORMS='cpu', PYTHONPATH=ROOT)

  def run(*args):
    cmd = [sys.executable, '-m', 'experiments.analyze', *args]
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)

  res = run(f'--from_translations={path}', f'--out={out}')
  assert res.returncode == 0, res.stderr
  assert '| pair | difference |' in res.stdout and 'Holm' in res.stdout
  for name in ('analysis.md', 'analysis.json', 'bleu_by_length.png', 'bleu_by_seed.png'):
    assert os.path.getsize(out / name) > 0
  broken = doc = _doc()
  broken['variants'][1]['greedy'][2] = broken['variants'][1]['greedy'][2][:-1]  # one output short
  bad = _write(tmp_path / 'short.json.gz', doc)
  res = run(f'--from_translations={bad}')
  assert res.returncode != 0 and res.stderr.strip().splitlines()[-1].endswith(
    f'{bad}: additive/bahdanau/global seed 2 has 59 outputs for 60 references'
  )
  res = run(f'--from_translations={tmp_path / "missing.json.gz"}', '--runs=x')
  assert res.returncode != 0 and 'give one of --runs' in res.stderr.strip().splitlines()[-1]
  with pytest.raises(InputError, match='not a gzipped JSON file'):
    stored.load(str(out / 'analysis.md'))


def test_pair_tests_from_per_seed_scores(tmp_path):
  """--from_scores: Welch's t of the per-seed scores (the test set held fixed), Holm over the family."""
  scores = tmp_path / 'results.csv'
  scores.write_text(
    'variant,seeds,test_bleu_per_seed\nnone/bahdanau/global,0 1 2,6.1 6.3 5.9\n'
    'additive/bahdanau/global,0 1 2,21.6 22.1 21.2\ngeneral/bahdanau/global,0 1 2,22.7 21.5 22.0\n'
  )
  cmd = [sys.executable, '-m', 'experiments.analyze', f'--from_scores={scores}']
  res = subprocess.run(
    cmd, cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT), capture_output=True, text=True, timeout=300
  )
  assert res.returncode == 0, res.stderr
  row = next(line for line in res.stdout.splitlines() if line.startswith('| additive/bahdanau/global − none/'))
  p = scipy.stats.ttest_ind([21.6, 22.1, 21.2], [6.1, 6.3, 5.9], equal_var=False).pvalue
  cells = [c.strip() for c in row.strip('|').split('|')]
  assert (
    cells[3] == ('< 0.001' if p < 0.001 else f'{p:.3f}')
    and cells[5] == 'additive/bahdanau/global > none/bahdanau/global'
  )
  assert (
    'test set held fixed' in res.stdout and 'primary family is each variant against none/bahdanau/global' in res.stdout
  )
  scores.write_text('variant,bleu\na,1\n')
  bad = subprocess.run(
    cmd, cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT), capture_output=True, text=True, timeout=300
  )
  assert bad.returncode == 2 and 'columns variant and test_bleu_per_seed' in bad.stderr.strip().splitlines()[-1]


def test_single_seed_runs_pool_into_one_variant(tmp_path):
  """train.seeds as a sweep axis gives one run per seed ('…/seeds=k'); pooled, they are one variant whose
  statistics equal those of the same outputs stored as one multi-seed variant. A seed twice is refused."""
  doc = _doc()
  split = dict(doc)
  split['variants'] = [doc['variants'][0]] + [
    {'variant': f'additive/bahdanau/global/seeds={s}', 'seeds': [s], 'attends': True, 'greedy': [h]}
    for s, h in zip(doc['variants'][1]['seeds'], doc['variants'][1]['greedy'])
  ]
  assert stored.pool_seeds(split) == doc
  path = _write(tmp_path / 'split.json.gz', split)
  pooled = report.analyze_translations(path, n_samples=200, pool_seeds=True)
  whole = report.analyze_translations(_write(tmp_path / 'whole.json.gz', doc), n_samples=200)
  assert [r['variant'] for r in pooled] == [r['variant'] for r in whole]
  assert pooled[1]['significance']['pairs'][0]['p_value'] == whole[1]['significance']['pairs'][0]['p_value']
  split['variants'][2]['seeds'] = [0]
  with pytest.raises(InputError, match=r'additive/bahdanau/global: seed\(s\) \[0\] appear in more than one run'):
    stored.pool_seeds(split)


@pytest.mark.parametrize('page', ['luong', 'main_gpu'])
def test_a_published_pages_stored_translations_give_its_per_seed_bleu(page):
  """docs/results/<page>/translations.json.gz holds what the page's analysis.md was computed from: each variant's
  per-seed greedy BLEU, recomputed with sacrebleu from the stored outputs, is the one its table prints."""
  doc = stored.load(os.path.join(ROOT, 'docs', 'results', page, 'translations.json.gz'))
  with open(os.path.join(ROOT, 'docs', 'results', page, 'analysis.md'), encoding='utf-8') as f:
    rows = {line.split('|')[1].strip(): line.split('|')[3].strip() for line in f if line.startswith('| ')}
  assert len(doc['variants']) >= 5
  metric = sacrebleu.metrics.BLEU(references=[doc['references']])  # the references' n-grams counted once
  for v in doc['variants']:
    bleu = [metric.corpus_score(h, None).score for h in v['greedy']]
    assert rows[v['variant']] == ' / '.join(f'{b:.2f}' for b in bleu), v['variant']
