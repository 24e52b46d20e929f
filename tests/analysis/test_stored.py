"""A page's statistics recomputed from its stored per-seed translations (attnmt/analysis/stored.py and
`analyze --from_translations`): the scores are sacrebleu's on the stored texts, the contrasts are the
analysis's (the jackknife over sentences has no random seed: the same texts give the same statistics), and bad
files get one line."""

import gzip
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import sacrebleu
import scipy.stats

from attnmt.analysis import inspection, report, run_verdicts, scoring, stored
from attnmt.compare import verdicts, pair_tests
from attnmt.errors import InputError
from experiments.configs import tiny

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
  results = scoring.analyze_translations(path)
  bleu = []
  for r, v in zip(results, doc['variants']):
    bleu.append([sacrebleu.corpus_bleu(h, [doc['references']]).score for h in v['greedy']])
    assert r['greedy_bleu'] == pytest.approx(bleu[-1]) and r['seeds'] == v['seeds']
    assert r['significance']['corpus']['per_seed'] == pytest.approx(bleu[-1])
  (pair,) = results[1]['significance']['pairs']
  s = results[1]['significance']
  # A baseline (none does not attend) and length buckets: 0.01 of alpha for the bucket contrasts, 0.04 for the pair.
  assert (s['family_size'], s['level'], s['length_level']) == (1, pytest.approx(0.04), pytest.approx(0.01))
  names = [v['variant'] for v in doc['variants']]
  stats = [
    np.stack([pair_tests.sentence_statistics(h, doc['references']) for h in v['greedy']]) for v in doc['variants']
  ]
  assert pair == verdicts.compare_statistics(names, stats, names[0], level=0.04)['pairs'][0]
  # Welch's t over the sacrebleu per-seed scores, the test set's variance added: never below seeds-only Welch.
  d, se, df = np.mean(bleu[1]) - np.mean(bleu[0]), pair['se'], pair['df']
  seeds = np.var(bleu[1], ddof=1) / 3 + np.var(bleu[0], ddof=1) / 2
  assert pair['difference'] == pytest.approx(d) and se**2 >= seeds * (1 - 1e-12)
  assert pair['p_value'] == pytest.approx(2 * scipy.stats.t.sf(abs(d) / se, df))
  assert pair['p_value'] >= scipy.stats.ttest_ind(bleu[1], bleu[0], equal_var=False).pvalue * (1 - 1e-9)
  half = scipy.stats.t.ppf(1 - 0.04 / 2, df) * se  # a family of one contrast: its interval at the corpus level
  assert pair['interval'] == pytest.approx([d - half, d + half]) and pair['interval'][0] > 0
  assert pair['decision'] == 'greater' and pair['verdict'] == f'{names[1]} > {names[0]}'


def test_the_baseline_is_the_variant_without_attention_not_a_name(tmp_path):
  """A baseline is chosen by what its score declares (attends False), whatever it is called; --baseline
  (here: the analysis's `baseline`) names another one."""
  doc = _doc()
  doc['variants'][0]['variant'] = 'my_pkg.scores:Flat/bahdanau/global'
  path = _write(tmp_path / 'translations.json.gz', doc)
  results = scoring.analyze_translations(path)
  (pair,) = results[1]['significance']['pairs']
  assert pair['verdict'] == f"additive/bahdanau/global > {doc['variants'][0]['variant']}"
  assert all(r['significance']['baseline'] == doc['variants'][0]['variant'] for r in results)
  assert results[0]['significance']['by_length'][-1]['p_value'] is None  # the baseline is not tested against itself
  assert results[1]['significance']['by_length'][-1]['p_value'] is not None
  doc['variants'][0]['attends'] = True  # no variant without attention: no baseline, no length contrasts
  flat = scoring.analyze_translations(_write(tmp_path / 'b.json.gz', doc))
  assert run_verdicts.default_baseline(flat) is None and flat[1]['significance']['baseline'] is None
  # The family (every pair) does not depend on the baseline: the same test, at all of alpha.
  (same,) = flat[1]['significance']['pairs']
  assert (same['a'], same['b'], same['p_value']) == (pair['a'], pair['b'], pair['p_value'])
  assert flat[1]['significance']['length_level'] == 0.0 and same['level'] == 0.05 and pair['level'] == 0.04
  assert all(b['p_value'] is None for r in flat for b in r['significance']['by_length'])
  again = scoring.analyze_translations(path, baseline='additive/bahdanau/global')
  assert run_verdicts.default_baseline(again, 'additive/bahdanau/global') == 'additive/bahdanau/global'
  assert all(r['significance']['baseline'] == 'additive/bahdanau/global' for r in again)
  assert again[0]['significance']['by_length'][-1]['p_value'] is not None  # now the one tested against it
  assert again[1]['significance']['by_length'][-1]['p_value'] is None
  with pytest.raises(ValueError, match=r'^--baseline x is not one of the variants compared: '):
    scoring.analyze_translations(path, baseline='x')


