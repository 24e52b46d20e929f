"""The error every layer raises for a setting that cannot work, and the tests' pause points."""

import os
import time


class ConfigError(ValueError):
  """A configuration value that cannot work; the message says which and how to fix it."""


def pause_point(phase: str) -> None:
  """Fault injection for the tests: with ATTNMT_PAUSE_AT=`phase`, says so on stdout and sleeps up to a minute,
  so that a test can signal the process inside that phase deterministically. Phases: 'prepare' (data
  preparation, with the cache lock held), 'final_evaluation' (training's test evaluation), 'analysis'."""
  if os.environ.get('ATTNMT_PAUSE_AT') == phase:
    print(f'paused in {phase} (ATTNMT_PAUSE_AT)', flush=True)
    time.sleep(60)
