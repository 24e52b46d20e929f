"""The experiment entry points as a user runs them: train, curves, analyse; a sweep; vmapped seeds (kill and resume:
tests/training/test_trainer_faults.py)."""

import functools
import json
import os
import signal
import subprocess
import sys
import time

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

import attnmt
from compiling import FUSION_EMITTERS

from attnmt.errors import ConfigError
from attnmt.training import checkpoints, guards, trainer, train_step
from attnmt.training import results as run_results
from attnmt.training import seeds as seed_axis
from attnmt.model import forms, toy, windows
from attnmt.model.config import ModelConfig

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TINY = 'experiments/configs/tiny.py'


def run_module(module, *flags, timeout=300, own_cache=None, **extra_env):
  """Runs `python -m module flags` from the repository root; returns the completed process. With `own_cache`
  (a folder), the command runs without the tests' JAX_COMPILATION_CACHE_DIR and with XDG_CACHE_HOME there,
  as a user's command would."""
  env = dict(os.environ, JAX_PLATFORMS='cpu', PYTHONPATH=ROOT, **extra_env)
  if own_cache is not None:
    env.pop('JAX_COMPILATION_CACHE_DIR', None)
    env['XDG_CACHE_HOME'] = str(own_cache)
  return subprocess.run(
    [sys.executable, '-m', module, *flags], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
  )


@pytest.fixture(scope='module')
def data_dir(tmp_path_factory):
  return str(tmp_path_factory.mktemp('data'))


def train_flags(workdir, data_dir, steps=120):
  return [
    f'--config={TINY}',
    f'--workdir={workdir}',
    f'--config.data.data_dir={data_dir}',
    f'--config.train.num_steps={steps}',
    '--config.train.checkpoint_every=10',
    '--config.train.eval_every=60',
  ]


@pytest.mark.slow
def test_train_then_curves_and_analysis_reload_the_run(tmp_path, data_dir):
  ref = run_module('experiments.train', *train_flags(tmp_path / 'ref', data_dir))
  assert ref.returncode == 0, ref.stderr[-3000:]
  assert 'test BLEU' in ref.stdout
  # Its validation records carry the training time, and experiments.curves draws them.
  from attnmt.analysis import curves

  records = curves.validation_records(str(tmp_path / 'ref'))
  assert [r['step'] for r in records] == [60, 120]
  assert 0 < records[0]['train_seconds'] < records[1]['train_seconds']
  assert curves.bleu_at(records, records[0]['train_seconds'] / 60) == pytest.approx(records[0]['bleu'][0])
  assert np.isnan(curves.bleu_at(records, records[0]['train_seconds'] / 120))
  drawn = run_module(
    'experiments.curves',
    f'--runs={tmp_path / "ref"}',
    '--labels=tiny',
    '--minutes=100',
    f'--out={tmp_path / "curves.png"}',
  )
  assert drawn.returncode == 0, drawn.stderr[-3000:]
  assert (tmp_path / 'curves.png').stat().st_size > 10000
  row = next(line for line in drawn.stdout.splitlines() if line.startswith('| tiny'))
  assert row.split(' | ')[1:3] == [f"{records[1]['bleu'][0]:.2f}", '120']  # BLEU at 100 min, last step
  workdir = tmp_path / 'ref'  # killed and resumed runs: tests/training/test_trainer_faults.py
  # Relative run paths work too (the README's commands use them).
  monkey_cwd = os.getcwd()
  try:
    os.chdir(tmp_path)
    assert checkpoints.restore_params('ref', 'best')[2] > 0
  finally:
    os.chdir(monkey_cwd)
  # Reload the run from its directory alone and analyse it.
  out = tmp_path / 'analysis'
  an = run_module('experiments.analyze', f'--runs={workdir}', f'--out={out}', '--beam_size=2', '--sentences=0,3')
  assert an.returncode == 0, an.stderr[-3000:]
  run_out = out / 'additive-bahdanau-global'
  assert (run_out / 'heatmap_0.png').stat().st_size > 5000 and (run_out / 'heatmap_3.png').exists()
  assert (out / 'bleu_by_length.png').exists()
  result = json.loads((run_out / 'analysis.json').read_text())
  assert len(result['greedy_bleu']) == 1 and len(result['beam_bleu']) == 1
  assert 'aer' in result and result['aer'][0] < 1.0  # the synthetic task has gold alignments; some links found
  significance = result['significance']  # one run, one seed: an interval from the sentences, no baseline, no pairs
  assert significance['baseline'] is None and significance['corpus']['sentences'] == 40
  assert significance['corpus']['per_seed'] == pytest.approx(result['greedy_bleu'])
  assert significance['corpus']['sd'] is None and significance['corpus']['ci'] is None and not significance['pairs']
  lo, hi = significance['corpus']['interval']
  assert lo <= significance['corpus']['mean'] <= hi and not significance['ranked']
  assert [b['bucket'] for b in significance['by_length']] == [b['bucket'] for b in result['greedy_bleu_by_length']]
  attention = result['attention']
  assert -1.0 <= attention['monotonicity'] <= 1.0 and attention['sentences'] + attention['skipped'] == 40
  assert 0.0 <= attention['normalized'] <= 1.0 + 1e-6 and 0.0 <= result['greedy_repetition'][0] <= 1.0
  assert 'monotonicity' in an.stdout and '95% interval' in an.stdout and 'variants are not ranked' in an.stdout
  assert ' ± 0.00' not in an.stdout and (out / 'analysis.md').read_text().startswith('| variant | seeds |')
  assert json.loads((out / 'analysis.json').read_text())[0]['significance'] == significance
  lines = (run_out / 'translations.greedy.txt').read_text().splitlines()
  assert len(lines) == 40  # every test sentence translated (synthetic_eval_size)
  assert (run_out / 'translations.greedy.seed0.txt').read_text().splitlines() == lines
  assert (run_out / 'translations.beam.seed0.txt').exists() and (out / 'bleu_by_seed.png').stat().st_size > 5000
  # Translate from a file, with attention bars; an empty line is refused with a one-line error.
  # A user's command caches what it compiles under $XDG_CACHE_HOME/attnmt/jax (ATTNMT_JAX_CACHE=0: nowhere).
  (tmp_path / 'in.txt').write_text('4 2\n1 0 7\n')
  tr = run_module(
    'experiments.translate',
    f'--run={workdir}',
    f'--input={tmp_path / "in.txt"}',
    '--show_attention',
    own_cache=tmp_path / 'cache',
    JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS='0',  # every program, however fast this machine compiles it
  )
  assert tr.returncode == 0, tr.stderr[-3000:]
  assert any((tmp_path / 'cache' / 'attnmt' / 'jax').iterdir())
  out_lines = tr.stdout.splitlines()
  assert sum('<- ' in line for line in out_lines) >= 2 and out_lines[1].strip().startswith('| 4 2 </s>')
  (tmp_path / 'bad.txt').write_text('4 2\n\n7\n')  # an empty line before a sentence
  bad = run_module(
    'experiments.translate',
    f'--run={workdir}',
    f'--input={tmp_path / "bad.txt"}',
    own_cache=tmp_path / 'off',
    ATTNMT_JAX_CACHE='0',
  )
  assert bad.returncode == 2 and 'input line 2 is empty' in bad.stderr.strip().splitlines()[-1]
  assert not (tmp_path / 'off').exists()


