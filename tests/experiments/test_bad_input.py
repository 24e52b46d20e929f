"""Bad input and faults, one case per test: a one-line error naming the problem and the fix, a non-zero exit,
and nothing written or overwritten. Each kind runs the real entry point in a subprocess at least once; the
other cases of a kind check the same error in-process. The cases are listed in docs/troubleshooting.md."""

import dataclasses
import json
import os
import signal
import subprocess
import sys

import ml_collections
import numpy as np
import pytest

from attnmt.training import checkpoints, lock, trainer
from attnmt import data
from attnmt.model import decoding
from attnmt.errors import ConfigError
from attnmt.model.config import ModelConfig
from attnmt.data import pipeline, tokenizers, tsv_pairs
from experiments.configs import tiny

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENV = dict(os.environ, JAX_PLATFORMS='cpu', PYTHONPATH=ROOT)


@pytest.fixture(scope='module')
def trained(tmp_path_factory):
  """A tiny trained run (in-process) and its data directory."""
  data_dir = str(tmp_path_factory.mktemp('data'))
  workdir = str(tmp_path_factory.mktemp('runs') / 'run')
  config = tiny.get_config()
  config.data.data_dir = data_dir
  config.train.num_steps = 10
  config.train.checkpoint_every = 10
  trainer.train_and_evaluate(config, workdir)
  return workdir, data_dir


def run(module, *args, env=None):
  return subprocess.run(
    [sys.executable, '-m', f'experiments.{module}', *args],
    cwd=ROOT,
    env={**ENV, **(env or {})},
    capture_output=True,
    text=True,
    timeout=300,
    stdin=subprocess.DEVNULL,
  )


def train_args(tmp_path, data_dir, *extra):
  return [
    '--config=experiments/configs/tiny.py',
    f'--workdir={tmp_path / "w"}',
    f'--config.data.data_dir={data_dir}',
    '--config.train.num_steps=2',
    *extra,
  ]


def last_line(res):
  lines = [l for l in res.stderr.strip().splitlines() if not l.startswith(('W', 'I')) or l.startswith('error')]
  return lines[-1] if lines else ''


def write(path, text):
  path.write_text(text)
  return str(path)


CASES = {
  'unknown dataset': (['--config.data.name=klingon_bible'], "unknown dataset 'klingon_bible'; valid:"),
  'unknown score': (
    ['--config.model.score=bilinear'],
    "error: unknown model.score 'bilinear'; valid: none, additive, normed_additive, dot",
  ),
  'dot with unequal sizes': (
    ['--config.model.score=dot', '--config.model.decoder_hidden_size=48'],
    "score 'dot' needs the query size (decoder_hidden_size=48) to equal the annotation size",
  ),
  'config key that does not exist': (['--config.model.scroe=dot'], 'scroe'),
  'flag that does not exist': (
    ['--learning_rate=0.1'],
    "error: Unknown command line flag 'learning_rate'; see --helpshort for the flags",
  ),
  'a model larger than the machine': (  # counted before anything is allocated (it stalled allocating)
    ['--config.model.score=additive(size=1000000000)'],
    'parameters: with their gradients and optimizer state for',
  ),
  'value absl cannot read': (
    ['--config.train.learning_rate=abc'],
    "error: flag --config.train.learning_rate=abc: could not convert string to float: 'abc'; see --helpshort",
  ),
  'more devices than exist': (
    ['--config.train.num_devices=5'],
    'error: train.num_devices=5, but 1 device(s) are visible; use 0 (all)',
  ),
  'coordinator without process count': (
    ['--coordinator_address=localhost:1'],
    'needs the number of processes and this process id: pass --num_processes',
  ),
  'negative batch size': (['--config.data.batch_size=-4'], 'error: data.batch_size must be an integer >= 1, got -4'),
  'length limit no sentence meets': (
    ['--config.data.max_source_length=1'],
    'error: no train sentence fits the length limits (data.max_source_length=1',
  ),
  'num_epochs shorter than num_steps': (
    ['--config.data.num_epochs=1', '--config.train.num_steps=1000'],
    'error: data.num_epochs=1 gives 38 training batches, fewer than train.num_steps=1000',
  ),
  'config file typo': (
    ['--config=experiments/configs/tinyy.py'],
    'error: cannot load the --config file experiments/configs/tinyy.py (No such file or '
    'directory); pass a config file such as experiments/configs/default.py',
  ),
  'negative seed': (
    ['--config.train.seeds=-1'],
    "error: train.seeds must be integers >= 0, got -1 in '-1'; use seeds like '0,1,2'",
  ),
  'negative seed among others': (
    ['--config.train.seeds=0,-2'],
    "error: train.seeds must be integers >= 0, got -2 in '0,-2'; use seeds like '0,1,2'",
  ),
  'negative shuffle seed': (
    ['--config.data.shuffle_seed=-1'],
    'error: data.shuffle_seed must be an integer >= 0, got -1',
  ),
}


