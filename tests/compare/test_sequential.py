"""Seeds until decided: the design's schedule and spending, a design that may not change, looks replayed from
stored translations with earlier decisions kept, and the sweep's rounds end to end on the tiny config."""

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import scipy.stats

from attnmt.compare import verdicts, family, sequential
from attnmt.errors import ConfigError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WORDS = 'the a cat dog sat on mat in house big small red'.split()


def test_design_schedule_and_levels():
  d = sequential.Design(seeds_per_round=5, rounds=4)
  assert d.schedule == [5, 10, 15, 20] and d.round_seeds(2) == [10, 11, 12, 13, 14]
  assert d.levels == pytest.approx(family.look_levels([5, 10, 15, 20])) and sum(d.levels) == pytest.approx(0.05)
  for bad in (dict(seeds_per_round=1, rounds=3), dict(seeds_per_round=5, rounds=0)):
    with pytest.raises(ConfigError, match='at least 2 seeds per round'):
      sequential.Design(**bad)
  with pytest.raises(ConfigError, match='spending'):
    sequential.Design(5, 2, spending='linear')
  for bad in (0.0, float('inf'), float('nan'), '0.5'):
    with pytest.raises(ConfigError, match='sweep.delta must be a '):
      sequential.Design(5, 2, delta=bad)


def test_boundaries_are_gsdesigns_published_ones():
  """Lan-DeMets O'Brien-Fleming spending, one-sided 0.025 (gsDesign's sfLDOF): z = 2.9626, 1.9686 at two equal
  looks, 3.7103, 2.5114, 1.9930 at three; Pocock-type two-sided 0.05 at two (sfLDPocock): 2.1570, 2.2009. The first look's level is its spending increment; the later ones exceed theirs."""
  z = lambda levels, sides: [float(scipy.stats.norm.isf(x / sides)) for x in levels]  # noqa: E731
  assert z(family.nominal_levels([5, 10], alpha=0.025, sides=1), 1) == pytest.approx([2.9626, 1.9686], abs=2e-4)
  assert z(family.nominal_levels([1, 2, 3], alpha=0.025, sides=1), 1) == pytest.approx(
    [3.7103, 2.5114, 1.9930], abs=2e-4
  )
  assert z(family.nominal_levels([5, 10], 'pocock'), 2) == pytest.approx([2.1570, 2.2009], abs=2e-4)
  levels, spent = family.nominal_levels([5, 10, 15, 20]), family.look_levels([5, 10, 15, 20])
  assert levels[0] == pytest.approx(spent[0]) and all(a > b for a, b in zip(levels[1:], spent[1:]))
  # the looks' joint distribution, simulated: any of them crosses with probability alpha
  rng = np.random.default_rng(0)
  z_looks = np.cumsum(rng.normal(size=(200_000, 4)), 1) / np.sqrt(np.arange(1, 5))
  crossed = (np.abs(z_looks) >= scipy.stats.norm.isf(np.array(levels) / 2)).any(1).mean()
  assert crossed == pytest.approx(0.05, abs=0.0015)


def test_a_continuation_starts_past_the_seeds_already_seen(tmp_path):
  d = sequential.Design(seeds_per_round=5, rounds=2, first_seed=10)
  assert d.round_seeds(0) == [10, 11, 12, 13, 14] and d.round_seeds(1) == [15, 16, 17, 18, 19]
  with pytest.raises(ConfigError, match='first_seed must be >= 0'):
    sequential.Design(5, 2, first_seed=-1)
  # a design.json written before first_seed existed reads as first_seed 0
  (tmp_path / 'design.json').write_text(
    json.dumps({k: v for k, v in vars(sequential.Design(3, 2)).items() if k != 'first_seed'})
  )
  sequential.declare(str(tmp_path), sequential.Design(3, 2))


def test_a_damaged_or_missing_design_is_refused_never_replaced(tmp_path):
  (tmp_path / 'design.json').write_text('{"rounds": 2, "seeds_per')
  with pytest.raises(ConfigError, match=r'design.json cannot be read as a design .*restore it, or use a new --workdir'):
    sequential.declare(str(tmp_path), sequential.Design(3, 2))
  assert (tmp_path / 'design.json').read_text() == '{"rounds": 2, "seeds_per'  # left as it was
  (tmp_path / 'design.json').unlink()
  (tmp_path / 'round-1').mkdir()
  with pytest.raises(ConfigError, match=r'holds rounds \(round-1\) but no design.json'):
    sequential.declare(str(tmp_path), sequential.Design(3, 2))
  assert not (tmp_path / 'design.json').exists()
  # a stored design whose numbers are not a design's (a margin of NaN, one round of one seed) is damaged too
  for held in ('{"seeds_per_round": 3, "rounds": 2, "delta": NaN}', '{"seeds_per_round": 1, "rounds": 2}'):
    (tmp_path / 'design.json').write_text(held)
    with pytest.raises(ConfigError, match=r'design.json cannot be read as a design \(.*\); .*restore it'):
      sequential.declare(str(tmp_path), sequential.Design(3, 2))
    assert (tmp_path / 'design.json').read_text() == held


