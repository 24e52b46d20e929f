"""The comparison of variants is calibrated over the whole family: five variants of which four are identical
(one far below) get some wrong claim in at most 5 % of simulated experiments (within Monte Carlo error) at
K = 3 and 5, with and without sentence-by-sentence differences between the variants, and over the looks of a
design of rounds; the design the comparison assumes (same-numbered seeds correlated, seed variances 1 to 225
times apart, families of 1, 3 and 10 contrasts) holds its 5 % at K = 2, 3, 5 and 10, paired and unpaired, and
the paired contrast decides more often when the seeds correlate; an equivalence is claimed in at most 5 % of
experiments whose true difference is exactly the margin; the probability of a decision grows with the seeds. docs/results/calibration.md holds the same
checks at more experiments (experiments/calibrate.py)."""

import gzip
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import scipy.stats

from attnmt.compare import calibration as C
from attnmt.compare import verdicts, family, seed_design, sequential
from attnmt.compare import pair_tests as S
from attnmt.analysis import stored

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

EXPERIMENTS = 150
SENTENCES = 120
FAMILY = (0.0, 0.0, 0.0, 0.0, -1.0)
BOUND = family.ALPHA + 2 * np.sqrt(family.ALPHA * (1 - family.ALPHA) / EXPERIMENTS)  # 5 % plus two MC errors


def test_generator_gives_the_stated_bleu_and_seed_spread():
  (stats,) = C.simulate(np.random.default_rng(3), 32, 400, (0.0,))
  bleu = C.seed_bleu(stats)
  assert 19 < bleu.mean() < 22.5 and 0.6 < bleu.std(ddof=1) < 1.0
  # the statistics are sacrebleu's layout: lengths, then matches never above totals
  assert (stats[..., 2:6] <= stats[..., 6:10]).all() and (stats[..., 0] == stats[..., 1]).all()
  assert bleu[0] == pytest.approx(S.corpus_bleu(stats[0].sum(0)))


def test_sentence_by_sentence_differences_give_a_test_set_variance():
  """The interaction makes the variants differ on every test set while equal on average."""
  rng = np.random.default_rng(0)
  plain = [S.test_set_variance(*C.experiment(rng, 4, 200, (0.0, 0.0))[1]) for _ in range(5)]
  mixed = [S.test_set_variance(*C.experiment(rng, 4, 200, (0.0, 0.0), 0.3)[1]) for _ in range(5)]
  assert np.mean(mixed) > 10 * max(np.mean(plain), 1e-3)


@pytest.mark.parametrize('seeds,interaction', [(3, 0.0), (3, 0.3), (5, 0.0), (5, 0.3)])
@pytest.mark.slow
def test_the_family_holds_at_alpha(seeds, interaction):
  out = C.family_errors(seeds, EXPERIMENTS, FAMILY, sentences=SENTENCES, interaction_sd=interaction, seed=seeds)
  assert out['share'] <= BOUND, out


@pytest.mark.slow
def test_one_pair_at_a_time_would_not_hold():
  """The check can fail: the same experiments tested pair by pair at 0.05 each (no family) go wrong often."""
  rng = np.random.default_rng(1)
  names = [f'v{i}' for i in range(5)]
  wrong = 0
  for _ in range(60):
    bleu, jack = C.experiment(rng, 5, SENTENCES, (0.0,) * 5)
    pairs = [
      verdicts.compare_scores([names[i], names[j]], [bleu[i], bleu[j]], None, [jack[i], jack[j]], seeds=[range(5)] * 2)
      for i in range(5)
      for j in range(i + 1, 5)
    ]
    wrong += any(c['pairs'][0]['decision'] == family.GREATER for c in pairs)
  assert wrong / 60 > 0.15


@pytest.mark.slow
def test_rounds_hold_over_their_looks():
  design = sequential.Design(seeds_per_round=3, rounds=3)
  out = C.sequential_errors(design, 100, FAMILY, sentences=SENTENCES, interaction_sd=0.3, seed=3)
  assert out['share'] <= family.ALPHA + 2 * np.sqrt(0.05 * 0.95 / 100), out
  assert out['decided_by_look'] == sorted(out['decided_by_look'])
  assert 3 <= out['mean_seeds'] <= 9


def test_equivalence_at_exactly_the_margin_is_rarely_claimed():
  gap = float(C.true_differences((0.0, 0.04), SENTENCES)[1])
  out = C.family_errors(10, EXPERIMENTS, (0.04, 0.0), true_bleu=(gap, 0.0), sentences=SENTENCES, delta=gap, seed=4)
  assert out['share'] <= BOUND, out  # TOST at alpha per side: at most alpha