@pytest.mark.parametrize('case', sorted(CASES))
@pytest.mark.slow
def test_bad_training_settings(case, tmp_path, trained):
  extra, message = CASES[case]
  res = run('train', *train_args(tmp_path, trained[1], *extra))
  assert res.returncode != 0
  assert message in res.stderr, res.stderr[-2000:]
  assert res.returncode == 2 and last_line(res).startswith('error: ') and message in last_line(res), res.stderr[-2000:]
  assert not (tmp_path / 'w').exists()  # nothing was trained or written, no config.json left behind


@pytest.mark.parametrize(
  'name,content,message',
  [
    ('raises.py', 'raise RuntimeError("boom")\n', 'raised RuntimeError while loading: boom; fix that file'),
    ('no_get.py', 'x = 1\n', 'defines no get_config(); a config file is Python with get_config()'),
    ('config.json', '{"model": {}}\n', 'defines no get_config()'),  # a JSON file imports as Python
    ('a_dir', None, '(Is a directory); pass a config file such as experiments/configs/default.py'),
    (  # a typo in the file's own get_config(), not a bad --config override
      'typo.py',
      'from experiments.configs import tiny\n\n\ndef get_config():\n  config = tiny.get_config()\n'
      '  config.modle.score = "dot"\n  return config\n',
      'raised AttributeError while loading: \'modle\' Did you mean "model" instead of "modle"?; fix that file '
      '(ATTNMT_DEBUG=1 shows the traceback)',
    ),
    (
      'key_typo.py',
      'from experiments.configs import tiny\n\n\ndef get_config():\n  config = tiny.get_config()\n'
      '  config["modle"]["score"] = "dot"\n  return config\n',
      'raised KeyError while loading: \'modle\' Did you mean "model" instead of "modle"?; fix that file',
    ),
  ],
)
@pytest.mark.slow
def test_config_files_that_cannot_load(name, content, message, tmp_path, trained):
  """With and without --config.x overrides: one line naming the file, status 2, nothing written."""
  path = tmp_path / name
  path.mkdir() if content is None else path.write_text(content)
  for extra in ([], ['--config.train.num_steps=3']):
    res = run('train', f'--config={path}', f'--workdir={tmp_path / "w"}', *extra)
    assert res.returncode == 2 and str(path) in last_line(res) and message in last_line(res), res.stderr[-2000:]
    assert 'Traceback' not in res.stderr and not (tmp_path / 'w').exists()


@pytest.mark.parametrize(
  'content,message',
  [
    ('', 'no sentence pairs'),
    ('hello\thola\tCC-BY\nonly one column\n', ':2: '),
    ('a\tb\tc\td\n', ':1: '),
  ],
)
def test_bad_pair_files(content, message, tmp_path, trained):
  path = write(tmp_path / 'pairs.tsv', content)
  res = run(
    'train', *train_args(tmp_path, trained[1], '--config.data.name=tsv_pairs', f'--config.data.tsv_path={path}')
  )
  assert res.returncode == 2 and message in last_line(res) and path in last_line(res), res.stderr[-2000:]


def test_unreadable_pair_file(tmp_path, trained):
  res = run(
    'train',
    *train_args(tmp_path, trained[1], '--config.data.name=tsv_pairs', f'--config.data.tsv_path={tmp_path}/missing.tsv'),
  )
  assert res.returncode == 2 and 'missing.tsv' in last_line(res)


def test_workdir_with_a_different_run_is_refused_then_moved_aside_with_fresh(tmp_path, trained):
  workdir, data_dir = trained
  before = open(os.path.join(workdir, 'config.json')).read()
  args = [
    '--config=experiments/configs/tiny.py',
    f'--workdir={workdir}',
    f'--config.data.data_dir={data_dir}',
    '--config.model.score=general',
  ]
  res = run('train', *args)
  assert res.returncode == 2
  assert 'holds a run with a different config (differs in model.score)' in last_line(res)
  assert '--fresh' in last_line(res)
  assert open(os.path.join(workdir, 'config.json')).read() == before  # nothing overwritten


@pytest.mark.parametrize(
  'setup,message',
  [
    ('missing', 'does not exist'),
    ('empty', 'is not an attnmt run directory'),
    ('not a run', 'is not an attnmt run directory'),
    ('garbled config', 'is unreadable'),
    ('future version', 'has format version 99'),
    ('no checkpoint', 'holds no checkpoint yet'),
    ('corrupted checkpoint', 'is corrupted or unreadable'),
  ],
)
def test_bad_checkpoint_directories(setup, message, tmp_path, trained):
  workdir, _ = trained
  d = tmp_path / 'run'
  if setup != 'missing':
    d.mkdir()
  if setup == 'not a run':
    write(d / 'notes.txt', 'hello')
  if setup == 'garbled config':
    write(d / 'config.json', '{"attnmt_format": 1, "config": ')
  if setup in ('future version', 'no checkpoint', 'corrupted checkpoint'):
    payload = json.load(open(os.path.join(workdir, 'config.json')))
    payload['attnmt_format'] = 99 if setup == 'future version' else 1
    write(d / 'config.json', json.dumps(payload))
  if setup == 'corrupted checkpoint':
    import shutil

    shutil.copytree(os.path.join(workdir, 'checkpoints'), d / 'checkpoints')
    for root, _, files in os.walk(d / 'checkpoints'):
      for f in files:
        if 'state' in root and not f.startswith('_'):
          with open(os.path.join(root, f), 'r+b') as fh:
            fh.truncate(7)
  if setup == 'corrupted checkpoint':  # the entry point, once for the kind
    res = run('analyze', f'--runs={d}', f'--out={tmp_path / "out"}', '--beam_size=0')
    assert res.returncode == 2 and message in last_line(res), res.stderr[-2000:]
  else:  # the same error in-process: what the analyze entry point calls
    from attnmt.analysis import report

    with pytest.raises(checkpoints.CheckpointError) as e:
      report.analyze_runs([str(d)], str(tmp_path / 'out'), beam_size=0)
    assert message in str(e.value) and '\n' not in str(e.value), repr(e.value)
  assert not (tmp_path / 'out').exists()


