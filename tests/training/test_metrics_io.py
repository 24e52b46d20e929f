"""The progress line counts against what ends training: num_steps, or the time budget when it ends first."""

import io

from attnmt.training.metrics_io import Progress


class FakeClock:
  def __init__(self):
    self.now = 1000.0

  def __call__(self):
    return self.now


def test_a_time_budget_that_ends_training_first_drives_the_bar_and_the_eta():
  clock, out = FakeClock(), io.StringIO()
  progress = Progress(100000, 0, stream=out, budget_seconds=108.0, clock=clock)  # a 1.8-minute budget
  assert progress.deadline == 1108.0
  clock.now += 54.0  # half the budget, 400 steps done: 100000 steps would take 3.75 hours
  progress.update(400, 1000.0, loss=2.5)
  line = out.getvalue().strip()
  assert line.startswith('[############............] 0.9/1.8 min of the time budget | step 400 (~800 of 100000 when')
  assert 'ETA 0:00:54' in line and '400/100000' not in line
  clock.now += 60.0  # past the deadline: the bar is full, nothing left
  progress.update(800, 1000.0, loss=2.0)
  assert out.getvalue().splitlines()[-1].startswith('[########################] 1.9/1.8 min')
  assert 'ETA 0:00:00' in out.getvalue().splitlines()[-1]


def test_steps_that_end_before_the_budget_and_no_budget_count_steps():
  for budget in (3600.0, 0.0):
    clock, out = FakeClock(), io.StringIO()
    progress = Progress(1000, 200, stream=out, budget_seconds=budget, clock=clock)  # resumed at step 200
    assert (progress.deadline is None) == (budget == 0.0)
    clock.now += 20.0
    progress.update(400, 1000.0)  # 10 steps/s since the resume: 600 steps left take a minute
    line = out.getvalue().strip()
    assert line.startswith('[#########...............] 400/1000 | ') and 'ETA 0:01:00' in line, line