def test_save_then_load_round_trips(tmp_path):
  doc = _doc(20)
  results = [{'variant': v['variant'], 'seeds': v['seeds'], 'attends': v['attends']} for v in doc['variants']]
  texts = [
    {'hypotheses': {'greedy': v['greedy']}, 'references': doc['references'], 'sources': doc['sources']}
    for v in doc['variants']
  ]
  path = stored.save(str(tmp_path / stored.FILE), results, texts)
  assert stored.load(path) == doc
  twice = _doc(20)
  twice['variants'][0]['seeds'] = [0, 0]  # two outputs, one seed: one model counted twice
  with pytest.raises(InputError, match=r'lists seed\(s\) \[0\] more than once; one model counted twice'):
    stored.load(_write(tmp_path / 'twice.json.gz', twice))


@pytest.mark.slow
def test_the_command_recomputes_a_page_and_refuses_bad_files(tmp_path):
  path = _write(tmp_path / 'translations.json.gz', _doc())
  out = tmp_path / 'out'
  env = dict(os.environ, JAX_PLATFORMS='cpu', PYTHONPATH=ROOT)

  def run(*args):
    cmd = [sys.executable, '-m', 'experiments.analyze', *args]
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)

  res = run(f'--from_translations={path}', f'--out={out}')
  assert res.returncode == 0, res.stderr
  assert '| pair | difference | simultaneous interval |' in res.stdout and 'Bonferroni' in res.stdout
  assert 'Holm' not in res.stdout and 'bootstrap' not in res.stdout
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


@pytest.mark.slow
def test_pair_tests_from_per_seed_scores(tmp_path):
  """--from_scores: the paired t of the per-seed scores (the seeds column numbers them alike: scipy's ttest_rel)
  with the test set held fixed, each
  contrast's interval the simultaneous one over the declared family: every pair by default, --contrasts=VARIANT
  each variant against it; --delta sets the equivalence margin."""
  none, additive, general = [6.1, 6.3, 5.9], [21.6, 22.1, 21.2], [22.7, 21.5, 22.0]
  scores = tmp_path / 'results.csv'
  scores.write_text(
    f'variant,seeds,test_bleu_per_seed,attends\nnone/bahdanau/global,0 1 2,{" ".join(map(str, none))},false\n'
    f'additive/bahdanau/global,0 1 2,{" ".join(map(str, additive))},true\n'
    f'general/bahdanau/global,0 1 2,{" ".join(map(str, general))},true\n'
  )

  def run(*flags):
    cmd = [sys.executable, '-m', 'experiments.analyze', f'--from_scores={scores}', *flags]
    env = dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)

  def rows(stdout):
    lines = [line for line in stdout.splitlines() if line.startswith('| ') and ' − ' in line]
    return {line.split('|')[1].strip(): [c.strip() for c in line.strip('|').split('|')] for line in lines}

  def expected(a, b, m, delta=0.5):
    """difference, simultaneous interval, p and adjusted p of a − b by scipy's paired t test, Bonferroni over m."""
    paired = scipy.stats.ttest_rel(a, b)
    d = np.mean(a) - np.mean(b)
    half = scipy.stats.t.ppf(1 - 0.05 / m / 2, paired.df) * d / paired.statistic
    p = paired.pvalue
    cell = lambda x: '< 0.001' if x < 0.001 else f'{x:.3f}'  # noqa: E731
    return [f'{d:+.2f}', f'[{d - half:.2f}, {d + half:.2f}]', cell(p), cell(min(1.0, p * m))]

  res = run()
  assert res.returncode == 0, res.stderr
  every = rows(res.stdout)
  assert sorted(every) == [
    'additive/bahdanau/global − none/bahdanau/global',
    'general/bahdanau/global − additive/bahdanau/global',
    'general/bahdanau/global − none/bahdanau/global',
  ]
  added = every['additive/bahdanau/global − none/bahdanau/global']
  assert added[1:5] == expected(additive, none, 3)
  assert added[6:] == ['additive/bahdanau/global > none/bahdanau/global', '–', '–']  # no plan; ASO needs 5 seeds
  close = every['general/bahdanau/global − additive/bahdanau/global']  # 0.43 apart, seeds 0.5 apart: undecided
  assert close[1:5] == expected(general, additive, 3)
  assert close[6] == 'general/bahdanau/global vs additive/bahdanau/global: undecided with 3 seeds' and close[7] != '–'
  assert 'Seeds to decide the 1 undecided contrast(s)' in res.stdout
  assert (
    'test set held fixed' in res.stdout and 'The family is every pair of the variants (3 contrast(s))' in res.stdout
  )
  declared = run('--contrasts=none/bahdanau/global', '--delta=1')
  assert declared.returncode == 0, declared.stderr
  against = rows(declared.stdout)
  assert sorted(against) == [
    'additive/bahdanau/global − none/bahdanau/global',
    'general/bahdanau/global − none/bahdanau/global',
  ]
  assert against['additive/bahdanau/global − none/bahdanau/global'][1:5] == expected(additive, none, 2)
  assert 'the declared contrasts none/bahdanau/global (2 contrast(s))' in declared.stdout
  assert 'within ±1 BLEU' in declared.stdout and 'Seeds to decide the' not in declared.stdout  # both decided
  infinite = run('--delta=inf')  # every pair would be equivalent: refused before any test
  assert infinite.returncode == 2 and infinite.stderr.strip().splitlines()[-1].startswith('error: --delta must be a ')
  scores.write_text('variant,bleu\na,1\n')
  bad = run()
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
  pooled = scoring.analyze_translations(path, pool_seeds=True)
  whole = scoring.analyze_translations(_write(tmp_path / 'whole.json.gz', doc))
  assert [r['variant'] for r in pooled] == [r['variant'] for r in whole]
  assert [r['significance'] for r in pooled] == [r['significance'] for r in whole]  # every statistic, exactly
  assert pooled[1]['seeds_as_runs'] and 'seeds_as_runs' not in whole[1]
  # the figures draw a line (BLEU by length) and a row (the seed strip) per pooled variant, not per run
  runs = scoring.analyze_translations(path)
  assert len(runs) == len(split['variants']) > len(pooled) == 2
  for results in (runs, pooled):
    labels = report.length_figure(results).axes[0].get_legend_handles_labels()[1]
    assert labels == [r['variant'] for r in results]
  paths = report.write_figures(pooled, str(tmp_path / 'figures'))
  assert [os.path.basename(p) for p in paths] == ['bleu_by_length.png', 'bleu_by_seed.png']
  assert all(open(p, 'rb').read(8) == b'\x89PNG\r\n\x1a\n' for p in paths)
  split['variants'][2]['seeds'] = [0]
  with pytest.raises(InputError, match=r'additive/bahdanau/global: seed\(s\) \[0\] appear in more than one run'):
    stored.pool_seeds(split)