@pytest.mark.slow
def test_translate_refuses_an_empty_line_and_a_too_long_sentence(tmp_path, trained):
  workdir, _ = trained
  with_empty_line = write(tmp_path / 'a.txt', '1 2\n\n3\n')
  empty = run('translate', f'--run={workdir}', f'--input={with_empty_line}', '--beam_size=0')
  assert (
    empty.returncode == 2 and last_line(empty) == 'error: input line 2 is empty; give one non-empty sentence per line'
  )
  trailing = write(tmp_path / 'c.txt', '1 2\n3\n\n\n')  # empty lines at the end are no sentences: fine
  done = run('translate', f'--run={workdir}', f'--input={trailing}', '--beam_size=0')
  assert done.returncode == 0 and len(done.stdout.strip().splitlines()) == 2, done.stderr[-2000:]
  marked = tmp_path / 'd.txt'  # a byte-order mark is dropped: the same translations as without it
  marked.write_bytes('\ufeff1 2\n3\n'.encode('utf-8'))
  with_mark = run('translate', f'--run={workdir}', f'--input={marked}', '--beam_size=0')
  assert with_mark.returncode == 0 and with_mark.stdout == done.stdout, with_mark.stderr[-2000:]
  closed = subprocess.run(
    [sys.executable, '-m', 'experiments.translate', f'--run={workdir}'],
    cwd=ROOT,
    env=dict(os.environ, JAX_PLATFORMS='cpu', PYTHONPATH=ROOT),
    stdin=subprocess.DEVNULL,
    capture_output=True,
    text=True,
    timeout=300,
    preexec_fn=lambda: os.close(0),
  )
  assert closed.returncode == 2 and 'standard input is closed' in last_line(closed), closed.stderr[-2000:]
  too_long = write(tmp_path / 'b.txt', '1 2 3 4 5 6\n')
  long = run('translate', f'--run={workdir}', f'--input={too_long}', '--max_source_tokens=4')
  assert long.returncode == 2 and 'has 7 tokens (with EOS), more than the limit 4' in last_line(long)
  binary = tmp_path / 'e.txt'  # not UTF-8 on line 2: the file and line, not the codec's message
  binary.write_bytes(b'1 2\n\xd0\xff 3\n')
  res = run('translate', f'--run={workdir}', f'--input={binary}', '--beam_size=0')
  assert res.returncode == 2 and last_line(res) == (
    f'error: --input {binary} line 2 is not UTF-8 text (byte 0xd0 at column 1); give a UTF-8 text file with one '
    'sentence per line (iconv -t UTF-8 converts one)'
  )
  piped = subprocess.run(
    [sys.executable, '-m', 'experiments.translate', f'--run={workdir}', '--beam_size=0'],
    cwd=ROOT,
    env=dict(os.environ, JAX_PLATFORMS='cpu', PYTHONPATH=ROOT),
    input='\ufeff1 2\n3\n',
    capture_output=True,
    text=True,
    timeout=300,
  )
  assert piped.returncode == 0 and piped.stdout == done.stdout, piped.stderr[-2000:]  # stdin reads the same


# The entry point's one-line path for each kind is covered by a subprocess case above; the cases below
# check the same errors in-process (cheap): settings, data filters, files, locks, workdirs.


def with_value(config, section, key, value):
  """`config` with section.key = value, whatever its type (a ConfigDict refuses another type in place)."""
  config[section] = ml_collections.ConfigDict({**config[section].to_dict(), key: value})
  return config


