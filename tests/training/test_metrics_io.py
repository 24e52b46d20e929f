"""Training's progress bar: an ETA measured after the compiled first step, counted against what ends training
(num_steps, or the time budget when it ends first), and plain periodic lines in a log file."""

import io
import os
import re
import subprocess

import pytest
import sys

import jax

from attnmt.training.metrics_io import COMPILE_EVENTS, Progress

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class FakeClock:
  def __init__(self):
    self.now = 1000.0

  def __call__(self):
    return self.now


def _eta(line: str) -> str:
  return re.search(r'<([\d:?]+)', line).group(1)


def test_the_eta_counts_from_the_end_of_the_first_step_not_its_compilation():
  clock, out = FakeClock(), io.StringIO()
  progress = Progress(1001, 0, stream=out, clock=clock)
  clock.now += 600.0  # the first step compiles for 10 minutes
  progress.compiled(1)
  for step in range(101, 1001, 100):  # then 10 steps/s
    clock.now += 10.0
    progress.update(step, 1000.0, loss=2.5)
  line = out.getvalue().splitlines()[-1]
  assert line.startswith('train:') and '901/1001' in line and 'loss=2.5' in line, line
  assert _eta(line) == '00:10', line  # 100 steps at 10 steps/s; the compilation's 600 s would make it 01:16


def test_compilations_are_left_out_of_the_eta_and_evaluations_count_in_it():
  """Steps at 10/s and an evaluation every 200 steps taking 10 s; the first evaluation also compiles the
  decoders for 290 s, which JAX reports (jax.monitoring). The ETA is the time left by steps and
  evaluations alike."""
  clock, out = FakeClock(), io.StringIO()
  progress = Progress(1001, 0, stream=out, clock=clock)
  progress.compiled(1)
  for step in range(101, 1001, 100):
    clock.now += 10.0
    progress.update(step, 1000.0)
    if (step - 1) % 200 == 0:
      clock.now += 10.0
      if step == 201:  # a trace of 40 s holding another of 30 s, then 250 s of compilation: 290 s
        clock.now += 30.0
        jax.monitoring.record_event_duration_secs(COMPILE_EVENTS[0], 30.0)
        clock.now += 10.0
        jax.monitoring.record_event_duration_secs(COMPILE_EVENTS[0], 40.0)
        clock.now += 250.0
        jax.monitoring.record_event_duration_secs(COMPILE_EVENTS[2], 250.0)
  progress.close()
  jax.monitoring.record_event_duration_secs(COMPILE_EVENTS[1], 1000.0)  # after close: not listened to
  # At step 901: 900 steps in 90 s plus 4 evaluations in 40 s, so 6.9 steps/s: 14 s for the last 100 steps
  # (the true time left is 10 s plus one more evaluation's 10 s); counting the compilation it would say 56 s.
  assert _eta(out.getvalue().splitlines()[-1]) == '00:14', out.getvalue()


def test_a_time_budget_that_ends_training_first_is_the_bars_total_and_its_eta():
  clock, out = FakeClock(), io.StringIO()
  progress = Progress(100000, 0, stream=out, budget_seconds=108.0, clock=clock)  # a 1.8-minute budget
  assert progress.deadline == 1108.0
  clock.now += 8.0
  progress.compiled(1)
  clock.now += 46.0  # 400 more steps in 46 s: the budget's 54 s left reach step 401 + 469
  progress.update(401, 1000.0, loss=2.5)
  line = out.getvalue().splitlines()[-1]
  assert '401/870' in line and 'ends the run at ~step 870 of 100000' in line, line
  assert _eta(line) == '00:53', line  # (870 - 401) steps at 400/46 steps/s: the budget left, to the second


def test_steps_that_end_before_the_budget_and_no_budget_count_steps():
  for budget in (3600.0, 0.0):
    clock, out = FakeClock(), io.StringIO()
    progress = Progress(1000, 200, stream=out, budget_seconds=budget, clock=clock)  # resumed at step 200
    assert (progress.deadline is None) == (budget == 0.0)
    progress.compiled(201)
    clock.now += 20.0
    progress.update(401, 1000.0)  # 10 steps/s since the compiled step: 599 steps left take 59.9 s
    line = out.getvalue().splitlines()[-1]
    assert '401/1000' in line and _eta(line) == '00:59' and 'budget' not in line, line


@pytest.mark.slow
def test_training_into_a_log_file_prints_periodic_lines_and_no_carriage_returns(tmp_path):
  log = tmp_path / 'train.log'
  with open(log, 'w') as f:
    res = subprocess.run(
      [
        sys.executable,
        '-m',
        'experiments.train',
        '--config=experiments/configs/tiny.py',
        f'--workdir={tmp_path / "run"}',
        f'--config.data.data_dir={tmp_path / "data"}',
        '--config.train.num_steps=20',
        '--config.train.log_every=5',
        '--config.train.eval_every=20',
      ],
      cwd=ROOT,
      env=dict(os.environ, JAX_PLATFORMS='cpu', PYTHONPATH=ROOT),
      stdout=f,
      stderr=subprocess.STDOUT,
      timeout=600,
    )
  text = log.read_text()
  assert res.returncode == 0, text[-3000:]
  assert '\r' not in text
  bar = [line for line in text.splitlines() if line.startswith('train:')]
  # a line when the bar starts, one per logged step (each is 25 % of the run), and none twice
  assert [re.search(r' (\d+)/20 ', line).group(1) for line in bar] == ['0', '5', '10', '15', '20'], bar
  assert any(line.startswith('step 20 validation: BLEU') for line in text.splitlines())