def test_attends_and_pooled_name_read_the_stored_properties_else_those_of_older_runs(tmp_path):
  """A result that stores 'attends' and 'pool' is read by them alone, whatever its name says; one of a run written
  before they were stored attended, and pools by its name less a final '/seeds=k'."""
  old = {'variant': 'none/bahdanau/global/seeds=3', 'seeds': [3]}
  assert stored.attends(old) is True and stored.pooled_name(old) == 'none/bahdanau/global'
  assert stored.pooled_name({'variant': 'none/bahdanau/global'}) == 'none/bahdanau/global'
  new = {'variant': 'small/seeds=0/lr=0.1', 'pool': 'small/lr=0.1', 'attends': False, 'seeds': [0]}
  assert stored.attends(new) is False and stored.pooled_name(new) == 'small/lr=0.1'
  assert stored.pooled_name({'variant': 'a/seeds=1', 'pool': 'a/seeds=1'}) == 'a/seeds=1'  # its own: pools alone
  # Runs that store their pool are pooled by it, not by their names, and the pooled variant keeps 'attends'.
  doc = _doc()
  split = dict(doc)
  split['variants'] = [
    {'variant': f'run{s}', 'pool': 'none/bahdanau/global', 'seeds': [s], 'attends': False, 'greedy': [h]}
    for s, h in zip(doc['variants'][0]['seeds'], doc['variants'][0]['greedy'])
  ] + [{k: v for k, v in doc['variants'][1].items() if k != 'attends'}]  # an older run: attends
  assert stored.pool_seeds(split) == doc
  # save stores both properties where the run has them; a file read back pools by them.
  results = [{k: v[k] for k in ('variant', 'seeds', 'pool', 'attends') if k in v} for v in split['variants']]
  texts = [
    {'hypotheses': {'greedy': v['greedy']}, 'references': doc['references'], 'sources': doc['sources']}
    for v in split['variants']
  ]
  path = stored.save(str(tmp_path / stored.FILE), results, texts)
  saved = stored.load(path)
  assert [(stored.pooled_name(v), v['attends']) for v in saved['variants']] == [
    ('none/bahdanau/global', False),
    ('none/bahdanau/global', False),
    ('additive/bahdanau/global', True),
  ]
  assert 'pool' not in saved['variants'][2]  # the older run's is not made up from its name
  assert stored.pool_seeds(saved) == doc
  with pytest.raises(InputError, match=r'variants\[0\] \(run0\)\.pool must be a string'):
    stored.load(_write(tmp_path / 'bad.json.gz', {**saved, 'variants': [{**saved['variants'][0], 'pool': 3}]}))
  # A run's config: the pool a sweep stores in it, else (a run stored without one) its name less '/seeds=k'.
  config = tiny.get_config()
  with config.unlocked():
    config.variant = 'dot/luong/global/seeds=1/learning_rate=0.1'
    assert inspection.pool_name(config) == 'dot/luong/global/seeds=1/learning_rate=0.1'  # only a final part
    config.pool = 'dot/luong/global/learning_rate=0.1'
    assert inspection.pool_name(config) == 'dot/luong/global/learning_rate=0.1'