SETTINGS = {
  'model.query_timing=late': ('model', 'query_timing', 'late', "unknown model.query_timing 'late'; valid: bahdanau"),
  'model.window=local': ('model', 'window', 'local', "unknown model.window 'local'; valid: global, local_m"),
  'train.schedule=linear': ('train', 'schedule', 'linear', "unknown train.schedule 'linear'; valid: constant"),
  'train.seeds=0,zero': ('train', 'seeds', '0,zero', 'train.seeds must be comma-separated integers'),
  'train.log_every=0': ('train', 'log_every', 0, 'train.log_every must be an integer >= 1, got 0'),
  'train.eval_beam_size=-1': ('train', 'eval_beam_size', -1, 'train.eval_beam_size must be an integer >= 0, got -1'),
  'train.checkpoint_every=0': ('train', 'checkpoint_every', 0, 'train.checkpoint_every must be an integer >= 1, got 0'),
  'train.num_steps=0': ('train', 'num_steps', 0, 'train.num_steps must be an integer >= 1, got 0'),
  'train.eval_every=-1': ('train', 'eval_every', -1, 'train.eval_every must be an integer >= 0, got -1'),
  'train.eval_max_sentences=-1': (
    'train',
    'eval_max_sentences',
    -1,
    'train.eval_max_sentences must be an integer >= 0',
  ),
  'train.tensorboard_heatmaps=-1': (
    'train',
    'tensorboard_heatmaps',
    -1,
    'train.tensorboard_heatmaps must be an integer >= 0, got -1',
  ),
  'train.learning_rate=nan': (
    'train',
    'learning_rate',
    float('nan'),
    'train.learning_rate must be a finite number > 0',
  ),
  'train.learning_rate=0': ('train', 'learning_rate', 0.0, 'train.learning_rate must be a finite number > 0, got 0.0'),
  'train.clip_norm=-1': ('train', 'clip_norm', -1.0, 'train.clip_norm must be a finite number >= 0.0, got -1.0'),
  'train.label_smoothing=1': (
    'train',
    'label_smoothing',
    1.0,
    'train.label_smoothing must be a finite number >= 0.0 and < 1',
  ),
  'train.warmup_steps=-5': ('train', 'warmup_steps', -5, 'train.warmup_steps must be an integer >= 0, got -5'),
  'train.max_decode_factor=0': (
    'train',
    'max_decode_factor',
    0.0,
    'train.max_decode_factor must be a finite number > 0',
  ),
  'train.beam_alpha=-0.5': ('train', 'beam_alpha', -0.5, 'train.beam_alpha must be a finite number >= 0.0'),
  'train.num_devices=-1': ('train', 'num_devices', -1, 'train.num_devices must be an integer >= 0, got -1'),
  'train.time_budget_minutes=inf': (
    'train',
    'time_budget_minutes',
    float('inf'),
    'train.time_budget_minutes must be a finite',
  ),
  'train.nonfinite=ignore': ('train', 'nonfinite', 'ignore', "unknown train.nonfinite 'ignore'; valid: stop, skip"),
  'train.seeds duplicated': ('train', 'seeds', '0,0', "train.seeds must list distinct integers, got '0,0'"),
  'train.num_steps=2.5': ('train', 'num_steps', 2.5, 'train.num_steps must be an integer >= 1, got 2.5'),
  'data.batch_size=0': ('data', 'batch_size', 0, 'data.batch_size must be an integer >= 1, got 0'),
  'data.batch_tokens=-1': ('data', 'batch_tokens', -1, 'data.batch_tokens must be an integer >= 0, got -1'),
  'data.vocab_size=2': ('data', 'vocab_size', 2, 'data.vocab_size must be an integer >= 5, got 2'),
  'data.max_source_length=-1': ('data', 'max_source_length', -1, 'data.max_source_length must be an integer >= 0'),
  'data.num_epochs=-1': ('data', 'num_epochs', -1, 'data.num_epochs must be an integer >= 0, got -1'),
  'data.bucket_window=0': ('data', 'bucket_window', 0, 'data.bucket_window must be an integer >= 1, got 0'),
  'data.skip_bad_lines=ture': (
    'data',
    'skip_bad_lines',
    'ture',
    "data.skip_bad_lines must be true or false, got 'ture'",
  ),
  'data.bucket=1': ('data', 'bucket', 1, 'data.bucket must be true or false, got 1'),
  'data.tokenizer=bpe': ('data', 'tokenizer', 'bpe', "unknown data.tokenizer 'bpe'; valid: sentencepiece, word"),
  'data.sp_model_type=char': (
    'data',
    'sp_model_type',
    'char',
    "unknown data.sp_model_type 'char'; valid: unigram, bpe",
  ),
  'data.validation_fraction=1': (
    'data',
    'validation_fraction',
    1.0,
    'data.validation_fraction must be a finite number',
  ),
  'data.validation_fraction=0 (an empty split)': (
    'data',
    'validation_fraction',
    0.0,
    'data.validation_fraction must be a finite number > 0 and < 1, got 0.0',
  ),
  'data.test_fraction=0 (an empty split)': (
    'data',
    'test_fraction',
    0.0,
    'data.test_fraction must be a finite number > 0 and < 1, got 0.0',
  ),
  'data.test_fraction=0.6 (sum >= 1)': (
    'data',
    'test_fraction',
    0.96,
    'data.validation_fraction + data.test_fraction must be < 1',
  ),
  'data.synthetic_max_digits=5': (
    'data',
    'synthetic_max_digits',
    5,
    'data.synthetic_max_digits must be an integer >= 1 and <= 3, got 5',
  ),
  'data.synthetic_max_numbers < min': (
    'data',
    'synthetic_min_numbers',
    9,
    'data.synthetic_max_numbers (4) must be >= data.synthetic_min_numbers (9)',
  ),
  'data.name empty': ('data', 'name', '', 'data.name is empty; name a dataset'),
  'data.name=tsv_pairs without a path': ('data', 'name', 'tsv_pairs', 'data.name=tsv_pairs needs data.tsv_path'),
  'model.query_timing=luong(input_feeding=ture)': (
    'model',
    'query_timing',
    'luong(input_feeding=ture)',
    "model.query_timing luong.input_feeding must be true or false, got 'ture'",
  ),
  'model.score=additive(size=0)': (
    'model',
    'score',
    'additive(size=0)',
    'model.score additive.size must be an integer >= 1, got 0',
  ),
  'model.embed_size=16.5': ('model', 'embed_size', 16.5, 'model.embed_size must be an integer >= 1, got 16.5'),
}


