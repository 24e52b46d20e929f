"""Bad flags to the benchmarks and tools (benchmarks.kernels, benchmarks.peer, tools.equal_outputs,
tools.batch_shapes, tools.ab_step): one line on stderr naming the problem and the fix, exit status 2, and nothing
written, every flag checked before any compilation or timing (--out before the timing, which a failed write lost).
Each tool runs in a subprocess for the misuse reported; the other cases of a kind check the same check in-process.
An empty stdout shows the refusal came first: each tool prints its progress there."""

import json
import os
import subprocess
import sys
import types

import jax
import pytest

from benchmarks import kernels
from attnmt import errors
from experiments.configs import tiny
from tools import ab_step, batch_shapes, equal_outputs, variants

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENV = dict(os.environ, JAX_PLATFORMS='cpu')
CASES = 'the cases are lstm-additive, gru-dot, lstm-dot, gru-additive'


def _run(*args):
  return subprocess.run([sys.executable, '-m', *args], cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=120)


def _refused(res, line):
  """Exit status 2, `line` alone on stderr, nothing on stdout (no work began)."""
  assert (res.returncode, res.stderr.splitlines(), res.stdout) == (2, [line], ''), res.stderr[-2000:]


def _unwritable(tmp_path):
  """A folder this user cannot write into: /sys for root (read-only even to it), else tmp_path made read-only."""
  if os.geteuid() == 0:
    if not os.path.isdir('/sys/kernel'):
      pytest.skip('needs /sys (read-only for root) or a user other than root')
    return '/sys'
  tmp_path.chmod(0o500)
  return str(tmp_path)


# benchmarks.kernels


def test_kernels_refuses_a_folder_as_out_before_timing(tmp_path):
  res = _run('benchmarks.kernels', '--dry', f'--out={tmp_path}')
  _refused(res, f'error: --out={tmp_path} is a folder; pass a file path such as {tmp_path}/kernels.json')
  assert os.listdir(tmp_path) == []


def test_kernels_refuses_zero_repeats_instead_of_exiting_0(tmp_path):
  out = tmp_path / 'kernels.json'
  res = _run('benchmarks.kernels', '--dry', '--repeats=0', f'--out={out}')
  _refused(
    res, 'error: --repeats=0: no timed call to take a median of; pass a whole number from 1 up, e.g. --repeats=20'
  )
  assert os.listdir(tmp_path) == []


def _kernel_flags(out, **kw):
  return types.SimpleNamespace(
    **{'cases': ['lstm-additive', 'gru-dot'], 'repeats': 20, 'steps': None, 'out': out, **kw}
  )


@pytest.mark.parametrize(
  'kw,line',
  [
    (
      {'repeats': -3},
      'error: --repeats=-3: no timed call to take a median of; pass a whole number from 1 up, e.g. --repeats=20',
    ),
    (
      {'steps': 0},
      "error: --steps=0: a scan of no step; pass a whole number from 1 up, or leave it out for the sizes' own",
    ),
    ({'cases': ['x', 'gru-dot']}, f'error: --cases=x,gru-dot: unknown case x; {CASES}'),
    ({'cases': ['x', 'y']}, f'error: --cases=x,y: unknown cases x, y; {CASES}'),
    ({'cases': []}, f'error: --cases=: names no case; {CASES}'),
  ],
)
def test_kernels_checks_every_count_and_case(kw, line, tmp_path, capsys):
  with pytest.raises(SystemExit) as stop:
    kernels.check_flags(_kernel_flags(str(tmp_path / 'kernels.json'), **kw))
  assert stop.value.code == 2 and capsys.readouterr().err.splitlines() == [line]
  assert os.listdir(tmp_path) == []


def test_kernels_accepts_good_flags_and_writes_nothing_while_checking(tmp_path, capsys):
  kernels.check_flags(_kernel_flags(str(tmp_path / 'new' / 'kernels.json'), repeats=1, steps=1))
  assert capsys.readouterr().err == '' and os.listdir(tmp_path) == []


# --out, as benchmarks.kernels, benchmarks.peer, tools.ab_step and tools.batch_shapes check it


