"""Runs an entry point paused in one phase, for tests/experiments/test_signals.py: `python pausing.py PHASE
MODULE FLAGS...` wraps the function that opens PHASE so that it says `paused in PHASE` on stdout and sleeps up to
a minute at its entry, then runs MODULE as `python -m MODULE FLAGS...` would. A test signals the process once the
line appears, so the signal lands inside that phase deterministically; attnmt itself has no pause hook."""

import functools
import importlib
import runpy
import sys
import time

# Each phase: the module and function entered at its start.
PHASES = {
  'prepare': ('attnmt.data.prepare', '_vocab_dir'),  # data preparation, corpus loaded, the cache lock held
  'final_evaluation': ('attnmt.training.results', 'final_results'),  # training's test evaluation
  'analysis': ('attnmt.analysis.run_analysis', 'analyze_run'),  # one run's analysis
}


def pause_in(phase: str) -> None:
  """Wraps the function that opens `phase` so that it announces the pause and sleeps before it runs."""
  module_name, name = PHASES[phase]
  module = importlib.import_module(module_name)
  original = getattr(module, name)

  @functools.wraps(original)
  def paused(*args, **kwargs):
    print(f'paused in {phase}', flush=True)
    time.sleep(60)
    return original(*args, **kwargs)

  setattr(module, name, paused)


if __name__ == '__main__':
  phase, entry = sys.argv[1], sys.argv[2]
  pause_in(phase)
  sys.argv = [entry, *sys.argv[3:]]
  runpy.run_module(entry, run_name='__main__', alter_sys=True)