@pytest.mark.parametrize('case', sorted(SETTINGS))
def test_bad_settings_in_process(case, tmp_path):
  section, key, value, message = SETTINGS[case]
  config = with_value(tiny.get_config(), section, key, value)
  with pytest.raises(ConfigError) as e:
    trainer.train_and_evaluate(config, str(tmp_path / 'w'))
  assert message in str(e.value) and '\n' not in str(e.value)
  assert not (tmp_path / 'w').exists()


@pytest.fixture(scope='module')
def prepared(trained):
  config = tiny.get_config()
  config.data.data_dir = trained[1]
  return data.prepare(config.data), config.data


@pytest.mark.parametrize(
  'key,value,message',
  [
    (
      'max_target_length',
      1,
      'no train sentence fits the length limits (data.max_source_length=16, '
      'data.max_target_length=1, data.fixed_source_length=16',
    ),
    ('eval_max_source_length', 2, 'no validation sentence fits the length limits (data.eval_max_source_length=2'),
    (
      'batch_size',
      1000,
      'data.drop_remainder=True drops every training batch: 600 sentences are fewer than data.batch_size=1000',
    ),
  ],
)
def test_data_filters_that_remove_everything_are_named(key, value, message, prepared):
  prep, cfg = prepared
  cfg = ml_collections.ConfigDict({**cfg.to_dict(), key: value, 'drop_remainder': key == 'batch_size'})
  with pytest.raises(ValueError) as e:
    data.check_batches(prep, cfg, 10)
  assert message in str(e.value)


def test_an_empty_split_is_named(prepared):
  prep, cfg = prepared
  no_ids, one_offset = np.zeros(0, np.int32), np.zeros(1, np.int64)
  empty = pipeline.TokenizedSplit(no_ids, one_offset, no_ids, one_offset)
  emptied = dataclasses.replace(prep, tokenized={**prep.tokenized, 'validation': empty})
  with pytest.raises(ValueError) as e:
    data.check_batches(emptied, cfg, 10)
  assert str(e.value) == (
    f'the validation split of {cfg.name} is empty; give the dataset more sentences or change '
    'data.validation_fraction / data.test_fraction'
  )


def test_sentencepiece_vocabulary_too_small():
  with pytest.raises(
    ValueError,
    match=r'sentencepiece cannot train a vocabulary of data.vocab_size=6 on this corpus '
    r'\(Vocabulary size is smaller than required_chars. 6 vs \d+\); raise '
    r'data.vocab_size to at least \d+',
  ):
    tokenizers.train_tokenizer('sentencepiece', ['the quick brown fox jumps over the lazy dog'], 6)


@pytest.mark.parametrize(
  'lines,message',
  [
    (
      ['a\tuno', 'a\tuna', 'b\tdos'],
      'pairs.tsv: 2 distinct source sentence(s); training, validation and test need at least one each',
    ),
    (
      ['a\tuno', '"b\tc"\tdos', 'd\ttres'],
      'pairs.tsv:2: a double quote opens field 1 and closes in a later one: the file is plain TSV',
    ),
  ],
)
def test_tsv_files_that_cannot_split(lines, message, tmp_path):
  path = write(tmp_path / 'pairs.tsv', '\n'.join(lines) + '\n')
  with pytest.raises(tsv_pairs.TsvFormatError) as e:
    tsv_pairs.read_pairs(path)
  assert message in str(e.value)


def test_tsv_byte_order_mark_is_dropped_and_quotes_inside_a_field_are_text(tmp_path):
  path = tmp_path / 'pairs.tsv'
  path.write_bytes('\ufeffone\tuno\nsay "hi"\tdi "hola"\nthree\ttres\n'.encode('utf-8'))
  pairs = tsv_pairs.read_pairs(str(path)).pairs
  assert [p[:2] for p in pairs] == [('one', 'uno'), ('say "hi"', 'di "hola"'), ('three', 'tres')]


def test_tsv_path_that_is_a_directory(tmp_path):
  with pytest.raises(tsv_pairs.TsvFormatError, match='cannot read sentence-pair file .*: Is a directory'):
    tsv_pairs.read_pairs(str(tmp_path))


def test_offline_catalogue_dataset_fails_fast(tmp_path, trained):
  res = run(
    'train',
    *train_args(tmp_path, str(tmp_path / 'data'), '--config.data.name=ted_hrlr_translate/pt_to_en'),
    env={'ATTNMT_OFFLINE': '1'},
  )
  assert res.returncode == 2, res.stderr[-2000:]
  assert last_line(res).startswith('error: TFDS dataset ted_hrlr_translate/pt_to_en is not prepared in ')
  assert 'the network is unreachable; prepare it on a machine with network access' in last_line(res)