@pytest.mark.slow
def test_sweep_of_two_variants_and_two_seeds_writes_its_table_and_never_reuses_stale_results(tmp_path, data_dir):
  flags = [
    f'--config={TINY}',
    f'--workdir={tmp_path}',
    f'--config.data.data_dir={data_dir}',
    '--config.train.num_steps=20',
    '--config.train.seeds=0,1',
    '--config.sweep.scores=none,dot',
    '--config.model.decoder_hidden_size=32',
  ]
  res = run_module('experiments.sweep', *flags, '--config.sweep.beam_size=0', '--config.sweep.num_heatmaps=0')
  assert res.returncode == 0, res.stderr[-3000:]
  assert 'work while the last runs trained failed' not in res.stderr  # the analysis of a run that finished first
  table = (tmp_path / 'results.md').read_text().splitlines()
  assert len(table) == 6 and table[2].startswith('| none/') and table[3].startswith('| dot/')
  assert table[0].startswith('| variant | seeds | test BLEU per seed | mean | sd | 95% CI (t, seeds) |')
  for line, name in zip(table[2:4], ('none-bahdanau-global', 'dot-bahdanau-global')):
    bleu = json.loads((tmp_path / name / 'results.json').read_text())['test_bleu']
    cells = [c.strip() for c in line.strip('|').split('|')]
    assert cells[2] == f'{bleu[0]:.2f} / {bleu[1]:.2f}' and cells[3] == f'{np.mean(bleu):.2f}'
    assert cells[4] == f'{np.std(bleu, ddof=1):.2f}' and cells[5].startswith('[')
  assert "Student's t interval" in table[5]
  csv = (tmp_path / 'results.csv').read_text().splitlines()
  assert len(csv) == 3 and csv[1].split(',')[1] == '0 1' and len(csv[1].split(',')[2].split()) == 2
  assert (tmp_path / 'results_seeds.png').stat().st_size > 5000
  for name in ('none-bahdanau-global', 'dot-bahdanau-global'):
    r = json.loads((tmp_path / name / 'results.json').read_text())
    assert r['seeds'] == [0, 1] and len(r['test_bleu']) == 2 and r['test_perplexity'][0] > 1.0
  # The analysis prints per-seed scores, t intervals, the pair table (difference, simultaneous interval, p, the
  # adjusted p's, verdict, seeds to decide) and, under an undecided pair, the seeds that would decide it.
  out = res.stdout
  assert '| variant | seeds | test BLEU per seed | mean | sd | 95% CI (t, seeds) |' in out
  assert (
    '| pair | difference | simultaneous interval | p | adjusted p (≠ 0) | adjusted p (within ±δ) | verdict | '
    'seeds to decide |'
  ) in out
  assert 'the paired t over the same-numbered seeds (K − 1 df' in out and '(Bonferroni: ' in out
  assert "with the test set's variance" in out
  assert 'The family is every pair of the variants (1 contrast(s))' in out and '2 seed(s) per variant' in out
  assert not any(old in out for old in ('Holm', 'bootstrap', 'not distinguishable'))
  pair = next(line for line in out.splitlines() if line.startswith('| ') and ' − ' in line.split('|')[1])
  cells = [c.strip() for c in pair.strip('|').split('|')]
  a, b = cells[0].split(' − ')  # the higher mean first
  assert {a, b} == {'dot/bahdanau/global', 'none/bahdanau/global'} and cells[1].startswith('+')
  if cells[6] == f'{a} vs {b}: undecided with 2 seeds':
    assert cells[7] != '–' and 'Seeds to decide the 1 undecided contrast(s)' in out
  else:  # decided: A > B (perhaps by less than the margin) or equivalent within ±0.5; nothing to plan
    assert cells[6] in (f'{a} > {b}', f'{a} > {b} (by less than 0.5)', f'{a} ≈ {b} (equivalent within ±0.5)'), cells
    assert cells[7] == '–' and 'Seeds to decide the' not in out

  # The same sweep again reuses both variants; a changed setting is refused, naming it, before anything runs.
  flags.append('--config.sweep.analyze=false')
  again = run_module('experiments.sweep', *flags)
  assert again.returncode == 0 and again.stdout.count('finished earlier with this config') == 2, again.stderr[-2000:]
  before = (tmp_path / 'results.md').read_text()
  # an option of a component: the same names (one value swept), another run
  changed = run_module('experiments.sweep', *flags, '--config.sweep.query_timings=bahdanau(deep_output_size=8)')
  assert changed.returncode == 2, changed.stderr[-2000:]
  line = changed.stderr.strip().splitlines()[-1]
  assert 'none-bahdanau-global holds a run with a different config (differs in model.query_timing)' in line
  assert 'use another --workdir for this sweep' in line and '===' not in changed.stdout
  assert (tmp_path / 'results.md').read_text() == before


@pytest.mark.parametrize(
  'extra,message',
  [
    (['--config.sweep.scores=addtive'], "unknown model.score 'addtive'; valid: none, additive"),
    (['--config.sweep.scores=none', '--config.sweep.windows=local_m'], 'no valid variant among the swept values'),
    (
      ['--config.sweep.query_timings=luong(input_feeding=ture)'],
      "model.query_timing luong.input_feeding must be true or false, got 'ture'",
    ),
    (['--config.sweep.axes=model.windw=local_m,local_p'], "sweep axis 'model.windw' names no config setting"),
    (['--config.sweep.axes=model.window'], "sweep.axes entry 'model.window' is not key=value1,value2"),
  ],
)
@pytest.mark.slow
def test_sweeps_that_cannot_run_write_nothing(extra, message, tmp_path, data_dir):
  (tmp_path / 'results.md').write_text('an earlier table\n')
  res = run_module(
    'experiments.sweep', f'--config={TINY}', f'--workdir={tmp_path}', f'--config.data.data_dir={data_dir}', *extra
  )
  assert res.returncode == 2 and message in res.stderr.strip().splitlines()[-1], res.stderr[-2000:]
  assert os.listdir(tmp_path) == ['results.md'] and (tmp_path / 'results.md').read_text() == 'an earlier table\n'