# Seed variances 1:225 between the variants (sd 0.1 against 1.5 BLEU), same-numbered seeds correlated 0.6
# (their sentence noise 0.3): the worst of the design the issue measured on real pages.
UNEQUAL = {
  1: seed_design.Scenario(means=(0.0, 0.0), seed_sds=(0.1, 1.5), rho=0.6, sentence_rho=0.3),
  3: seed_design.Scenario(means=(0.0,) * 3, seed_sds=(0.1, 0.5, 1.5), rho=0.6, sentence_rho=0.3),
  10: seed_design.Scenario(means=(0.0,) * 5, seed_sds=(0.1, 0.3, 0.9, 1.5, 1.5), rho=0.6, sentence_rho=0.3),
}


@pytest.mark.parametrize('contrasts,runs', [(1, 1500), (3, 800), (10, 400)])
@pytest.mark.parametrize('paired', [True, False])
@pytest.mark.slow
def test_unequal_variances_and_paired_seeds_hold_the_family_at_every_k(contrasts, runs, paired):
  bound = family.ALPHA + 2 * np.sqrt(family.ALPHA * (1 - family.ALPHA) / runs)
  for k in (2, 3, 5, 10):
    out = seed_design.design_errors(UNEQUAL[contrasts], k, runs, paired=paired, seed=10 * k + contrasts)
    assert out['share'] <= bound, (k, out)


def test_the_unequal_check_can_fail():
  """The same check of a rule that ignores the variances: identical variants tested by the two sides' pooled
  variance with 2(K - 1) df (Student's t), at 1:225 and K = 3, rank in well over 5 % of experiments."""
  rng = np.random.default_rng(8)
  scenario, wrong = UNEQUAL[1], 0
  for _ in range(1500):
    (a, b), _ = scenario.experiment(rng, 3)
    wrong += scipy.stats.ttest_ind(a, b, equal_var=True).pvalue < 0.05
  assert wrong / 1500 > 0.07


def test_paired_seeds_decide_more_often_than_unpaired():
  """rho 0.6, a true difference of one seed sd: pairing by seed gains power on the same experiments."""
  scenario = seed_design.Scenario(means=(0.45, 0.0), seed_sds=(0.45, 0.45), rho=0.6, sentence_rho=0.6)
  paired, unpaired = (
    seed_design.design_errors(scenario, 5, 600, paired=p, seed=3)['decided_share'] for p in (True, False)
  )
  assert paired > unpaired + 0.1, (paired, unpaired)


def test_rounds_hold_over_their_looks_at_unequal_variances():
  design = sequential.Design(seeds_per_round=2, rounds=4)
  out = seed_design.design_errors(UNEQUAL[3], 0, 500, design=design, seed=5)
  assert out['share'] <= family.ALPHA + 2 * np.sqrt(0.05 * 0.95 / 500), out


def test_power_grows_with_seeds():
  rates = [C.decision_rate(k, 2.0, 40, 0.05, 1.0, seed=k)['decided'] for k in (3, 10)]
  assert rates[0] < rates[1] and rates[1] > 0.6, rates


def test_real_splits_count_every_split_once():
  rng = np.random.default_rng(0)
  (stats,) = C.simulate(rng, 8, 40, (0.0,))
  out = C.splits(stats, 2, 4)
  assert out['splits'] == 35  # C(8, 4) / 2
  assert C.splits(stats, 4, 2, limit=7)['splits'] == 7  # of 105
  for row in out['rows']:
    assert not set(row['groups'][0]) & set(row['groups'][1])
  with pytest.raises(ValueError, match='cannot be split'):
    C.splits(stats, 2, 5)