def test_out_under_a_file_or_empty_is_one_line(tmp_path):
  afile = tmp_path / 'afile'
  afile.write_text('kept')
  assert errors.out_problem(f'{afile}/sub/k.json', 'k.json') == (
    f'--out={afile}/sub/k.json: {afile} is a file, not a folder; pass a path whose folders are folders'
  )
  assert errors.out_problem('', 'k.json') == '--out= names no file; pass a file path such as /tmp/k.json'
  assert os.listdir(tmp_path) == ['afile'] and afile.read_text() == 'kept'


def test_out_in_an_unwritable_folder_is_one_line(tmp_path):
  folder = _unwritable(tmp_path)
  try:
    problem = errors.out_problem(os.path.join(folder, 'attnmt-out-test', 'k.json'), 'k.json')
  finally:
    tmp_path.chmod(0o700)
  start = f'--out={folder}/attnmt-out-test/k.json: cannot write {folder} ('
  assert problem.startswith(start) and problem.endswith('); pass a path you can write to'), problem
  assert not [p for p in os.listdir(folder) if p.startswith(('.attnmt-out-', 'attnmt-out-test'))]


def test_out_that_can_be_written_is_left_as_it_was(tmp_path):
  existing = tmp_path / 'old.json'
  existing.write_text('{"kept": 1}')
  assert errors.out_problem(str(existing), 'k.json') is None
  assert errors.out_problem(str(tmp_path / 'a' / 'b' / 'k.json'), 'k.json') is None
  assert os.listdir(tmp_path) == ['old.json'] and existing.read_text() == '{"kept": 1}'


# benchmarks.peer: no jax in its process, so its refusals take a fraction of a second


@pytest.mark.parametrize('what', ['folder', 'cores'])
def test_peer_refuses_before_timing(what, tmp_path):
  out = tmp_path / 'peer.json'
  args = [f'--out={tmp_path}'] if what == 'folder' else ['--cores=100000', f'--out={out}']
  res = _run('benchmarks.peer', '--size=tiny', '--pairs=1', '--frameworks=attnmt', *args)
  cpus = len(os.sched_getaffinity(0))
  lines = {
    'folder': f'error: --out={tmp_path} is a folder; pass a file path such as {tmp_path}/peer_tiny.json',
    'cores': f'error: --cores=100000: this process may run on {cpus} CPUs; pass 1 to {cpus} (0: all of them)',
  }
  _refused(res, lines[what])
  assert os.listdir(tmp_path) == []


# tools.equal_outputs


def test_equal_outputs_refuses_a_first_that_is_no_number(tmp_path):
  path = tmp_path / 'before.npz'
  res = _run('tools.equal_outputs', 'save', str(path), '--first=abc')
  _refused(res, "error: --first=abc: 'abc' is not a variant count; pass a whole number from 1 to 24")
  res = _run('tools.equal_outputs', '--first=abc')
  usage = 'usage: python tools/equal_outputs.py save|compare FILE.npz [--first=N]'
  _refused(res, f'error: expected save or compare and one FILE.npz, got --first=abc; {usage}')
  assert os.listdir(tmp_path) == []