def test_sweep_needs_a_workdir(data_dir):
  res = run_module('experiments.sweep', f'--config={TINY}', f'--config.data.data_dir={data_dir}')
  assert res.returncode != 0 and "Flag --workdir must have a value other than None" in res.stderr


def test_sweep_reports_the_combinations_it_skips():
  from experiments import sweep_plan
  from experiments.configs import tiny

  config = tiny.get_config()
  config.sweep.scores = 'none,dot'
  config.sweep.windows = 'global,local_m'
  config.model.decoder_hidden_size = 48  # dot needs 32 (= 2 x 16): refused with the reason
  keep, refused = sweep_plan.variants(config)
  assert [name for name, _ in keep] == ['none/bahdanau/global']
  reasons = ' '.join(why for _, why in refused)
  assert len(refused) == 3 and "score 'dot' needs the query size" in reasons and "score 'none' has no" in reasons


def test_sweep_axes_over_any_key_name_every_run_by_its_values():
  from experiments import sweep_plan
  from experiments.configs import tiny

  config = tiny.get_config()
  config.sweep.scores = 'additive,general'
  config.sweep.query_timings = 'bahdanau(deep_output_size=16),luong,luong(input_feeding=false)'
  config.sweep.axes = 'model.window=local_m(size=2),local_m(size=4); train.learning_rate=1e-3'
  keep, _ = sweep_plan.variants(config)
  names = [name for name, _ in keep]
  # a value with options is split at commas outside parentheses; a name shows the options that differ
  assert len(names) == 2 * 3 * 2 == len(set(names))
  assert names[0] == 'additive/bahdanau/local_m(size=2)/learning_rate=0.001'
  assert 'general/luong(input_feeding=true)/local_m(size=4)/learning_rate=0.001' in names
  run = dict(keep)['general/luong(input_feeding=false)/local_m(size=4)/learning_rate=0.001']
  assert windows.build(run.model).size == 4 and forms.build(run.model).input_feeding is False
  assert run.model.window == ModelConfig(window='local_m(size=4)').window and run.train.learning_rate == 1e-3
  assert run.variant == 'general/luong(input_feeding=false)/local_m(size=4)/learning_rate=0.001' and 'sweep' not in run
  assert run_results.variant_name(run) == run.variant
  config.sweep.axes = 'model.window=local_m(size=2),local_m(size=two)'
  with pytest.raises(ValueError, match=r"^model.window local_m.size must be an integer >= 1, got 'two'$"):
    sweep_plan.variants(config)
  config.sweep.axes = 'seed=1,2'
  with pytest.raises(ValueError, match="sweep axis 'seed' is not a model, data or train setting"):
    sweep_plan.variants(config)


def test_seeds_trained_as_runs_draw_tensorboard_heatmaps_in_their_first_seeds_run_only():
  """As a run of several seeds draws its TensorBoard heatmaps with its first seed, a sweep over train.seeds draws
  them in each pooled variant's first run (its first seed) only; without a seeds axis every run keeps them."""
  from experiments import sweep_plan
  from experiments.configs import tiny

  config = tiny.get_config()
  config.train.tensorboard_heatmaps = 3
  config.sweep.scores = 'none,additive'
  keep, _ = sweep_plan.variants(config)
  assert [run.train.tensorboard_heatmaps for _, run in keep] == [3, 3]
  config.sweep.axes = 'train.seeds=4,1,2'
  keep, _ = sweep_plan.variants(config)
  drawn = {name: run.train.tensorboard_heatmaps for name, run in keep}
  assert drawn == {
    'none/bahdanau/global/seeds=4': 3,
    'none/bahdanau/global/seeds=1': 0,
    'none/bahdanau/global/seeds=2': 0,
    'additive/bahdanau/global/seeds=4': 3,
    'additive/bahdanau/global/seeds=1': 0,
    'additive/bahdanau/global/seeds=2': 0,
  }


def test_the_former_sweep_input_feeding_reads_as_luongs_option():
  """sweep.input_feeding, the former shorthand (deliberately the compatibility path): luong reads its values as its
  option input_feeding; bahdanau, which has no such option, is one variant whatever the value."""
  from experiments import sweep_plan
  from experiments.configs import tiny

  config = tiny.get_config()
  config.sweep.scores = 'additive(size=16)'
  config.sweep.query_timings = 'bahdanau(deep_output_size=16),luong'
  config.sweep.input_feeding = 'true,false'
  keep, _ = sweep_plan.variants(config)
  assert [name for name, _ in keep] == [
    'additive/bahdanau/global',
    'additive/luong(input_feeding=true)/global',
    'additive/luong(input_feeding=false)/global',
  ]
  runs = dict(keep)
  assert forms.build(runs['additive/luong(input_feeding=false)/global'].model).input_feeding is False