def test_workdir_that_is_a_file(tmp_path, trained):
  path = write(tmp_path / 'notadir', 'x')
  res = run(
    'train',
    '--config=experiments/configs/tiny.py',
    f'--workdir={path}',
    f'--config.data.data_dir={trained[1]}',
    '--config.train.num_steps=2',
  )
  assert res.returncode == 2
  assert (
    last_line(res) == f'error: workdir {path} is a file, not a directory; pass a directory (it is created if missing)'
  )
  assert open(path).read() == 'x'


def test_workdir_below_a_file_cannot_be_written(tmp_path):
  write(tmp_path / 'file', 'x')
  with pytest.raises(
    lock.WorkdirUnusable,
    match=r'cannot write to workdir .*/file/run \(Not a directory\); pass a '
    'directory you can write to',
  ):
    lock.acquire(str(tmp_path / 'file' / 'run'))


@pytest.mark.skipif(os.geteuid() == 0, reason='root writes anywhere')
def test_unwritable_workdir(tmp_path):
  tmp_path.chmod(0o555)
  try:
    with pytest.raises(lock.WorkdirUnusable, match=r'cannot write to workdir .* \(Permission denied\)'):
      lock.acquire(str(tmp_path / 'run'))
  finally:
    tmp_path.chmod(0o755)


@pytest.fixture
def holder(tmp_path):
  """Another process holding the train lock of tmp_path/'w' (its flock), as a run training there would."""
  proc = subprocess.Popen(
    [
      sys.executable,
      '-c',
      'import sys, time; from attnmt.training import lock; lock.acquire(sys.argv[1]); print("held", flush=True); '
      'time.sleep(120)',
      str(tmp_path / 'w'),
    ],
    cwd=ROOT,
    env=dict(os.environ, PYTHONPATH=ROOT),
    stdout=subprocess.PIPE,
    text=True,
  )
  assert proc.stdout.readline().strip() == 'held'
  yield proc
  proc.kill()
  proc.wait()


def plant_lock(workdir, pid, host):
  os.makedirs(workdir, exist_ok=True)
  with open(lock.lock_path(str(workdir), 'train'), 'w') as f:
    json.dump({'pid': pid, 'host': host, 'kind': 'train'}, f)


def test_second_training_on_a_workdir_is_refused(tmp_path, trained, holder):
  import socket

  res = run('train', *train_args(tmp_path, trained[1]))
  assert res.returncode == 2
  assert last_line(res) == (
    f'error: {tmp_path / "w"} is in use: a train run holds it (PID {holder.pid} on host '
    f'{socket.gethostname()}); wait for it to end or stop it, or use another --workdir'
  )
  assert sorted(os.listdir(tmp_path / 'w')) == ['.lock-train']


def dead_pid():
  proc = subprocess.Popen([sys.executable, '-c', 'pass'])
  proc.wait()
  return proc.pid


def test_a_held_lock_whose_pid_looks_dead_from_here_is_not_taken_over(tmp_path, holder, capsys):
  """Another PID namespace (a container sharing the host name and the disk): the holder's PID names no
  process here. The kernel's lock says it is alive; after SIGKILL the lock is free and taken over."""
  import socket

  workdir, gone = str(tmp_path / 'w'), dead_pid()
  plant_lock(workdir, gone, socket.gethostname())  # what the holder would have written in its namespace
  with pytest.raises(lock.LockHeld) as e:
    lock.acquire(workdir, 'train')
  assert str(e.value) == (
    f'{workdir} is in use: a train run holds it (PID {gone} on host {socket.gethostname()}); wait for it to end '
    'or stop it, or use another --workdir'
  )
  holder.send_signal(signal.SIGKILL)
  holder.wait()
  with lock.hold(workdir, 'train') as path:
    assert json.load(open(path))['pid'] == os.getpid()
    with pytest.raises(lock.LockHeld, match='this process already holds its train lock'):
      lock.acquire(workdir, 'train')
  assert f'Took over the stale train lock of {workdir} (PID {gone} on host' in capsys.readouterr().out
  assert not os.path.exists(path)


def test_stale_lock_is_taken_over_and_said(tmp_path, capsys):
  import socket

  dead = dead_pid()
  plant_lock(tmp_path, dead, socket.gethostname())
  with lock.hold(str(tmp_path), 'train') as path:
    assert json.load(open(path))['pid'] == os.getpid()
  assert not os.path.exists(path)
  assert (
    f'Took over the stale train lock of {tmp_path} (PID {dead} on host {socket.gethostname()}; that process is gone)'
  ) in capsys.readouterr().out


def test_lock_of_another_host_is_refused_with_the_file_to_delete(tmp_path):
  plant_lock(tmp_path, 12345, 'elsewhere.example')
  with pytest.raises(
    lock.LockHeld,
    match=r'a train run holds it \(PID 12345 on host elsewhere.example\); if that '
    r'process is gone, delete .*\.lock-train',
  ):
    lock.acquire(str(tmp_path), 'train')


def test_sweep_and_train_locks_are_separate(tmp_path):
  with lock.hold(str(tmp_path), 'sweep'), lock.hold(str(tmp_path), 'train'):
    assert sorted(os.listdir(tmp_path)) == ['.lock-sweep', '.lock-train']
  assert os.listdir(tmp_path) == []