def test_a_design_is_not_declared_over_a_sweeps_results(tmp_path):
  """A plain sweep's workdir (its results and run directories) is not a fresh design's: its seeds were seen."""
  (tmp_path / 'additive-bahdanau-global').mkdir()
  (tmp_path / 'additive-bahdanau-global' / 'config.json').write_text('{}')
  (tmp_path / 'results.json').write_text('[]')
  with pytest.raises(ConfigError, match=r"holds a sweep's results \(additive-bahdanau-global, results.json\)"):
    sequential.declare(str(tmp_path), sequential.Design(3, 2))
  assert not (tmp_path / 'design.json').exists()
  made = tmp_path / 'made'  # a folder made beforehand, holding what no sweep writes, is fresh
  made.mkdir()
  (made / 'notes.txt').write_text('mine')
  sequential.declare(str(made), sequential.Design(3, 2))
  assert (made / 'design.json').exists()


def test_train_seeds_beside_rounds_is_refused_in_every_spelling_absl_reads(monkeypatch, tmp_path):
  from experiments import rounds
  from experiments.configs import tiny

  config = tiny.get_config()
  for given in ('--config.train.seeds=7', '-config.train.seeds=7', '--config.train.seeds'):
    monkeypatch.setattr(sys, 'argv', ['experiments.sweep', given])
    with pytest.raises(ConfigError, match=f'^{given}: a rounds sweep trains the seeds its design names'):
      rounds._check(config, str(tmp_path), sequential.Design(2, 2))


def test_a_design_cannot_change_once_declared(tmp_path):
  d = sequential.Design(seeds_per_round=3, rounds=2)
  sequential.declare(str(tmp_path), d)
  sequential.declare(str(tmp_path), d)  # the same design again: fine
  with pytest.raises(ConfigError, match=r'changed: delta, rounds'):
    sequential.declare(str(tmp_path), sequential.Design(seeds_per_round=3, rounds=3, delta=1.0))


def _round(rng, refs, quality):
  """One round's outputs: per variant, 3 seeds whose words are kept with probability quality[v] (± seed noise)."""

  def noisy(p):
    return [' '.join(w if rng.random() < p else 'x' for w in r.split()) for r in refs]

  return {
    'names': [f'v{i}' for i in range(len(quality))],
    'references': refs,
    'greedy': [[noisy(q + rng.normal(0, 0.01)) for _ in range(3)] for q in quality],
  }


def test_looks_pool_rounds_and_keep_earlier_decisions():
  rng = np.random.default_rng(0)
  refs = [' '.join(rng.choice(WORDS, 8)) for _ in range(60)]
  rounds = [_round(rng, refs, (0.9, 0.3, 0.88)) for _ in range(3)]
  design = sequential.Design(seeds_per_round=3, rounds=3, spending='pocock', delta=2.0)
  looks = sequential.replay(design, rounds)
  assert [look['seeds'] for look in looks] == [3, 6, 9]
  ranking, equivalence = design.boundaries(3)  # 3 contrasts, each spending 0.05 / 3 over the looks
  assert [look['level'] for look in looks] == pytest.approx([3 * x for x in ranking])
  assert [look['comparison']['equivalence_level'] for look in looks] == pytest.approx([3 * x for x in equivalence])
  for look in looks:
    assert all(v['seeds'] == look['seeds'] for v in look['comparison']['variants'])
  first = {(p['a'], p['b']): p for p in looks[0]['comparison']['pairs']}
  decided = {k: p for k, p in first.items() if p['decision'] in (family.GREATER, family.EQUIVALENT)}
  assert decided  # v0 and v2 far above v1 from the first look
  for key, p in decided.items():
    later = next(q for q in looks[-1]['comparison']['pairs'] if (q['a'], q['b']) == key)
    assert later == p and later['look'] == 1  # kept as the first look made it
  # a look is the comparison of the pooled seeds at that look's level
  pooled = [sum((r['greedy'][v] for r in rounds[:2]), []) for v in range(3)]
  levels = dict(level=looks[1]['level'], equivalence_level=looks[1]['comparison']['equivalence_level'])
  again = verdicts.compare(rounds[0]['names'], pooled, refs, contrasts='all', delta=2.0, seeds=[range(6)] * 3, **levels)
  fresh = [p for p in looks[1]['comparison']['pairs'] if (p['a'], p['b']) not in decided]
  for p in fresh:
    want = next(q for q in again['pairs'] if (q['a'], q['b']) == (p['a'], p['b']))
    assert p['interval'] == pytest.approx(want['interval']) and p['decision'] == want['decision']
  # rounds on other sentences cannot be pooled
  other = dict(rounds[1], references=refs[::-1])
  with pytest.raises(ConfigError, match='other variants or sentences'):
    sequential.replay(design, [rounds[0], other])