@pytest.mark.slow
def test_vmapped_seeds_give_the_losses_of_seeds_run_one_by_one():
  cfg = ModelConfig(
    source_vocab_size=14,
    target_vocab_size=14,
    embed_size=16,
    encoder_hidden_size=16,
    decoder_hidden_size=32,
    score='additive(size=16)',
    query_timing='bahdanau(deep_output_size=16)',
    dropout=0.1,
  )
  init, step = seed_axis.seed_functions(cfg, train_step.make_optimizer(3e-3))
  seeds = [3, 7]
  rng = {s: np.random.default_rng(s) for s in seeds}
  batches = [[toy.reverse_batch(rng[s], 8, 10, np.ones(6) / 6) for _ in range(5)] for s in seeds]
  together = init(seeds)
  losses_together = []
  for i in range(5):
    together, m = step(
      together, {k: jnp.asarray(v) for k, v in seed_axis.stack_batches([batches[0][i], batches[1][i]]).items()}
    )
    losses_together.append(np.asarray(m['loss']))
  # One seed runs the plain guarded step on the squeezed arrays (no vmap over an axis of 1): bitwise that step.
  # Both compile with the fusion emitters: XLA's older emitter, which the suite uses, fuses the squeeze into
  # the first products and rounds some of them differently.
  plain = jax.jit(
    guards.guard_step(functools.partial(train_step.train_step, cfg, train_step.make_optimizer(3e-3)), False)
  )
  first = {k: jnp.asarray(v) for k, v in batches[0][0].items()}
  state, batch = init([seeds[0]]), {k: v[None] for k, v in first.items()}
  one, m_one = step.lower(state, batch).compile(compiler_options=FUSION_EMITTERS)(state, batch)
  state = jax.tree.map(lambda x: x[0], init([seeds[0]]))
  ref, m_ref = plain.lower(state, first).compile(compiler_options=FUSION_EMITTERS)(state, first)
  jax.tree.map(
    lambda a, b: np.testing.assert_array_equal(a[0], b), (one.params, m_one['loss']), (ref.params, m_ref['loss'])
  )
  for j, s in enumerate(seeds):
    alone = init([s])
    for i in range(5):
      alone, m = step(alone, {k: jnp.asarray(v)[None] for k, v in batches[j][i].items()})
      np.testing.assert_allclose(np.asarray(m['loss'])[0], losses_together[i][j], rtol=1e-5)
    # Parameters agree to float tolerance as Adam sees it: its near-sign update (about lr per step) turns
    # last-bit differences of a near-zero gradient (batched and unbatched reductions are ordered
    # differently) into ~1e-5 absolute after 5 steps of lr 3e-3.
    jax.tree.map(
      lambda a, b: np.testing.assert_allclose(a[0], b[j], rtol=1e-4, atol=5e-5), alone.params, together.params
    )
  assert not np.allclose(losses_together[-1][0], losses_together[-1][1])  # the seeds really differ


def test_stack_batches_pads_widths_and_rows():
  a = toy.encode_pairs(np.array([[4, 5, 6]]), np.array([3]))
  b = toy.encode_pairs(np.array([[4, 5, 6, 7, 8], [5, 5, 5, 5, 5]]), np.array([5, 2]))
  s = seed_axis.stack_batches([a, b])
  assert s['src'].shape == (2, 2, 6) and s['tgt_in'].shape == (2, 2, 6)
  np.testing.assert_array_equal(s['src_len'][0], [4, 0])  # the padded row counts for nothing
  np.testing.assert_array_equal(s['src'][0, 0], [4, 5, 6, 2, 0, 0])


@pytest.mark.slow
def test_a_run_loads_and_translates_from_its_directory_alone(tmp_path):
  """config.json holds the complete model config (vocabulary sizes included) and <workdir>/vocab the
  tokenizers: with the corpus deleted, load_model and translate.py still work, and build nothing."""
  import shutil
  from attnmt.analysis import inspection
  from experiments.configs import tiny

  config = tiny.get_config()
  config.data.data_dir = str(tmp_path / 'data')
  config.train.num_steps = 10
  workdir = str(tmp_path / 'run')
  trainer.train_and_evaluate(config, workdir)
  saved = json.loads((tmp_path / 'run' / 'config.json').read_text())['model']
  shutil.rmtree(tmp_path / 'data')
  run = inspection.load_model(workdir)
  assert saved['target_vocab_size'] == run.cfg.target_vocab_size == run.tgt_tokenizer.vocab_size
  assert run.cfg == ModelConfig.from_dict(saved) and run.step == 10
  (tmp_path / 'in.txt').write_text('4 2 7\n')
  res = run_module('experiments.translate', f'--run={workdir}', f'--input={tmp_path / "in.txt"}', '--beam_size=2')
  assert res.returncode == 0 and len(res.stdout.strip().splitlines()) == 1, res.stderr[-2000:]
  assert not (tmp_path / 'data').exists()


def test_alignment_error_rate_hand_worked():
  """Och & Ney 2003: AER = 1 - (|A & S| + |A & P|) / (|A| + |S|), summed over the corpus."""
  from attnmt.analysis.inspection import alignment_error_rate

  sure = [{(0, 0), (1, 1)}, {(0, 0)}]
  possible = [{(0, 0), (1, 1), (2, 1)}, {(0, 0), (1, 0)}]
  predicted = [{(0, 0), (2, 1)}, {(1, 0), (1, 1)}]
  # A & S: 1 + 0 = 1; A & P: 2 + 1 = 3; |A| + |S| = 4 + 3 = 7  ->  1 - 4/7
  assert alignment_error_rate(predicted, sure, possible) == pytest.approx(3 / 7)
  assert alignment_error_rate(sure, sure) == 0.0
  assert alignment_error_rate([{(5, 5)}], [{(0, 0)}]) == 1.0


def test_sweep_cases_are_a_union_of_grids_and_the_luong_grid_is_table_4():
  from experiments import sweep_plan
  from experiments.configs import luong, tiny

  config = tiny.get_config()
  config.sweep.scores = 'dot'
  config.sweep.cases = 'model.score=dot,general|model.score=general;model.window=local_m,local_p|model.score=general'
  names = [name for name, _ in sweep_plan.variants(config)[0]]
  # general/global appears in two cases: one variant
  assert names == [
    'dot/bahdanau/global',
    'general/bahdanau/global',
    'general/bahdanau/local_m',
    'general/bahdanau/local_p',
  ]
  config.sweep.cases = 'model.score=dot||model.score=general'
  with pytest.raises(ValueError, match='sweep.cases has an empty case'):
    sweep_plan.variants(config)
  keep, refused = sweep_plan.variants(luong.get_config())
  assert not refused and [name for name, _ in keep] == [
    'location/luong/global',
    'dot/luong/global',
    'general/luong/global',
    'concat/luong/global',
    'none/luong/global',
    'dot/luong/local_m',
    'dot/luong/local_p',
    'general/luong/local_m',
    'general/luong/local_p',
    'additive/bahdanau/global',
  ]
  assert all(run.train.seeds == '0,1,2' and run.train.num_steps == 2200 for _, run in keep)


def test_shard_of():
  from experiments import sweep_plan

  assert sweep_plan.shard_of('', 5) is None and sweep_plan.shard_of('1/3', 5) == (1, 3)
  assert sweep_plan.shard_of('auto', 5) == 'auto'
  for bad in ('3/3', '-1/2', 'a/2', '1', '1/0', 'Auto'):
    with pytest.raises(ValueError, match='is not i/n with 0 <= i < n'):
      sweep_plan.shard_of(bad, 5)


