"""SIGINT and SIGTERM outside the training loop (data preparation, the final evaluation, analysis), through the
entry points as real subprocesses: one line on stderr, no traceback, status 128 + signal, a workdir that the
same command resumes. Each phase is reached deterministically: tests/experiments/pausing.py runs the entry point
with the function that opens the phase made to pause at its entry.
The training loop's own stop (a checkpoint, then status 143) is tests/training/test_trainer_faults.py's."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from attnmt.training import guards

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENV = dict(os.environ, JAX_PLATFORMS='cpu', PYTHONPATH=ROOT, PYTHONUNBUFFERED='1')
PAUSING = os.path.join(ROOT, 'tests', 'experiments', 'pausing.py')


def train_args(workdir, data_dir):
  return [
    '-m',
    'experiments.train',
    '--config=experiments/configs/tiny.py',
    f'--workdir={workdir}',
    f'--config.data.data_dir={data_dir}',
    '--config.train.num_steps=10',
    '--config.train.eval_every=10',
  ]


def signal_in(phase, args, signum):
  """Runs `args` (`-m MODULE FLAGS...`) paused in `phase`, sends `signum` there; (return code, stdout, stderr)."""
  assert args[0] == '-m', args
  proc = subprocess.Popen(
    [sys.executable, PAUSING, phase, *args[1:]],
    cwd=ROOT,
    env=ENV,
    stdout=subprocess.PIPE,
    stderr=subprocess.PIPE,
    text=True,
  )
  out = []
  deadline = time.time() + 300
  for line in proc.stdout:
    out.append(line)
    if line.startswith(f'paused in {phase}'):
      break
    assert time.time() < deadline, f'timed out waiting for the {phase} phase'
  else:
    proc.wait()
    raise AssertionError(f'the process ended before the {phase} phase: {proc.stderr.read()[-3000:]}')
  proc.send_signal(signum)
  rest, err = proc.communicate(timeout=120)
  return proc.returncode, ''.join(out) + rest, err


def last_line(err):
  return err.rstrip('\n').split('\n')[-1]


def finish(args):
  res = subprocess.run([sys.executable, *args], cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=600)
  assert res.returncode == 0, res.stderr[-3000:]
  return res


@pytest.mark.slow
def test_ctrl_c_during_data_preparation(tmp_path):
  workdir, args = tmp_path / 'run', train_args(tmp_path / 'run', tmp_path / 'data')
  code, _, err = signal_in('prepare', args, signal.SIGINT)
  assert code == 130
  assert 'Traceback' not in err
  assert last_line(err).endswith(
    f'stopped by signal 2 (SIGINT); {workdir} keeps every checkpoint saved so far: run the same command again to resume'
  )
  finish(args)
  assert (workdir / 'results.json').exists()


@pytest.fixture(scope='session')  # with xdist_group: built once, though xdist interleaves modules
def stopped_in_final_evaluation(tmp_path_factory):
  """A run stopped by SIGTERM in its final evaluation, then finished by the same command: its workdir, what the
  stopped process returned (code, stdout, stderr), what the workdir held then, and the finishing process."""
  root = tmp_path_factory.mktemp('final_evaluation')
  workdir, args = root / 'run', train_args(root / 'run', root / 'data')
  stopped = signal_in('final_evaluation', args, signal.SIGTERM)
  held = {
    'results.json': (workdir / 'results.json').exists(),
    'checkpoints/10': (workdir / 'checkpoints' / '10').is_dir(),
  }
  return workdir, stopped, held, finish(args)


@pytest.mark.xdist_group('signals_final_evaluation')  # one worker makes the shared run
@pytest.mark.slow
def test_sigterm_during_the_final_evaluation_then_the_same_command_finishes(stopped_in_final_evaluation):
  workdir, (code, out, err), held, res = stopped_in_final_evaluation
  assert code == 143 and 'Traceback' not in err, err[-3000:]
  assert last_line(err) == (
    f'stopped by signal 15 (SIGTERM); {workdir} keeps every checkpoint saved so far: run the same command again '
    'to resume'
  )
  assert held == {'results.json': False, 'checkpoints/10': True}
  assert f'{workdir} already trained to step 10; computing its results' in res.stdout
  assert json.loads((workdir / 'results.json').read_text())['best_step'] == 10


@pytest.mark.xdist_group('signals_final_evaluation')  # one worker makes the shared run
def test_ctrl_c_during_analysis(tmp_path, stopped_in_final_evaluation):
  workdir = stopped_in_final_evaluation[0]  # a finished run
  args = ['-m', 'experiments.analyze', f'--runs={workdir}', f'--out={tmp_path / "analysis"}', '--beam_size=0']
  code, _, err = signal_in('analysis', args, signal.SIGINT)
  assert code == 130 and 'Traceback' not in err, err[-3000:]
  assert last_line(err) == (
    'stopped by signal 2 (SIGINT); the analysis is incomplete (the runs are untouched): run the same command again'
  )


def test_a_signal_during_a_save_waits_for_its_end():
  """A second Ctrl-C (or any signal once guards.exit_on_signals holds) inside `saving()` takes effect after it."""
  previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
  done = []
  try:
    guards.exit_on_signals()
    with pytest.raises(guards.Interrupted) as e:
      with guards.saving():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.2)  # the handler has run by now, and deferred the signal
        done.append('saved')
    assert done == ['saved'] and e.value.exit_code == 143
    with pytest.raises(guards.Interrupted):  # outside a save, at once
      os.kill(os.getpid(), signal.SIGINT)
      time.sleep(1)
    stop = guards.StopSignals()
    with stop:  # the training loop: the first Ctrl-C asks for a stop, a second one inside a save waits
      os.kill(os.getpid(), signal.SIGINT)
      time.sleep(0.1)
      assert stop.requested == signal.SIGINT
      with pytest.raises(guards.Interrupted):
        with guards.saving():
          os.kill(os.getpid(), signal.SIGINT)
          time.sleep(0.2)
          done.append('saved again')
    assert done == ['saved', 'saved again']
  finally:
    for s, handler in previous.items():
      signal.signal(s, handler)
