"""The three components of one's own in examples/components (a normaliser, a decoder form and an intervention,
each with an option of its own) work from the user's files alone: swept as axes, their options in config.json,
resumed, and analysed, by the commands a user types. docs/extending.md shows these files verbatim."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from attnmt.errors import ConfigError
from attnmt.model import interventions, preflight
from attnmt.model.config import ModelConfig

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COMPONENTS = os.path.join(ROOT, 'examples', 'components')
FILES = ('triangle.py', 'tempered.py', 'maxout.py', 'sharpen.py')
FORM = 'maxout:Maxout(deep_output_size=8, pieces=2)'
NORMALIZER = 'tempered:Tempered(temperature=0.5)'


def run(module, *flags):
  env = dict(os.environ, JAX_PLATFORMS='cpu', PYTHONPATH=os.pathsep.join([ROOT, COMPONENTS]))
  done = subprocess.run([sys.executable, '-m', module, *flags], cwd=ROOT, env=env, capture_output=True, text=True)
  assert done.returncode == 0, done.stderr[-3000:]
  return done


@pytest.fixture(autouse=True)
def importable(monkeypatch):
  monkeypatch.syspath_prepend(COMPONENTS)


def test_the_manual_shows_each_file_as_it_is():
  with open(os.path.join(ROOT, 'docs', 'extending.md'), encoding='utf-8') as f:
    manual = f.read()
  for name in FILES:
    with open(os.path.join(COMPONENTS, name), encoding='utf-8') as f:
      assert f.read().strip() in manual, f'docs/extending.md does not show examples/components/{name} as it is'


def test_the_options_are_checked_like_any_setting_and_written_out():
  cfg = ModelConfig(normalizer=NORMALIZER, query_timing='maxout:Maxout(pieces=3)')
  assert cfg.query_timing == 'maxout:Maxout(deep_output_size=256, pieces=3)'  # inherited option, then its own
  assert ModelConfig(normalizer='tempered:Tempered').normalizer == 'tempered:Tempered(temperature=1.0)'
  with pytest.raises(ConfigError, match=r'temperature must be a finite number > 0, got 0'):
    ModelConfig(normalizer='tempered:Tempered(temperature=0)')
  with pytest.raises(ConfigError, match=r"Maxout has no option 'piece'; did you mean pieces\?"):
    ModelConfig(query_timing='maxout:Maxout(piece=2)')
  sharpen = interventions.build('sharpen:Sharpen(power=4)')
  assert sharpen.label == 'sharpen:Sharpen(power=4.0)' and sharpen == interventions.build('sharpen:Sharpen(power=4.0)')


def test_each_computes_what_its_definition_says():
  import jax.numpy as jnp

  from attnmt.model import normalizers

  e, mask = jnp.array([1.0, 2.0, 0.5]), jnp.array([True, True, False])
  got = normalizers.build(ModelConfig(normalizer='tempered:Tempered(temperature=0.5)')).normalize(e, mask)
  want = np.exp([2.0, 4.0]) / np.exp([2.0, 4.0]).sum()  # softmax(e / 0.5) over the two valid positions
  np.testing.assert_allclose(np.asarray(got), [*want, 0.0], rtol=1e-6)
  from attnmt.model import windows

  window = windows.build(ModelConfig(window='triangle:Triangle(size=1)'))
  e, positions, mask = jnp.zeros(5), jnp.arange(5), jnp.arange(5) < 4
  got = window.weights(e, positions, mask, window.centre({}, None, jnp.array([4]), jnp.int32(2))[0])
  np.testing.assert_allclose(np.asarray(got), [0, 1 / 3 * 0.5, 1 / 3, 1 / 3 * 0.5, 0], rtol=1e-6)  # |s - 2| <= 1
  w = jnp.array([[0.2, 0.3, 0.5, 0.0]])
  got = interventions.build('sharpen:Sharpen(power=2)').apply(w, jnp.array([3]), jnp.int32(0))
  np.testing.assert_allclose(np.asarray(got), [[0.04 / 0.38, 0.09 / 0.38, 0.25 / 0.38, 0.0]], rtol=1e-6)


def test_preflight_names_a_broken_component_in_one_line(tmp_path, monkeypatch):
  (tmp_path / 'broken.py').write_text(
    'from attnmt.model import forms\n'
    'class Wide(forms.Bahdanau):\n'
    '  def hidden(self, p, out, emb_xE):\n'
    '    return super().hidden(p, out, emb_xE)[..., :3]\n'
    'class Half(forms.DecoderForm):\n'
    '  def flops(self, rows):\n'
    '    return 0\n'
  )
  monkeypatch.syspath_prepend(str(tmp_path))
  with pytest.raises(ConfigError, match=r'decoder form Wide returned shape \(2, 2, 3\) from hidden\(\)'):
    preflight.check(ModelConfig(query_timing='broken:Wide'))
  with pytest.raises(ConfigError, match=r'decoder form Half must define step\(p, state, tools\)'):
    preflight.check(ModelConfig(query_timing='broken:Half'))


@pytest.mark.slow
def test_swept_resumed_and_analysed_from_the_users_files(tmp_path):
  data, root = str(tmp_path / 'data'), str(tmp_path / 'sweep')
  sweep = [
    '--config=experiments/configs/tiny.py',
    f'--workdir={root}',
    f'--config.data.data_dir={data}',
    '--config.train.eval_every=10',
    '--config.sweep.analyze=false',
    '--config.sweep.scores=additive(size=16)',
    f'--config.sweep.query_timings=bahdanau(deep_output_size=8),{FORM}',
    f'--config.sweep.axes=model.normalizer=softmax,{NORMALIZER}',
  ]
  run('experiments.sweep', *sweep, '--config.train.num_steps=10')
  names = []
  for variant in sorted(os.listdir(root)):
    if os.path.isdir(os.path.join(root, variant)):
      with open(os.path.join(root, variant, 'results.json')) as f:
        names.append(json.load(f)['variant'])
  # each variant named by what differs between the variants: Maxout's options are the same in the one that has it
  assert sorted(names) == sorted(
    f'additive/{form}/global/normalizer={normalizer}'
    for form in ('bahdanau', 'maxout:Maxout')
    for normalizer in ('softmax', NORMALIZER)
  )
  workdir = os.path.join(root, f'additive-maxout:Maxout-global-normalizer={NORMALIZER}')
  with open(os.path.join(workdir, 'config.json')) as f:
    stored = json.load(f)
  assert stored['config']['model']['query_timing'] == FORM and stored['config']['model']['normalizer'] == NORMALIZER
  assert stored['model']['query_timing'] == FORM  # the complete ModelConfig beside it

  resumed = run('experiments.sweep', *sweep, '--config.train.num_steps=20')  # a resumable change: train on
  assert resumed.stdout.count('Resumed') == 4
  assert '20' in os.listdir(os.path.join(workdir, 'checkpoints'))

  out = str(tmp_path / 'faithfulness')
  run(
    'experiments.analyze',
    f'--runs={workdir}',
    '--interventions=uniform,sharpen:Sharpen(power=4)',
    '--faithfulness_sentences=8',
    f'--out={out}',
  )
  with open(os.path.join(out, 'faithfulness.json')) as f:
    measured = json.load(f)
  (result,) = measured if isinstance(measured, list) else measured['results']
  assert set(result['interventions']) == {'uniform', 'sharpen:Sharpen(power=4.0)'}