@pytest.mark.parametrize('page', ['luong', 'main_gpu'])
@pytest.mark.slow
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


def test_save_names_the_runs_of_another_test_set_it_leaves_out(tmp_path, capsys):
  """One file holds one test set: runs that translated other sentences than the first are left out of it, and
  a line says which and why (their rows stay in the analysis's table)."""
  doc = _doc(20)
  other = _doc(10)
  results = [{'variant': v['variant'], 'seeds': v['seeds'], 'attends': v['attends']} for v in doc['variants']]
  texts = [
    {
      'hypotheses': {'greedy': doc['variants'][0]['greedy']},
      'references': doc['references'],
      'sources': doc['sources'],
    },
    {
      'hypotheses': {'greedy': other['variants'][1]['greedy']},
      'references': other['references'],
      'sources': other['sources'],
    },
  ]
  path = stored.save(str(tmp_path / stored.FILE), results, texts)
  assert [v['variant'] for v in stored.load(path)['variants']] == ['none/bahdanau/global']
  assert capsys.readouterr().out.splitlines() == [
    f'{path} leaves out 1 of 2 runs (additive/bahdanau/global): they translated other test sentences than '
    'none/bahdanau/global and one file holds one test set; --from_translations recomputes only the others '
    '(analyse those runs apart to store theirs)'
  ]
  stored.save(path, results, [texts[0], texts[0]])  # one test set: nothing left out, nothing said
  assert capsys.readouterr().out == ''


def _reshaped(change):
  doc = _doc(5)
  change(doc)
  return doc


@pytest.mark.parametrize(
  'change, field, what',
  [
    (lambda d: d.update(variants={'a': d['variants'][0]}), 'variants', 'a list of variants'),
    (
      lambda d: d['variants'][1].pop('greedy'),
      'variants[1] (additive/bahdanau/global).greedy',
      'a list (one per seed) of lists of output strings',
    ),
    (lambda d: d.update(references='one string'), 'references', 'a list of strings, one per test sentence'),
    (lambda d: d['references'].__setitem__(2, 7), 'references', 'a list of strings, one per test sentence'),
    (lambda d: d.pop('sources'), 'sources', 'a list of strings, one per test sentence'),
    (lambda d: d['variants'].__setitem__(0, 'none'), 'variants[0]', "an object with 'variant', 'seeds' and 'greedy'"),
    (lambda d: d['variants'][0].pop('variant'), 'variants[0].variant', 'a string (the variant name)'),
    (
      lambda d: d['variants'][0].update(seeds='0 1'),
      'variants[0] (none/bahdanau/global).seeds',
      'a list of integer seeds',
    ),
    (
      lambda d: d['variants'][0]['greedy'][1].__setitem__(0, None),
      'variants[0] (none/bahdanau/global).greedy',
      'a list (one per seed) of lists of output strings',
    ),
    (lambda d: d['variants'][0].update(attends='no'), 'variants[0] (none/bahdanau/global).attends', 'true or false'),
  ],
)
def test_a_file_of_another_shape_is_refused_naming_the_field(tmp_path, change, field, what):
  path = _write(tmp_path / 'odd.json.gz', _reshaped(change))
  with pytest.raises(InputError) as e:
    stored.load(path)
  assert str(e.value) == (
    f'{path}: {field} must be {what}; this is not a translations file an analysis wrote (or it is damaged)'
  )