@pytest.mark.slow
def test_the_command_prints_both_checks(tmp_path):
  words = 'the a cat dog sat on mat in house big small red'.split()
  rng = np.random.default_rng(1)
  refs = [' '.join(rng.choice(words, 9)) for _ in range(40)]
  seeds = [[' '.join(w if rng.random() > 0.3 else 'x' for w in r.split()) for r in refs] for _ in range(4)]
  doc = {'format': stored.FORMAT, 'references': refs, 'sources': refs, 'variants': []}
  doc['variants'] = [
    {'variant': 'additive', 'seeds': [0, 1], 'greedy': seeds[:2]},
    {'variant': 'additive', 'seeds': [2, 3], 'greedy': seeds[2:]},
  ]
  path = tmp_path / 'translations.json.gz'
  with gzip.open(path, 'wt') as f:
    json.dump(doc, f)
  cmd = [
    sys.executable,
    '-m',
    'experiments.calibrate',
    '--simulate',
    '--experiments=3',
    '--sentences=30',
    f'--translations={path}',
    '--splits=2x2',
    f'--out={tmp_path / "sim"}',
  ]
  res = subprocess.run(
    cmd, cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT), capture_output=True, text=True, timeout=300
  )
  assert res.returncode == 0, res.stderr
  assert '| 10 | yes | 30 | ' in res.stdout and '| 5 | yes | 45 | ' in res.stdout
  assert 'Real A/A: 4 seeds' in res.stdout and '| 2 x 2 | 1 | 3 | ' in res.stdout
  record = json.loads((tmp_path / 'sim' / 'calibration.json').read_text())
  assert len(record['family_errors']) == 9 and set(record['power']['decided']) == {'3', '5', '10', '20'}
  assert [r['difference'] for r in record['rounds_power']['rows']] == [0.0, 0.25, 0.5, 1.0]
  assert len(record['design_errors']['family']) == 12 and len(record['sequential']['design']) == 6
  assert '| 10 | 0.6 | paired | ' in res.stdout and 'Power of one pair (seed sd 0.45' in res.stdout
  assert (tmp_path / 'sim' / 'power.png').stat().st_size > 1000
  assert [r['shift'] for r in record['faithfulness']['rows']] == [0, 0, 0, 0.4, 0.8, 1.5]
  kept = (tmp_path / 'sim' / 'calibration.json').read_bytes()
  other = subprocess.run(  # the parts run at 3 experiments would be lost: refused, the file kept
    cmd[:4] + ['--experiments=4', '--parts=faithfulness', f'--out={tmp_path / "sim"}'],
    cwd=ROOT,
    capture_output=True,
    text=True,
    timeout=300,
  )
  assert other.returncode == 2 and 'holds parts run at --experiments=3, --sentences=30' in other.stderr, other.stderr
  assert (tmp_path / 'sim' / 'calibration.json').read_bytes() == kept
  bad = subprocess.run(
    cmd[:3] + [f'--translations={path}', '--splits=3x2'], cwd=ROOT, capture_output=True, text=True, timeout=300
  )
  assert bad.returncode == 2 and bad.stderr.strip() == 'error: --splits=3x2: 4 seeds hold at most 2 groups of 2'
  doc['variants'][1]['variant'] = 'dot'  # two variants: their seeds are not one variant's
  with gzip.open(path, 'wt') as f:
    json.dump(doc, f)
  for flag, message in (
    ('--parts=famly', 'error: --parts: unknown famly; choose from family, design,'),
    ('--parts=', 'error: --parts: unknown (no part named); choose from family, design,'),
    ('--interaction_sd=nan', 'error: --interaction_sd must be a finite number >= 0'),
  ):
    refused = subprocess.run(cmd[:4] + [flag], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert refused.returncode == 2 and refused.stderr.strip().startswith(message), refused.stderr
  (tmp_path / 'sim' / 'calibration.json').write_text('{"experiments": 3,')
  damaged = subprocess.run(
    cmd[:4] + [f'--out={tmp_path / "sim"}'], cwd=ROOT, capture_output=True, text=True, timeout=300
  )
  assert damaged.returncode == 2 and 'calibration.json cannot be read' in damaged.stderr.strip().splitlines()[-1]
  file_out = subprocess.run(  # --out a file: refused before the simulation, the file as it was
    cmd[:4] + [f'--out={tmp_path / "sim" / "calibration.json"}'], cwd=ROOT, capture_output=True, text=True, timeout=300
  )
  assert (
    file_out.returncode == 2
    and file_out.stderr.strip()
    == (
      f'error: --out {tmp_path / "sim" / "calibration.json"} is a file; pass a directory for calibration.json and '
      'power.png (created if missing)'
    )
    and 'Simulated' not in file_out.stdout
  )
  assert (tmp_path / 'sim' / 'calibration.json').read_text() == '{"experiments": 3,'
  two = subprocess.run(cmd[:3] + [f'--translations={path}'], cwd=ROOT, capture_output=True, text=True, timeout=300)
  assert two.returncode == 2 and two.stderr.strip().startswith(f'error: {path} holds 2 variants (additive, dot)')


def test_seed_pairing_by_hand():
  """Correlation and variance ratio of same-numbered seeds, over the seeds two variants share, in seed order."""
  a, b = [20.0, 21.0, 23.0, 22.0], [19.0, 20.5, 22.0, 30.0]
  rows = C.seed_pairing(['a', 'b', 'c'], [a, b[::-1], [1.0, 2.0]], [[0, 1, 2, 5], [5, 2, 1, 0], [0, 1]])
  (row,) = rows  # c shares 2 seeds only: no row
  x, y = np.array(a), np.array(b)
  assert (row['a'], row['b'], row['seeds']) == ('a', 'b', 4)
  assert row['correlation'] == pytest.approx(np.corrcoef(x, y)[0, 1])
  assert row['variance_ratio'] == pytest.approx(np.var(x - y, ddof=1) / (np.var(x, ddof=1) + np.var(y, ddof=1)))
