"""The explanation report (attnmt/faithfulness/runner.py and page.py) and its entry point (experiments/analyze.py
--explanations) on two tiny trained runs: one of score none, one additive of two seeds."""

import copy
import json
import os
import subprocess
import sys

import pytest

from attnmt.analysis import inspection
from attnmt.faithfulness import page, runner
from attnmt.errors import ConfigError, InputError
from attnmt.training import trainer
from experiments.configs import tiny

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENV = dict(os.environ, JAX_PLATFORMS='cpu', PYTHONPATH=ROOT)
SMALL = dict(max_sentences=8, adversarial_sentences=2, adversarial_steps=3, trained_steps=2, train_sentences=16)
NOT_APPLICABLE = 'score none has no attention'


@pytest.fixture(scope='module')
def runs(tmp_path_factory):
  """Run directories {'none': ..., 'additive': ...} trained 10 steps on one data directory."""
  data_dir = str(tmp_path_factory.mktemp('data'))
  dirs = {}
  for name, score, seeds in (('none', 'none', '0'), ('additive', 'additive(size=16)', '0,1')):
    config = tiny.get_config()
    config.data.data_dir = data_dir
    config.model.score = score
    config.train.seeds = seeds
    config.train.num_steps = 10
    dirs[name] = str(tmp_path_factory.mktemp(name))
    trainer.train_and_evaluate(config, dirs[name])
  return dirs


@pytest.fixture(scope='module')
def loaded(runs):
  return {name: inspection.load_run(workdir) for name, workdir in runs.items()}


@pytest.fixture(scope='module')
def analysed(loaded, tmp_path_factory):
  """Every test on both runs (Moradi with the identity too), the frozen attention of additive into none, and the
  files written from them."""
  results = [
    runner.analyze_run(loaded[name], 'all', moradi_interventions='identity,uniform,zero_max', **SMALL)
    for name in ('none', 'additive')
  ]
  frozen = [runner.frozen(loaded['additive'], loaded['none'], max_sentences=8)]
  out = tmp_path_factory.mktemp('out')
  page.write(results, str(out), frozen)
  return results, frozen, out


def per_seed_lists(tree, path=''):
  """Every list of numbers in a result's tests, by key path."""
  for key, value in tree.items():
    if isinstance(value, dict):
      yield from per_seed_lists(value, f'{path}{key}/')
    elif isinstance(value, list):
      yield f'{path}{key}', value


@pytest.mark.slow
def test_the_json_holds_one_value_per_seed_of_every_summary_and_the_settings(analysed):
  _, _, out = analysed
  doc = json.loads((out / 'explanations.json').read_text())
  assert set(doc) == {'runs', 'frozen', 'verdicts'} and doc['verdicts'] is None
  none, additive = doc['runs']
  assert additive['seeds'] == [0, 1] and additive['attends'] and additive['sentences'] >= 8
  assert set(additive['tests']) == set(runner.TESTS)
  first_seed = {k: additive['tests']['wiegreffe_pinter'].pop(k) for k in ('diagnostic', 'adversary')}
  lists = dict(per_seed_lists(additive['tests']))  # every list but the two trained tests' holds one value per seed
  assert len(lists) > 20 and all(len(v) == 2 for v in lists.values()), lists
  accuracy = first_seed['diagnostic']['accuracy']
  assert set(accuracy) == {'frozen', 'uniform', 'learned'} and all(0 <= x <= 1 for x in accuracy.values())
  assert [a['lambda'] for a in first_seed['adversary']['adversaries']] == [0.0, 0.001, 0.01, 0.1, 1.0]
  assert all(0 <= a['jsd'] <= 0.6932 and 0 <= a['tvd'] <= 1 for a in first_seed['adversary']['adversaries'])
  kept = additive['tests']['moradi']['per_sentence']['shares/uniform/tokens']
  assert (
    len(kept['sum'][0]) == additive['sentences'] and sum(kept['count'][0]) == additive['tests']['moradi']['steps'][0]
  )
  for path in ('moradi/shares/uniform/tokens', 'serrano_smith/orders/random/never_flipped', 'jain_wallace/tau_loo'):
    assert all(0 <= abs(x) <= 1 for x in lists[path]), (path, lists[path])
  orders = additive['tests']['serrano_smith']['orders']
  assert set(orders) == set(runner.ORDERS)  # all four of their rankings
  never = [min(orders[o]['never_flipped'][k] for o in orders) for k in range(2)]
  assert all(0 <= x <= n for x, n in zip(lists['serrano_smith/no_order_flips'], never))  # no order: at most any one
  assert 'no order flips %' in (out / 'explanations.md').read_text()
  adversarial = additive['settings']['jain_wallace']
  assert (adversarial['adversarial_sentences'], adversarial['adversarial_steps'], adversarial['epsilon']) == (
    2,
    3,
    0.01,
  )
  assert all(0 <= x <= 0.6932 for x in lists['jain_wallace/adversarial/jsd'])
  variance = additive['tests']['wiegreffe_pinter']['seed_variance']
  assert variance['base_seed'] == 0 and variance['steps'] > 0 and 0 <= variance['jsd_median'] <= 0.6932
  (frozen,) = doc['frozen']
  assert frozen['a'] == additive['variant'] and frozen['b'] == none['variant'] and frozen['seeds'] == [0]
  assert all(0 <= x <= 1 for x in frozen['agrees'] + frozen['agrees_uniform'])