def test_fresh_with_a_bad_setting_moves_nothing(tmp_path, trained):
  workdir, data_dir = trained
  res = run(
    'train',
    '--config=experiments/configs/tiny.py',
    f'--workdir={workdir}',
    f'--config.data.data_dir={data_dir}',
    '--fresh',
    '--config.train.checkpoint_every=0',
  )
  assert res.returncode == 2 and 'train.checkpoint_every must be an integer >= 1' in last_line(res)
  assert os.path.exists(os.path.join(workdir, 'config.json'))
  assert not [p for p in os.listdir(os.path.dirname(workdir)) if '.old-' in p]


def test_config_without_a_checkpoint_does_not_block_the_corrected_command(tmp_path, trained):
  workdir = tmp_path / 'w'
  workdir.mkdir()
  config = tiny.get_config()
  config.model.score = 'general'
  checkpoints.save_config(str(workdir), config)  # left by a run that stopped before its first checkpoint
  corrected = tiny.get_config()
  trainer.check_workdir(str(workdir), corrected)  # no refusal
  os.makedirs(workdir / 'checkpoints' / '10')
  with pytest.raises(ConfigError, match=r'differs in model.score'):
    trainer.check_workdir(str(workdir), corrected)


@pytest.mark.slow
def test_translate_and_analyze_paths(tmp_path, trained):
  workdir, _ = trained
  as_dir = run('translate', f'--run={workdir}', f'--input={tmp_path}', '--beam_size=0')
  assert as_dir.returncode == 2 and last_line(as_dir) == (
    f"error: cannot read --input {tmp_path} (Is a directory); pass a text file with one sentence per line, or '-' "
    'for stdin'
  )
  out = write(tmp_path / 'out.txt', 'keep')
  analyze = run('analyze', f'--runs={workdir}', f'--out={out}')
  assert analyze.returncode == 2 and last_line(analyze) == (
    f'error: --out {out} is a file; pass a directory for the analysis (created if missing)'
  )
  assert open(out).read() == 'keep'
  below_a_file = os.path.join(out, 'analysis')  # any other OSError on a path given: the path and the reason
  other = run('analyze', f'--runs={workdir}', f'--out={below_a_file}', '--beam_size=0')
  assert other.returncode == 2 and last_line(other) == (
    f'error: {below_a_file}: Not a directory; check the path and its permissions'
  ), other.stderr[-2000:]
  assert open(out).read() == 'keep'


@pytest.mark.parametrize(
  'module,flag,message',
  [
    ('translate', '--beam_size=-1', 'error: --beam_size must be an integer >= 0, got -1'),
    ('translate', '--max_source_tokens=-1', 'error: --max_source_tokens (-1) must be >= 0 (0: no limit)'),
    ('analyze', '--beam_size=-2', 'error: --beam_size must be an integer >= 0, got -2'),
    ('analyze', '--num_heatmaps=-1', 'error: --num_heatmaps must be an integer >= 0, got -1'),
    ('analyze', '--report_sentences=-3', 'error: --report_sentences must be an integer >= 0, got -3'),
    ('analyze', '--delta=nan', 'error: --delta must be a finite number > 0, got nan'),
  ],
)
def test_negative_counts_at_the_entry_points_are_refused_by_their_declared_rows(module, flag, message, tmp_path):
  """analyze's and translate's flags that are declared settings (attnmt.analysis.settings, compare.family) are
  checked by their rows, the same check sweep.beam_size or sweep.delta gets: one line naming the flag."""
  res = run(module, f'--{"run" if module == "translate" else "runs"}={tmp_path}', flag)
  assert res.returncode == 2 and last_line(res).startswith(message), res.stderr[-2000:]


@pytest.mark.parametrize(
  'extra,message',
  [
    (
      ['--config.sweep.contrasts=nonesuch'],
      "error: contrasts 'nonesuch': 'nonesuch' is not a variant compared here (additive/bahdanau/global, "
      "none/bahdanau/global); use 'all', those names, or pairs written A~B",
    ),
    (
      ['--config.sweep.contrasts=additive/bahdanau/global~nonesuch', '--config.sweep.rounds=2'],
      "error: contrasts 'additive/bahdanau/global~nonesuch': 'nonesuch' is not a variant compared here",
    ),
    (['--config.sweep.rounds=2', '--config.sweep.seeds_per_round=1'], 'error: sweep.seeds_per_round'),
    (['--config.sweep.delta=0'], 'error: sweep.delta'),
  ],
)
@pytest.mark.slow
def test_a_sweep_family_that_cannot_be_decided_is_refused_before_training(extra, message, tmp_path):
  """A family naming no variant, a round of one seed or a margin of 0: one line, nothing written."""
  res = run('sweep', '--config=experiments/configs/tiny.py', f'--workdir={tmp_path}/sweep', *extra)
  assert res.returncode == 2 and last_line(res).startswith(message), res.stderr[-2000:]
  assert not os.path.exists(tmp_path / 'sweep')