@pytest.mark.slow
def test_two_concurrent_shards_share_a_workdir_then_report_only_merges_them(tmp_path, data_dir):
  """Two processes at once on one sweep directory (and one fresh data cache), a fixed shard and an `auto` one:
  each variant is trained once, neither process fails; the unsharded run with sweep.report_only trains nothing
  and writes the tables."""
  fresh_data = tmp_path / 'data'
  flags = [
    f'--config={TINY}',
    f'--workdir={tmp_path / "sweep"}',
    f'--config.data.data_dir={fresh_data}',
    '--config.train.num_steps=10',
    '--config.train.seeds=0,1',
    '--config.sweep.scores=none,additive(size=16),general',  # tiny's additive
    '--config.sweep.analyze=false',
  ]
  env = dict(os.environ, JAX_PLATFORMS='cpu', PYTHONPATH=ROOT)
  procs = [
    subprocess.Popen(
      [sys.executable, '-m', 'experiments.sweep', *flags, f'--config.sweep.shard={shard}'],
      cwd=ROOT,
      env=env,
      stdout=subprocess.PIPE,
      stderr=subprocess.PIPE,
      text=True,
    )
    for shard in ('0/2', 'auto')
  ]
  outs = [p.communicate(timeout=600) for p in procs]
  for p, (out, err) in zip(procs, outs):
    assert p.returncode == 0, err[-3000:]
  assert 'shard 0/2: 2 variant(s): none/bahdanau/global, general/bahdanau/global' in outs[0][0]
  # Every variant was trained by exactly one of the two (the other skipped it, or found it finished).
  names = ('none/bahdanau/global', 'additive/bahdanau/global', 'general/bahdanau/global')
  trained = [[n for n in names if f'{n}: 2 seed(s) on' in out] for out, _ in outs]
  assert sorted(trained[0] + trained[1]) == sorted(names), trained
  assert 'additive/bahdanau/global' in trained[1]  # shard 0/2 never takes it
  assert not (tmp_path / 'sweep' / 'results.md').exists()  # shards write no tables
  partial = run_module(
    'experiments.sweep',
    *flags,
    '--config.sweep.scores=none,additive(size=16),general,dot',
    '--config.sweep.report_only=true',
  )
  assert partial.returncode == 0, partial.stderr[-3000:]
  assert 'not finished (left out): dot/bahdanau/global' in partial.stdout and '===' not in partial.stdout
  table = (tmp_path / 'sweep' / 'results.md').read_text().splitlines()
  assert [line.split('|')[1].strip() for line in table[2:5]] == [
    'none/bahdanau/global',
    'additive/bahdanau/global',
    'general/bahdanau/global',
  ]
  assert not (tmp_path / 'sweep' / 'dot-bahdanau-global').exists()
  merged = run_module('experiments.sweep', *flags, '--config.sweep.report_only=true')
  assert merged.returncode == 0 and 'reporting 3 finished variant(s) of 3' in merged.stdout, merged.stderr[-2000:]


def test_sweep_processes_plan():
  from experiments import cores

  assert cores.plan('3', unfinished=2) == 2 and cores.plan(1, unfinished=5) == 1
  assert cores.plan('auto', unfinished=1) == 1
  assert cores.plan('auto', unfinished=9) == min(len(os.sched_getaffinity(0)), 9)  # the CPU backend here
  for bad in ('0', 'two', '-1'):
    with pytest.raises(ValueError, match=f"sweep.processes '{bad}' is neither auto nor a positive integer"):
      cores.plan(bad, unfinished=2)


def _children(pid: int) -> list[int]:
  """The PIDs whose parent is `pid`, from /proc (field 4 of /proc/<pid>/stat, after the command's parentheses)."""
  out = []
  for entry in os.listdir('/proc'):
    if entry.isdigit():
      try:
        with open(f'/proc/{entry}/stat') as f:
          fields = f.read().rsplit(')', 1)[1].split()
      except OSError:  # the process ended while the list was read
        continue
      if int(fields[1]) == pid:
        out.append(int(entry))
  return sorted(out)


def _gone(pid: int) -> bool:
  """Whether `pid` has exited (absent, or a zombie its parent has not yet waited for)."""
  try:
    with open(f'/proc/{pid}/stat') as f:
      return f.read().rsplit(')', 1)[1].split()[0] == 'Z'
  except OSError:
    return True


@pytest.mark.slow
def test_a_per_core_child_killed_ends_the_sweep_with_one_line_and_the_same_command_resumes(tmp_path, data_dir):
  """sweep.processes=2: two single-threaded children, pinned, share the variants, each child's lines carrying
  its core. The child training `additive` is SIGKILLed after the other child has finished `none` and ended:
  the parent says which core's process ended and how to resume, and exits with its status; the same command
  resumes the killed variant from its checkpoint and the parent writes the table of both. The kill is ordered
  with SIGSTOP, so the outcome does not depend on timing."""
  flags = [
    f'--config={TINY}',
    f'--workdir={tmp_path}',
    f'--config.data.data_dir={data_dir}',
    '--config.train.num_steps=100',  # every 10 a checkpoint: neither child can finish before both have one
    '--config.train.eval_every=0',
    '--config.sweep.scores=none,additive(size=16)',  # tiny's additive
    '--config.sweep.analyze=false',
    '--config.sweep.processes=2',
  ]
  env = dict(os.environ, JAX_PLATFORMS='cpu', PYTHONPATH=ROOT)
  parent = subprocess.Popen(
    [sys.executable, '-m', 'experiments.sweep', *flags],
    cwd=ROOT,
    env=env,
    stdout=subprocess.PIPE,
    stderr=subprocess.PIPE,
    text=True,
  )
  none, additive = tmp_path / 'none-bahdanau-global', tmp_path / 'additive-bahdanau-global'
  deadline = time.monotonic() + 240
  while not (trainer.has_checkpoint(str(none)) and trainer.has_checkpoint(str(additive))):
    assert parent.poll() is None and time.monotonic() < deadline, 'no checkpoint in both variants'
    time.sleep(0.2)
  children = _children(parent.pid)
  assert 1 <= len(children) <= 2, children
  for child in children:  # frozen while the holder of `additive` is found
    os.kill(child, signal.SIGSTOP)
  assert not (additive / 'results.json').exists(), 'additive finished before the kill: raise train.num_steps'
  victim = json.loads((additive / '.lock-train').read_text())['pid']  # the child that holds the variant
  assert victim in children, (victim, children)
  # The child of `none` may already have finished it and ended (tiny's `none` compiles and trains faster than
  # `additive`); if it is still alive, it finishes `none`, finds `additive` held by a live process, and ends.
  for other in [c for c in children if c != victim]:
    os.kill(other, signal.SIGCONT)
    while not _gone(other):
      assert time.monotonic() < deadline + 240, 'the other child did not end'
      time.sleep(0.2)
  os.kill(victim, signal.SIGKILL)
  out, err = parent.communicate(timeout=300)
  last = err.strip().splitlines()[-1]
  assert parent.returncode == 137, err[-2000:]
  assert 'training on 2 cores' in out
  trained = [line.split(']')[0] for line in out.splitlines() if ': 1 seed(s) on' in line]
  assert len(trained) == 2 and all(t.startswith('[core ') for t in trained), out[-3000:]
  assert 'when every shard has finished' not in out  # the parent reports; the children say nothing of it
  assert last.startswith('sweep: the process on core ') and 'ended with status 137' in last, last
  assert last.endswith('finished variants and checkpoints are kept: run the same command again to resume')
  assert (none / 'results.json').exists() and not (additive / 'results.json').exists()
  again = run_module('experiments.sweep', *flags)
  assert again.returncode == 0, again.stderr[-3000:]
  assert 'Resumed ' in again.stdout and 'finished earlier with this config' in again.stdout
  table = (tmp_path / 'results.md').read_text().splitlines()
  assert [line.split('|')[1].strip() for line in table[2:4]] == ['none/bahdanau/global', 'additive/bahdanau/global']