@pytest.mark.slow
def test_a_variant_without_attention_gets_one_line_per_test_and_no_numbers(analysed):
  results, _, out = analysed
  none = results[0]
  assert not none['attends'] and none['settings'] == {} and none['seconds'] == {}
  # Wiegreffe & Pinter's own baseline is a model trained with uniform weights: none's accuracy, one per seed
  tests = {t: dict(got) for t, got in none['tests'].items()}  # the fixture's results stay as they are
  trained = tests['wiegreffe_pinter'].pop('trained_uniform_accuracy')
  assert len(trained) == len(none['seeds']) and all(0 <= x <= 1 for x in trained)
  assert tests == {t: {'not_applicable': NOT_APPLICABLE} for t in runner.TESTS}
  md = (out / 'explanations.md').read_text()
  assert md.count(f'not applicable: {NOT_APPLICABLE}') == len(runner.TESTS) - 1
  assert md.count('(trained with uniform weights)') == 1


def test_moradi_identity_preserves_every_step_and_one_seed_has_no_seed_variance(analysed, loaded):
  (_, additive), _, _ = analysed
  shares = additive['tests']['moradi']['shares']
  assert shares['identity']['tokens'] == [1.0, 1.0]
  for k in range(2):  # 'any' pools uniform and zero_max (their code's three, identity not among them)
    assert max(shares['uniform']['tokens'][k], shares['zero_max']['tokens'][k]) <= shares['any']['tokens'][k] <= 1.0
  assert 'function' not in shares['uniform']  # the shipped (Spanish) word list has no word of this German target
  assert 'no word of this target language: overall shares only' in additive['settings']['moradi']['function_words']
  one_seed = copy.copy(loaded['additive'])
  one_seed.seeds = [0]
  got = runner.analyze_run(one_seed, 'wiegreffe_pinter', **SMALL)
  assert got['tests']['wiegreffe_pinter']['seed_variance'] == {'not_measured': runner.ONE_SEED}
  assert len(got['tests']['wiegreffe_pinter']['accuracy_own']) == 1


def test_moradi_splits_function_and_content_words_when_the_list_has_target_words(loaded):
  got = runner.analyze_run(
    loaded['additive'], 'moradi', moradi_interventions='identity,uniform,zero_max', function_words={'und'}, **SMALL
  )
  shares = got['tests']['moradi']['shares']
  assert shares['identity'] == {'tokens': [1.0, 1.0], 'function': [1.0, 1.0], 'content': [1.0, 1.0]}
  assert '1 target tokens' in got['settings']['moradi']['function_words']


def test_the_markdown_names_each_paper_and_the_png_is_written(analysed):
  results, frozen, out = analysed
  md = (out / 'explanations.md').read_text()
  for citation in runner.CITATIONS.values():
    assert f'## {citation}' in md
  assert 'frozen attention' in md and 'No reference cell' in md and '"adversarial_steps": 3' in md
  assert (out / 'explanations.png').read_bytes()[:4] == b'\x89PNG'


def test_verdicts_are_one_family_over_the_declared_measures(analysed, tmp_path):
  results, frozen, _ = analysed
  other = copy.deepcopy(results[1])
  other['variant'] = other['pool'] = 'other'
  verdicts = page.contrasts([results[0], results[1], other], results[1]['variant'])
  assert verdicts['family_size'] == len(page.measures(runner.TESTS)) == 4
  assert {r['measure'] for r in verdicts['rows']} == set(page.measures('all'))
  page.write([results[0], results[1], other], str(tmp_path), frozen, verdicts)
  assert 'Verdicts: one family of 4 measures' in (tmp_path / 'explanations.md').read_text()


