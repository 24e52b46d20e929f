"""Progress bars in a log (attnmt/progress.py): whole lines, one per 10 % or per interval, never a carriage return;
a stage bar that a quick pass leaves silent."""

import io

from attnmt import progress


class FakeClock:
  def __init__(self):
    self.now = 50.0

  def __call__(self):
    return self.now


def test_a_log_gets_a_line_per_tenth_and_a_last_one():
  out, clock = io.StringIO(), FakeClock()
  bar = progress.bar(95, 'decode', 'sentence', out, clock=clock)
  for _ in progress.counted(range(95), bar):
    clock.now += 1.0
  bar.close()
  lines = out.getvalue().splitlines()
  assert '\r' not in out.getvalue() and all(line.startswith('decode:') for line in lines)
  counts = [int(line.split('|')[2].split('/')[0]) for line in lines]
  assert counts == [0, 10, 19, 29, 38, 48, 57, 67, 76, 86, 95], counts  # each 10 % crossed, then the end


def test_without_a_total_lines_come_by_the_clock():
  out, clock = io.StringIO(), FakeClock()
  bar = progress.bar(None, 'read', stream=out, clock=clock, every_seconds=30)
  for _ in range(100):
    clock.now += 1.0
    bar.update()
  bar.close()
  assert [line.split()[1] for line in out.getvalue().splitlines()] == ['0it', '30it', '60it', '90it', '100it']


def test_stages_are_silent_when_quick_and_named_when_slow():
  for seconds, shown in ((0.0, 0), (2.0, 3)):
    out, clock = io.StringIO(), FakeClock()
    bar = progress.bar(3, 'prepare', 'stage', out, bar_format=progress.STAGES_FORMAT, delay=1.0, clock=clock)
    for name in ('corpus', 'tokenizers', 'encoding'):
      bar.set_postfix_str(name)
      clock.now += seconds
      bar.update()
    bar.close()
    lines = out.getvalue().splitlines()
    assert len(lines) == shown and '\r' not in out.getvalue(), lines
    if shown:
      assert lines[0] == 'prepare: 1/3 stages [00:02], corpus' and lines[-1].startswith('prepare: 3/3 stages')