def test_a_10000_word_sentence_decodes_in_bounded_memory():
  """Without kept attention, greedy decoding of a batch of 16 sentences 10,000 tokens long needs well under
  1 GB (compiled, not run); keeping the attention would need the ~9.6 GB B x T x S history."""
  import jax
  import jax.numpy as jnp
  from attnmt.model.seq2seq import init_params

  cfg = ModelConfig(
    dropout=0.0,
    source_vocab_size=64,
    target_vocab_size=64,
    embed_size=16,
    encoder_hidden_size=16,
    decoder_hidden_size=32,
    score='additive(size=16)',
    query_timing='bahdanau(deep_output_size=16)',
  )
  params = init_params(cfg, jax.random.key(0))
  src, lengths = jax.ShapeDtypeStruct((16, 10001), jnp.int32), jax.ShapeDtypeStruct((16,), jnp.int32)

  def footprint(keep):
    m = decoding.greedy.lower(cfg, params, src, lengths, max_len=15016, keep_attention=keep).compile().memory_analysis()
    return m.temp_size_in_bytes + m.output_size_in_bytes

  assert footprint(False) < 0.5e9
  assert footprint(True) > 9e9


def test_a_seed_beyond_32_bits_is_one_line():
  config = tiny.get_config()
  config.train.seeds = '0,18446744073709551616'
  with pytest.raises(ConfigError, match=r'^train.seeds must be 32-bit integers .*got 18446744073709551616$'):
    trainer.check_config(config)


def test_a_user_module_that_fails_on_import_is_named(tmp_path, monkeypatch):
  (tmp_path / 'broken_scores.py').write_text('raise RuntimeError("a bug in my module")\n')
  monkeypatch.syspath_prepend(str(tmp_path))
  with pytest.raises(ConfigError) as e:
    ModelConfig.from_dict({'score': 'broken_scores:Mine'})
  assert str(e.value) == (
    "model.score 'broken_scores:Mine': importing module 'broken_scores' raised RuntimeError: a bug in my module; "
    'fix that module'
  )


def test_a_tsv_read_through_a_pipe_is_refused_with_one_line(tmp_path):
  """`--config.data.tsv_path=<(cat pairs.tsv)`: a pipe can be read once, and the corpus is read again later
  (its first read saw data, the others nothing)."""
  read_end, write_end = os.pipe()
  os.write(write_end, b'one\tuno\ntwo\tdos\nthree\ttres\n')
  os.close(write_end)
  res = subprocess.run(
    [
      sys.executable,
      '-m',
      'experiments.train',
      *train_args(
        tmp_path, str(tmp_path / 'data'), '--config.data.name=tsv_pairs', f'--config.data.tsv_path=/dev/fd/{read_end}'
      ),
    ],
    cwd=ROOT,
    env=ENV,
    capture_output=True,
    text=True,
    timeout=300,
    pass_fds=(read_end,),
  )
  os.close(read_end)
  assert res.returncode == 2, res.stderr[-2000:]
  assert last_line(res) == (
    f'error: data.tsv_path /dev/fd/{read_end} is a pipe or a device, not a file: attnmt reads it more than once (to '
    'build the corpus, and again to resume or analyse the run); save it to a file first (e.g. `... > pairs.tsv`) '
    'and pass that'
  )


@pytest.mark.slow
def test_analyze_reads_a_pharaoh_file_with_a_byte_order_mark_and_names_a_bad_line(tmp_path, trained):
  workdir, _ = trained
  gold = tmp_path / 'gold.align'
  gold.write_bytes(('\ufeff' + '0-0 0p0\n' * 40).encode('utf-8'))  # the test split's 40 sentences (one word at least)
  res = run(
    'analyze', f'--runs={workdir}', f'--out={tmp_path / "a"}', '--beam_size=0', '--num_heatmaps=0', f'--pharaoh={gold}'
  )
  assert res.returncode == 0, res.stderr[-2000:]
  assert json.loads((tmp_path / 'a' / 'analysis.json').read_text())[0]['aer'][0] >= 0
  gold.write_bytes(('\ufeff0-0\n0-0\n0-x\n' + '0-0\n' * 37).encode('utf-8'))
  res = run('analyze', f'--runs={workdir}', f'--out={tmp_path / "b"}', '--beam_size=0', f'--pharaoh={gold}')
  assert res.returncode == 2 and last_line(res) == (
    f"error: {gold}:3: '0-x' is not a Pharaoh link; write 0-based source-target word pairs such as '0-0 1-2' "
    'separated by spaces (an empty line: no links)'
  )
  assert not (tmp_path / 'b' / 'analysis.json').exists()
  # A link beyond its sentence would count as missed (AER 1.0, no warning): refused, naming file, line and link.
  gold.write_text('0-0\n' * 4 + '0-0 999-0\n' + '0-0\n' * 35)
  res = run('analyze', f'--runs={workdir}', f'--out={tmp_path / "c"}', '--beam_size=0', f'--pharaoh={gold}')
  assert res.returncode == 2 and last_line(res).startswith(
    f'error: {gold}:5: link 999-0 names source word 999, but test sentence 5 has '
  )
  assert last_line(res).endswith('indices are 0-based over whitespace-separated words, source first')
  assert not (tmp_path / 'c' / 'analysis.json').exists()