@pytest.mark.parametrize(
  'args,line',
  [
    (
      ['save', '{d}/b.npz', '--first=0'],
      "error: --first=0: '0' is not a variant count; pass a whole number from 1 to 24",
    ),
    (
      ['save', '{d}/b.npz', '--first=25'],
      "error: --first=25: '25' is not a variant count; pass a whole number from 1 to 24",
    ),
    (
      ['save', '{d}/b.npz', '--first=-1'],
      "error: --first=-1: '-1' is not a variant count; pass a whole number from 1 to 24",
    ),
    (  # a digit str.isdigit accepts and int() does not
      ['save', '{d}/b.npz', '--first=\u00b2'],
      "error: --first=\u00b2: '\u00b2' is not a variant count; pass a whole number from 1 to 24",
    ),
    (
      ['save', '{d}/b.npz', '--frist=2'],
      'error: unknown option --frist=2; the one option is --first=N (the first N variants); usage: python '
      'tools/equal_outputs.py save|compare FILE.npz [--first=N]',
    ),
    (['save', '{d}/b'], 'error: save {d}/b: np.savez would write {d}/b.npz instead; name a file ending in .npz'),
    (['save', '{d}/x.npz'], 'error: save {d}/x.npz is a folder; pass a file path such as {d}/x.npz/before.npz'),
    (
      ['save', '{d}/text.npz/b.npz'],
      'error: save {d}/text.npz/b.npz: {d}/text.npz is a file, not a folder; pass a path whose folders are folders',
    ),
    (
      ['compare', '{d}/none.npz'],
      'error: compare {d}/none.npz: cannot read it (No such file or directory); pass the .npz file a save wrote',
    ),
    (['compare', '{d}/text.npz'], 'error: compare {d}/text.npz: not an .npz file; pass the .npz file a save wrote'),
    (
      ['compare', '{d}/x.npz'],
      'error: compare {d}/x.npz: cannot read it (Is a directory); pass the .npz file a save wrote',
    ),
  ],
)
def test_equal_outputs_checks_its_arguments_before_any_variant(args, line, tmp_path, capsys):
  (tmp_path / 'x.npz').mkdir()
  (tmp_path / 'text.npz').write_text('not numpy')
  with pytest.raises(SystemExit) as stop:
    equal_outputs.parse_arguments(['equal_outputs.py', *(a.format(d=tmp_path) for a in args)])
  assert stop.value.code == 2 and capsys.readouterr().err.splitlines() == [line.format(d=tmp_path)]
  assert sorted(os.listdir(tmp_path)) == ['text.npz', 'x.npz'] and os.listdir(tmp_path / 'x.npz') == []


def test_equal_outputs_parses_good_arguments_and_leaves_the_file(tmp_path):
  assert equal_outputs.parse_arguments(['e', 'save', str(tmp_path / 'b.npz'), '--first=2']) == (
    'save',
    str(tmp_path / 'b.npz'),
    2,
  )
  assert os.listdir(tmp_path) == []


# tools.batch_shapes


@pytest.mark.parametrize(
  'flag,line',
  [
    ('--seeds=0', 'error: --seeds=0: no seed to read batches for; pass a whole number from 1 up, e.g. --seeds=5'),
    (
      '--time_calls=-1',
      'error: --time_calls=-1: a negative count of calls; pass a whole number from 1 up to time the step, or 0 not to',
    ),
    (
      '--config.model.score=nonesuch',
      "error: unknown model.score 'nonesuch'; valid: none, additive, normed_additive, dot, scaled_dot, general, "
      'concat, location, or an import path such as my_pkg.scores:Mine to a subclass of Score',
    ),
  ],
)
def test_batch_shapes_refuses_before_reading_the_data(flag, line, tmp_path):
  data_dir = tmp_path / 'data'
  res = _run(
    'tools.batch_shapes',
    '--config=experiments/configs/tiny.py',
    f'--config.data.data_dir={data_dir}',
    '--steps=2',
    flag,
  )
  _refused(res, line)
  assert os.listdir(tmp_path) == []  # no data prepared


def _shape_flags(tmp_path, **kw):
  config = tiny.get_config()
  config.data.data_dir = str(tmp_path / 'data')
  for key, value in kw.pop('config', {}).items():
    section, name = key.split('.')
    config[section][name] = value
  return types.SimpleNamespace(**{'seeds': 1, 'steps': 2, 'time_calls': 0, 'out': None, 'config': config, **kw})