def test_test_names_parse_and_an_unknown_one_lists_the_valid_ones():
  assert runner.parse_tests('all') == runner.TESTS
  assert runner.parse_tests('jain_wallace,moradi') == ('moradi', 'jain_wallace')
  with pytest.raises(ConfigError, match='valid are moradi, serrano_smith, jain_wallace, wiegreffe_pinter'):
    runner.parse_tests('moradi,nonesuch')


def analyze(*args):
  return subprocess.run(
    [sys.executable, '-m', 'experiments.analyze', *args],
    cwd=ROOT,
    env=ENV,
    capture_output=True,
    text=True,
    timeout=300,
    stdin=subprocess.DEVNULL,
  )


@pytest.mark.slow
def test_the_entry_point_writes_the_report_and_refuses_an_unknown_test_in_one_line(runs, tmp_path):
  out = tmp_path / 'report'
  given = f"--runs={runs['none']},{runs['additive']}"
  done = analyze(given, '--explanations=moradi', '--explanation_sentences=8', f'--out={out}')
  assert done.returncode == 0, done.stderr[-2000:]
  doc = json.loads((out / 'explanations.json').read_text())
  assert [r['attends'] for r in doc['runs']] == [False, True]
  assert list(doc['runs'][1]['tests']) == ['moradi'] and len(doc['runs'][1]['tests']['moradi']['steps']) == 2
  assert 'Moradi, Kambhatla & Sarkar 2019' in done.stdout and (out / 'explanations.png').exists()
  refused = analyze(given, '--explanations=nonesuch', f'--out={tmp_path / "never"}')
  assert refused.returncode == 2 and not (tmp_path / 'never').exists()
  lines = [line for line in refused.stderr.splitlines() if line.startswith('error')]
  assert lines == [
    'error: explanation test(s) nonesuch: valid are moradi, serrano_smith, jain_wallace, wiegreffe_pinter, or all'
  ]


@pytest.mark.slow
def test_parts_merged_by_from_explanations_give_the_whole_and_a_variant_twice_is_refused(analysed, tmp_path):
  """An analysis run in parts (one process per core) and merged decides the same family as one analysis of every
  run: the same tables, the same verdicts; the frozen pairs come along."""
  results, frozen, _ = analysed
  other = copy.deepcopy(results[1])
  other['variant'] = other['pool'] = 'other'
  reference = results[1]['variant']
  whole = tmp_path / 'whole'
  page.write([results[0], results[1], other], str(whole), frozen, page.contrasts([*results, other], reference))
  page.write(results[:2], str(tmp_path / 'a'), frozen)
  page.write([other], str(tmp_path / 'b'))
  parts = f"--from_explanations={tmp_path / 'a' / 'explanations.json'},{tmp_path / 'b' / 'explanations.json'}"
  merged = analyze(parts, f'--baseline={reference}', f'--out={tmp_path / "merged"}')
  assert merged.returncode == 0, merged.stderr[-2000:]
  assert json.loads((tmp_path / 'merged' / 'explanations.json').read_text()) == json.loads(
    (whole / 'explanations.json').read_text()
  )
  assert (tmp_path / 'merged' / 'explanations.md').read_text() == (whole / 'explanations.md').read_text()
  twice = analyze(
    f"--from_explanations={tmp_path / 'a' / 'explanations.json'},{whole / 'explanations.json'}",
    f'--out={tmp_path / "never"}',
  )
  assert twice.returncode == 2 and not (tmp_path / 'never').exists()
  assert [line for line in twice.stderr.splitlines() if line.startswith('error')] == [
    f"error: {results[0]['variant']} is in both {tmp_path / 'a' / 'explanations.json'} and "
    f"{whole / 'explanations.json'}; give each variant once"
  ]


@pytest.mark.slow
def test_nofrozen_attention_writes_no_pairs(runs, tmp_path):
  given = f"--runs={runs['none']},{runs['additive']}"
  done = analyze(
    given,
    '--explanations=wiegreffe_pinter',
    '--explanation_sentences=8',
    '--trained_steps=2',
    '--train_sentences=16',
    '--nofrozen_attention',
    f'--out={tmp_path}',
  )
  assert done.returncode == 0, done.stderr[-2000:]
  doc = json.loads((tmp_path / 'explanations.json').read_text())
  assert doc['frozen'] == []
  trained = doc['runs'][1]['tests']['wiegreffe_pinter']  # the CLI runs the trained tests with its flags
  assert trained['diagnostic']['settings']['steps'] == 2 and len(trained['adversary']['adversaries']) == 5
  written = (tmp_path / 'explanations.md').read_text()
  assert 'Adversarially trained attention' in written and 'Non-contextual diagnostic' in written