def _sweep(workdir, *extra):
  flags = [
    '--config=experiments/configs/tiny.py',
    f'--workdir={workdir}',
    '--config.sweep.scores=none,additive',
    '--config.train.num_steps=10',
    '--config.train.eval_every=10',
    '--config.train.checkpoint_every=10',
    '--config.sweep.rounds=2',
    '--config.sweep.seeds_per_round=2',
    '--config.sweep.delta=0.05',  # paired seeds of 10 steps agree closely: a wider margin decides at look 1
    '--config.sweep.num_heatmaps=0',
    '--config.sweep.beam_size=0',
    '--config.sweep.processes=1',
    f'--config.data.data_dir={workdir}/data',
    *extra,
  ]
  env = dict(os.environ, JAX_PLATFORMS='cpu', PYTHONPATH=ROOT)
  return subprocess.run(
    [sys.executable, '-m', 'experiments.sweep', *flags], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
  )


@pytest.mark.slow
def test_rounds_end_to_end(tmp_path):
  """Two rounds of 2 seeds on the tiny config (10 steps: every variant scores about the same): each round a
  sweep of its own seeds, the looks in rounds.md and rounds.json, the design refused if it changes, and a
  finished round reused, not trained again."""
  work = tmp_path / 'decided'
  first = _sweep(work)
  assert first.returncode == 0, first.stderr[-3000:]
  for r, seeds in ((1, [0, 1]), (2, [2, 3])):
    assert json.loads((work / f'round-{r}' / 'round.json').read_text()) == {'seeds': seeds}
    results = json.loads((work / f'round-{r}' / 'additive-bahdanau-global' / 'results.json').read_text())
    assert results['seeds'] == seeds
  looks = json.loads((work / 'rounds.json').read_text())
  assert [look['seeds'] for look in looks] == [2, 4]
  page = (work / 'rounds.md').read_text()
  assert '## Look 2: 4 seeds per variant' in page and 'Design, declared before round 1' in page
  assert json.loads((work / 'design.json').read_text())['rounds'] == 2
  again = _sweep(work)
  assert again.returncode == 0 and again.stdout.count('finished earlier') == 2
  changed = _sweep(work, '--config.sweep.delta=1.0')
  assert changed.returncode == 2 and 'another design (changed: delta' in changed.stderr
  # the design binds what its rounds trained: another learning rate is refused, naming it, before anything runs
  bound = (work / 'design.json').read_text()
  assert json.loads(bound)['training']['train']['learning_rate'] == 0.003  # the tiny config's
  other = _sweep(work, '--config.train.learning_rate=0.02')
  assert other.returncode == 2 and 'its rounds trained with other settings (train.learning_rate 0.003 -> 0.02' in (
    other.stderr
  )
  refused = {
    '--config.train.seeds=7': '--config.train.seeds=7: a rounds sweep trains the seeds its design names',
    '--config.sweep.analyze=false': "sweep.analyze=false: the rounds' looks read each round's translations",
  }
  for flag, line in refused.items():
    res = _sweep(work, flag)
    assert res.returncode == 2 and f'error: {line}' in res.stderr, res.stderr[-2000:]
  assert (work / 'design.json').read_text() == bound and 'round-3' not in os.listdir(work)
  # a refused command on a fresh folder writes nothing, not even the design that would block the real one
  for flag in ('--config.sweep.report_only=true', '--config.train.learning_rate=nan'):
    fresh = tmp_path / f'fresh{flag.split("=")[0][-5:]}'
    res = _sweep(fresh, flag)
    assert res.returncode == 2 and res.stderr.strip().splitlines()[-1].startswith('error: '), res.stderr[-2000:]
    assert not fresh.exists() or not os.listdir(fresh), os.listdir(fresh)
  # a results page keeps the design and the rounds' translations only: report_only replays the same looks
  page = tmp_path / 'page'
  page.mkdir()
  shutil.copy(work / 'design.json', page)
  for r in (1, 2):
    (page / f'round-{r}' / 'analysis').mkdir(parents=True)
    shutil.copy(work / f'round-{r}' / 'round.json', page / f'round-{r}')
    shutil.copy(work / f'round-{r}' / 'analysis' / 'translations.json.gz', page / f'round-{r}' / 'analysis')
  replayed = _sweep(page, '--config.sweep.report_only=true')
  assert replayed.returncode == 0, replayed.stderr[-3000:]
  assert json.loads((page / 'rounds.json').read_text()) == looks
  assert not (page / 'round-1' / 'additive-bahdanau-global').exists()  # nothing trained