@pytest.mark.parametrize(
  'kw,line',
  [
    ({'seeds': -2}, '--seeds=-2: no seed to read batches for; pass a whole number from 1 up, e.g. --seeds=5'),
    ({'steps': -3}, '--steps=-3: a negative count of steps; pass a whole number from 1 up, or 0 for train.num_steps'),
    ({'out': '{d}'}, '--out={d} is a folder; pass a file path such as {d}/shapes.json'),
    ({'config': {'data.pad_to_multiple': 0}}, 'data.pad_to_multiple must be an integer >= 1, got 0'),
    ({'config': {'train.num_steps': -1}}, 'train.num_steps must be an integer >= 1, got -1'),
    ({'config': {'model.score': 'additive(size=x)'}}, "model.score additive.size must be an integer >= 1, got 'x'"),
    ({'config': {'data.name': 'nonesuch'}}, "unknown dataset 'nonesuch'; valid: bible_en_es, tsv_pairs, synthetic_"),
  ],
)
def test_batch_shapes_checks_every_flag_and_setting(kw, line, tmp_path):
  if 'out' in kw:
    kw['out'] = kw['out'].format(d=tmp_path)
  with pytest.raises(ValueError) as error:  # ConfigError, and data's own ValueError: one line under run_guarded
    batch_shapes.check_flags(_shape_flags(tmp_path, **kw))
  assert str(error.value).startswith(line.format(d=tmp_path)) and '\n' not in str(error.value)
  assert os.listdir(tmp_path) == []


def test_batch_shapes_accepts_the_tiny_config(tmp_path):
  batch_shapes.check_flags(_shape_flags(tmp_path, seeds=2, steps=0, time_calls=1, out=str(tmp_path / 's.json')))
  assert os.listdir(tmp_path) == []


# tools.ab_step


def test_ab_step_refuses_an_unknown_component_before_compiling(tmp_path):
  out = tmp_path / 'ab.json'
  res = _run('tools.ab_step', '--variants={"mine": {"model": {"score": "nonesuch"}}}', f'--out={out}')
  _refused(
    res,
    "error: --variants: variant 'mine': model {'score': 'nonesuch'}: unknown model.score 'nonesuch'; valid: none, "
    'additive, normed_additive, dot, scaled_dot, general, concat, location, or an import path such as '
    'my_pkg.scores:Mine to a subclass of Score',
  )
  assert os.listdir(tmp_path) == []


@pytest.mark.parametrize(
  'spec,start',
  [
    ({'model': {'nonesuch': 1}}, "variant 'v': model {'nonesuch': 1}: unknown model setting(s) ['nonesuch']; valid"),
    ({'model': {'score': 'additive(size=-1)'}}, "variant 'v': model {'score': 'additive(size=-1)'}: model.score"),
    ({'xla': {'xla_nonesuch': 1}}, "variant 'v': XLA refuses the options {'xla_nonesuch': 1} (No such compile option"),
    ({'xla': {'xla_cpu_prefer_vector_width': 'wide'}}, "variant 'v': XLA refuses the options {'xla_cpu_prefer_vect"),
    ({'xla': {'xla_cpu_prefer_vector_width': [1]}}, "variant 'v': XLA refuses the options {'xla_cpu_prefer_vector_"),
  ],
)
def test_ab_step_checks_every_variant_against_the_registries_and_xla(spec, start):
  with pytest.raises(ValueError) as error:
    ab_step.check_variants(variants.parse(json.dumps({'v': spec})), ab_step.cases.BENCH_MODEL)
  assert str(error.value).startswith(start) and '\n' not in str(error.value), str(error.value)


def test_ab_step_accepts_known_fields_and_options():
  xla = {'xla_cpu_prefer_vector_width': 512} if jax.default_backend() == 'cpu' else {}  # a CPU option
  spec = {'v': {'model': {'score': 'dot'}, 'xla': xla}}
  ab_step.check_variants(variants.parse(json.dumps(spec)), ab_step.cases.BENCH_MODEL)


# experiments.curves: --minutes are training times, each checked before any run is read


@pytest.mark.parametrize(
  'minutes, line',
  [
    ('', 'error: --minutes= names no time; pass training minutes such as --minutes=1,2,5'),
    ('1,nan', "error: --minutes: 'nan' is not a training time; pass minutes above 0, such as --minutes=1,2,5"),
  ],
)
def test_curves_refuses_minutes_that_are_no_times(minutes, line, tmp_path):
  run = tmp_path / 'run'
  run.mkdir()
  res = _run('experiments.curves', f'--runs={run}', f'--minutes={minutes}', f'--out={tmp_path}/c.png')
  _refused(res, line)
  assert os.listdir(tmp_path) == ['run']