def test_bad_names_counts_and_splits_are_one_line_before_any_work(loaded):
  for names in ('all,moradj', '', ' , ', [], 5, ['moradi', 3]):
    with pytest.raises(ConfigError, match='explanation test'):
      runner.parse_tests(names)
  assert runner.parse_tests('all,moradi') == runner.TESTS
  run = loaded['additive']
  for bad, match in (
    (dict(max_sentences='8'), "max_sentences='8': give a whole number"),
    (dict(adversarial_steps=2.5), 'adversarial_steps=2.5: give a whole number'),
    (dict(trained_steps=True), 'trained_steps=True: give a whole number'),
    (dict(epsilon=float('nan')), 'epsilon=nan: give a TVD bound between 0 and 1'),
    (dict(epsilon='0.01'), "epsilon='0.01': give a TVD bound"),
    (dict(split='dev'), "split 'dev': valid are"),
    (dict(adversarial_candidates=0), 'adversarial_candidates'),
  ):
    with pytest.raises(ConfigError, match=match):
      runner.analyze_run(run, 'moradi', **bad)


def test_parts_measured_on_other_sentences_are_refused_not_merged(analysed, tmp_path):
  results, _, _ = analysed
  other = copy.deepcopy(results[1])
  other['variant'] = 'other'
  other['test_set'] = '0' * 16  # the same count of sentences, other sentences
  with pytest.raises(InputError, match='measured on different test sentences'):
    page.contrasts([results[1], other], results[1]['variant'])
  page.write(results[:2], str(tmp_path / 'a'))
  page.write([other], str(tmp_path / 'b'))
  merged = analyze(
    f"--from_explanations={tmp_path / 'a' / 'explanations.json'},{tmp_path / 'b' / 'explanations.json'}",
    f'--out={tmp_path / "never"}',
  )
  assert merged.returncode == 2 and not (tmp_path / 'never').exists()
  (line,) = [line for line in merged.stderr.splitlines() if line.startswith('error')]
  assert 'measured on different test sentences' in line and 'other: ' in line and '0000000000000000' in line
  (tmp_path / 'c.json').write_text('{"runs": [')
  damaged = analyze(f"--from_explanations={tmp_path / 'c.json'}", f'--out={tmp_path / "never"}')
  assert damaged.returncode == 2 and not (tmp_path / 'never').exists()
  (line,) = [line for line in damaged.stderr.splitlines() if line.startswith('error')]
  assert line.startswith(f"error: {tmp_path / 'c.json'}: not a readable explanations.json")
  from experiments import analyze_faithfulness  # a file whose JSON parses and whose results do not

  doc = json.loads((tmp_path / 'a' / 'explanations.json').read_text())
  doc['runs'][0]['tests']['moradi'] = 'garbage'
  (tmp_path / 'd.json').write_text(json.dumps(doc))
  with pytest.raises(ValueError) as e:
    analyze_faithfulness.from_explanations([str(tmp_path / 'd.json')], str(tmp_path / 'never'), None)
  assert str(e.value) == (
    f"{tmp_path / 'd.json'}: {doc['runs'][0]['variant']}'s moradi holds no results (the file is damaged); write it "
    'again with analyze'
  )
  assert not (tmp_path / 'never').exists()


def test_an_empty_explanations_flag_is_refused_not_the_usual_analysis(runs, tmp_path):
  done = analyze(f"--runs={runs['additive']}", '--explanations=', f'--out={tmp_path / "never"}')
  assert done.returncode == 2 and not (tmp_path / 'never').exists()
  assert [line for line in done.stderr.splitlines() if line.startswith('error')] == [
    'error: --explanations names no test: give some of moradi, serrano_smith, jain_wallace, wiegreffe_pinter, or all'
  ]


@pytest.mark.parametrize(
  'flag, line',
  [
    ('--interventions=', 'no intervention: give some of them (e.g. uniform,permute,zero_max) or leave the flag out'),
    ('--sentences=', 'no sentence index: give test-split indices (e.g. 0,5,9), or leave it out for random ones'),
  ],
)
@pytest.mark.slow
def test_an_empty_list_flag_is_refused_not_its_default(flag, line, runs, tmp_path):
  done = analyze(f"--runs={runs['additive']}", flag, f'--out={tmp_path / "never"}')
  assert done.returncode == 2 and not (tmp_path / 'never').exists()
  assert [x for x in done.stderr.splitlines() if x.startswith('error')] == [f'error: {flag} names {line}']