def test_a_killed_childs_variant_finished_by_the_other_child_lets_the_sweep_report(monkeypatch, tmp_path, capsys):
  """When an auto shard took over the variant of a child that died and finished it, the parent names the dead
  child's core and status in one line and writes the tables (exit 0); when a variant is left, it exits with
  the child's status and says how to resume; when the user stopped the sweep, it stops."""
  from experiments import cores, sweep, sweep_report

  reported, events = [], []
  monkeypatch.setattr(sweep_report, 'write', lambda config, root, rows, dirs, corpora, ahead: reported.append(rows))
  # the parent prepares the unfinished runs' corpus (on every core) before the per-core processes start
  monkeypatch.setattr(sweep.data, 'prepare_once', lambda cfg, corpora: events.append(('prepare', cfg['name'])))
  runs = [
    ('none/bahdanau/global', str(tmp_path / 'a'), ml_collections.ConfigDict({'data': {'name': 'a'}})),
    ('additive/bahdanau/global', str(tmp_path / 'b'), ml_collections.ConfigDict({'data': {'name': 'b'}})),
  ]
  config = None  # read by _report only
  for failed, left, exit_status in (
    ([(1, 137)], False, None),
    ([(1, 137)], True, 137),
    ([(0, 130), (1, 130)], False, 130),
  ):
    monkeypatch.setattr(
      cores, 'run_children', lambda args, n, while_waiting, failed=failed: events.append('children') or failed
    )
    events.clear()
    monkeypatch.setattr(
      sweep_report,
      'finished',
      lambda workdir, run, left=left: None if left and workdir.endswith('b') else {'bleu': 1.0},
    )
    reported.clear()
    unfinished = [
      run for _, workdir, run in runs if sweep_report.finished(workdir, run) is None
    ]  # as _sweep passes them
    if exit_status is None:
      sweep._on_cores(config, str(tmp_path), runs, 2, unfinished)
      assert reported == [[{'bleu': 1.0}, {'bleu': 1.0}]]
    else:
      with pytest.raises(SystemExit) as stop:
        sweep._on_cores(config, str(tmp_path), runs, 2, unfinished)
      assert stop.value.code == exit_status and reported == []
    assert events == ([('prepare', 'b')] if left else []) + ['children']  # b is unfinished when left
    line = capsys.readouterr().err.strip().splitlines()[-1]
    expected = {
      None: 'the process on core 1 ended with status 137 (its lines above start [core 1]); the other process(es) '
      'finished its variant from its last checkpoint, so the sweep goes on',
      137: 'the process on core 1 ended with status 137 (its lines above start [core 1]); finished variants and '
      'checkpoints are kept: run the same command again to resume',
      130: 'stopped by a signal (its lines above start [core 0]); finished variants and checkpoints are kept: run '
      'the same command again to resume',
    }[exit_status]
    assert line == 'sweep: ' + expected


def test_work_while_waiting_runs_on_the_core_of_the_first_child_to_end(capsys):
  """cores.run_children's `while_waiting`: called once the first child has ended while another still runs, pinned
  to the ended child's core, then the parent's cores are restored; its error is one line and the waiting goes on.
  Children that have all ended call nothing."""
  from experiments import cores

  usable = sorted(os.sched_getaffinity(0))
  if len(usable) < 2:
    pytest.skip('needs two usable cores')
  seen = []

  def work(running):
    seen.append((os.sched_getaffinity(0), running(), running))
    raise OSError('disk full')

  quick, slow = subprocess.Popen(['true']), subprocess.Popen(['sleep', '30'])
  try:
    cores._on_idle_core([(usable[0], slow), (usable[1], quick)], work, poll_s=0.05)
    assert slow.poll() is None  # it did not wait for the slow child
  finally:
    slow.kill()
    slow.wait()
  assert [(cores_, still) for cores_, still, _ in seen] == [({usable[1]}, True)]
  assert sorted(os.sched_getaffinity(0)) == usable
  assert not seen[0][2]()  # every child has ended
  assert capsys.readouterr().err.strip() == (
    'sweep: work while the last runs trained failed (OSError: disk full); it is done after them'
  )
  cores._on_idle_core([(usable[0], slow), (usable[1], quick)], work)
  assert len(seen) == 1


def test_a_damaged_results_json_is_named(tmp_path):
  from experiments import sweep_report
  from experiments.configs import tiny

  run = tiny.get_config()
  del run['sweep']
  checkpoints.save_config(str(tmp_path), run)
  (tmp_path / 'results.json').write_text('')  # e.g. a disk that filled while it was written
  with pytest.raises(ValueError, match=r"results.json is damaged .*delete it and run the sweep again"):
    sweep_report.finished(str(tmp_path), run)
  good = {'variant': 'x', 'seeds': [0, 1], 'test_bleu': [1.0, 2.0], 'test_chrf': [3.0, 4.0]}
  good |= {'test_perplexity': [5.0, 6.0], 'parameters': 10, 'tokens_per_s_per_seed': 1.5, 'train_seconds': 2.0}
  (tmp_path / 'results.json').write_text(json.dumps(good))  # chrF++ missing: a run that predates it
  assert sweep_report.finished(str(tmp_path), run) == good
  for broken, problem in (
    ([good], 'a JSON list, not an object'),
    ({**good, 'seeds': 2}, "no list of 'seeds'"),
    ({**good, 'test_bleu': [1.0]}, "'test_bleu' is not a list of one value per seed"),
    ({**good, 'test_chrf': [1.0, 'x']}, "'test_chrf' holds a value that is not a finite number"),
    ({**good, 'test_bleu': [1.0, float('nan')]}, "'test_bleu' holds a value that is not a finite number"),
    ({k: v for k, v in good.items() if k != 'train_seconds'}, "'train_seconds' is not a number"),
  ):
    (tmp_path / 'results.json').write_text(json.dumps(broken))
    with pytest.raises(ValueError) as e:
      sweep_report.finished(str(tmp_path), run)
    assert str(e.value) == (
      f'{tmp_path}/results.json is not the results a training run writes ({problem}); delete it and run the '
      'sweep again: the variant resumes from its checkpoint'
    )


def test_auto_seeds_are_two_on_a_cpu_and_five_on_an_accelerator():
  from experiments import cores
  from experiments.configs import main_ablation

  assert main_ablation.get_config().train.seeds == 'auto'
  assert cores.auto_seeds('cpu') == '0,1' and cores.auto_seeds('gpu') == cores.auto_seeds('tpu') == '0,1,2,3,4'
  with pytest.raises(ConfigError, match="'auto' is resolved by a sweep"):
    seed_axis.parse_seeds('auto')


def test_starting_a_child_from_a_jax_process_prints_no_fork_warning():
  """JAX warns at every fork of a process that imported it; the sweep's children only exec a new Python, so
  cores.fork_quietly drops that warning (it reached the main job's stderr), and only that one."""
  import warnings

  from experiments import cores

  jnp.ones(2).block_until_ready()  # JAX's backend is up: its at-fork hook is registered
  with warnings.catch_warnings(record=True) as seen:
    warnings.simplefilter('always')
    subprocess.run([sys.executable, '-c', 'pass'], preexec_fn=lambda: None, check=True)
  assert any('os.fork() was called' in str(w.message) for w in seen)  # the warning this is about
  with warnings.catch_warnings(record=True) as seen:
    warnings.simplefilter('always')
    with cores.fork_quietly():
      subprocess.run([sys.executable, '-c', 'pass'], preexec_fn=lambda: None, check=True)
      warnings.warn('another warning', RuntimeWarning)
  assert [str(w.message) for w in seen] == ['another warning']


def test_auto_seeds_on_a_cpu_are_a_run_per_seed_pooled_as_one_variant():
  """On a CPU, train.seeds=auto becomes a train.seeds axis (a run per seed, which the per-core processes take in
  turn), pooled by the analysis into one variant per score; an accelerator's seeds stay vmapped; a sweep that
  already sweeps the seeds keeps its axis."""
  from experiments import sweep_plan
  from experiments.configs import main_ablation

  config = main_ablation.get_config()
  line = sweep_plan.resolve_auto_seeds(config, 'cpu')
  assert line == 'train.seeds=auto on cpu: seeds 0,1, a run per seed (sweep.axes gains train.seeds=0,1)'
  keep, _ = sweep_plan.variants(config)
  assert [name for name, _ in keep] == [
    f'{score}/bahdanau/global/seeds={s}' for score in ('none', 'additive', 'general') for s in (0, 1)
  ]
  assert [run.pool for _, run in keep] == [
    f'{score}/bahdanau/global' for score in ('none', 'additive', 'general') for _ in (0, 1)
  ]
  assert [run.train.seeds for _, run in keep] == ['0', '1'] * 3
  runs = [(name, None, run) for name, run in keep]  # the per-core processes take them seed by seed
  assert [name for name, _, _ in sweep_plan.seed_major(runs)] == [
    f'{score}/bahdanau/global/seeds={s}' for s in (0, 1) for score in ('none', 'additive', 'general')
  ]
  config = main_ablation.get_config()
  assert sweep_plan.resolve_auto_seeds(config, 'gpu') == 'train.seeds=auto on gpu: seeds 0,1,2,3,4 (vmapped)'
  assert config.train.seeds == '0,1,2,3,4' and not config.sweep.axes
  config = main_ablation.get_config()
  config.sweep.axes = 'train.seeds=3,4'
  for backend in ('cpu', 'gpu'):  # the axis names the seeds; the line says so, not auto's 0,1 (vmapped)
    line = sweep_plan.resolve_auto_seeds(config, backend)
    assert line == "train.seeds=auto beside the sweep's train.seeds axis: the axis names the seeds (3,4)"
  assert config.sweep.axes == 'train.seeds=3,4' and [run.train.seeds for _, run in sweep_plan.variants(config)[0]][
    :2
  ] == [
    '3',
    '4',
  ]


def _report_shows_the_analysis(out, variants):
  """report.html under `out` shows analysis.md's variants, table rows and contrasts, in a real browser: the
  pooled variants with their seeds, not a "variant" per run."""
  from browser import browser_or_skip
  from selenium.webdriver.common.by import By

  lines = (out / 'analysis.md').read_text().splitlines()
  cells = [[c.strip() for c in line.split('|')[1:-1]] for line in lines if line.startswith('| ')]
  want_rows = [c for c in cells if c[0] in variants]
  want_pairs = [c for c in cells if ' − ' in c[0]]
  browser = browser_or_skip()
  try:
    browser.get('file://' + str(out / 'report.html'))
    got_rows = [
      [td.text for td in r.find_elements(By.TAG_NAME, 'td')]
      for r in browser.find_elements(By.CSS_SELECTOR, '#results tbody tr')
    ]
    got_pairs = [
      [td.text for td in r.find_elements(By.TAG_NAME, 'td')]
      for r in browser.find_elements(By.CSS_SELECTOR, '#pairs-table tbody tr')
    ]
    strips = [g.get_attribute('data-variant') for g in browser.find_elements(By.CSS_SELECTOR, '#seed-svg g.strip')]
  finally:
    browser.quit()
  assert [r[0] for r in got_rows] == variants and got_rows == want_rows, (got_rows, want_rows)
  assert got_pairs == want_pairs and len(got_pairs) == len(variants) * (len(variants) - 1) // 2, (got_pairs, want_pairs)
  assert sorted(strips) == sorted(variants)


@pytest.mark.slow
def test_analyze_pools_runs_trained_a_seed_each(tmp_path, data_dir, monkeypatch):
  """Runs of a train.seeds axis (the main job on a CPU): the sweep's report.html shows its analysis.md, one row per
  variant; analysed again with --runs --pool_seeds: analysis.md has one row
  per variant with both seeds, as the same translations pooled by --from_translations --pool_seeds give it; the
  translations file keeps every run apart. Without --pool_seeds every run is a variant of one seed."""
  flags = [
    f'--config={TINY}',
    f'--workdir={tmp_path}',
    f'--config.data.data_dir={data_dir}',
    '--config.train.num_steps=20',
    '--config.train.eval_every=0',
    '--config.sweep.scores=none,additive(size=16)',
    '--config.sweep.axes=train.seeds=0,1',
    '--config.sweep.beam_size=0',
    '--config.sweep.num_heatmaps=0',
    '--config.sweep.processes=1',
  ]
  res = run_module('experiments.sweep', *flags)
  assert res.returncode == 0, res.stderr[-3000:]
  # the sweep's own analysis (as ./launch.sh main writes it): its page shows its analysis.md's pooled variants
  _report_shows_the_analysis(tmp_path / 'analysis', ['none/bahdanau/global', 'additive/bahdanau/global'])
  runs = ','.join(str(tmp_path / f'{v}-bahdanau-global-seeds={s}') for v in ('none', 'additive') for s in (0, 1))
  common = [f'--runs={runs}', '--beam_size=0', '--num_heatmaps=0', '--report_sentences=0']
  pooled = run_module(
    'experiments.analyze', *common, '--num_heatmaps=1', f'--out={tmp_path / "pooled"}', '--pool_seeds'
  )
  assert pooled.returncode == 0, pooled.stderr[-3000:]
  # heatmaps of each variant's first run only, as a run of two seeds draws them for its first seed
  drawn = sorted(p.parent.name for p in (tmp_path / 'pooled').glob('*/heatmap_*.png'))
  assert drawn == [f'{v}-bahdanau-global-seeds=0' for v in ('additive', 'none')], drawn
  table = (tmp_path / 'pooled' / 'analysis.md').read_text()
  rows = [
    line.split('|')[1:3] for line in table.splitlines() if line.startswith('| none/') or line.startswith('| additive/')
  ]
  assert [(v.strip(), k.strip()) for v, k in rows[:2]] == [
    ('none/bahdanau/global', '2'),
    ('additive/bahdanau/global', '2'),
  ]
  _report_shows_the_analysis(tmp_path / 'pooled', ['none/bahdanau/global', 'additive/bahdanau/global'])
  again = run_module(
    'experiments.analyze',
    f'--from_translations={tmp_path / "pooled" / "translations.json.gz"}',
    '--pool_seeds',
    f'--out={tmp_path / "again"}',
  )
  assert again.returncode == 0, again.stderr[-3000:]
  # the same contrasts from the translations alone (which lack the attention columns the runs give)
  contrasts = lambda text: [line for line in text.splitlines() if line.startswith('| ') and ' − ' in line.split('|')[1]]  # noqa: E731
  again_table = (tmp_path / 'again' / 'analysis.md').read_text()
  assert contrasts(again_table) == contrasts(table) and len(contrasts(table)) == 1
  # the API pools the same runs in memory: the same table, each pooled variant naming its runs
  comparison = attnmt.compare(runs.split(','), pool_seeds=True)
  assert comparison.markdown() + '\n' == table
  assert [r['workdir'] for r in comparison.results] == [
    f'{tmp_path}/{v}-bahdanau-global-seeds=0, {tmp_path}/{v}-bahdanau-global-seeds=1' for v in ('none', 'additive')
  ]
  assert [v['seeds'] for v in comparison.variants] == [2, 2]
  apart = run_module('experiments.analyze', *common, f'--out={tmp_path / "apart"}')
  assert apart.returncode == 0, apart.stderr[-3000:]
  assert 'none/bahdanau/global/seeds=1 | 1 |' in (tmp_path / 'apart' / 'analysis.md').read_text()

  # A sweep analyses the runs that have finished while its last runs train (report.analyze_ahead); its analysis
  # then reuses them: the results of analysing every run at the end, each run decoded once. The second seeds'
  # runs, analysed first, draw no heatmaps: their variants' first runs draw them.
  from attnmt.analysis import report, run_analysis

  dirs, calls, real = runs.split(','), [], run_analysis.analyze_run
  monkeypatch.setattr(
    run_analysis,
    'analyze_run',
    lambda run, *a, **k: calls.append((run.workdir, k['num_heatmaps'])) or real(run, *a, **k),
  )
  options = dict(beam_size=0, num_heatmaps=1, heatmap_min_words=0)
  out = str(tmp_path / 'ahead')
  ahead = {}
  assert report.analyze_ahead(ahead, dirs, set(dirs), out, seeds_as_runs=True, stop=lambda: True, **options) == []
  done = report.analyze_ahead(ahead, dirs, {dirs[1], dirs[3]}, out, seeds_as_runs=True, **options)
  assert done == [dirs[1], dirs[3]] and calls == [(dirs[1], 0), (dirs[3], 0)]
  assert report.analyze_ahead(ahead, dirs, {dirs[1], dirs[3]}, out, seeds_as_runs=True, **options) == []
  with_ahead = report.analyze_runs(dirs, out, seeds_as_runs=True, ahead=ahead, **options)
  assert calls[2:] == [(dirs[0], 1), (dirs[2], 1)] and ahead == {}
  calls.clear()
  alone = report.analyze_runs(dirs, str(tmp_path / 'alone'), seeds_as_runs=True, **options)
  assert [w for w, _ in calls] == dirs
  assert json.dumps(with_ahead).replace(out, 'OUT') == json.dumps(alone).replace(str(tmp_path / 'alone'), 'OUT')
  for name in ('analysis.json', 'sentences.json'):
    assert (tmp_path / 'ahead' / name).read_text().replace(out, 'OUT') == (
      tmp_path / 'alone' / name
    ).read_text().replace(str(tmp_path / 'alone'), 'OUT')
  # analysed ahead with other options (no heatmaps): not reused
  calls.clear()
  report.analyze_ahead(ahead, dirs, set(dirs), out, seeds_as_runs=True, **{**options, 'num_heatmaps': 0})
  report.analyze_runs(dirs, out, seeds_as_runs=True, ahead=ahead, **options)
  assert len(calls) == 8 and ahead == {}
