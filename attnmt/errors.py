"""The errors attnmt raises for what a user can fix, each with a one-line message: a setting that cannot work,
a run directory that cannot be read, input the API cannot use. And the tests' pause points."""

import os
import time


class ConfigError(ValueError):
  """A configuration value that cannot work; the message says which and how to fix it."""


class UnknownChoice(ConfigError):
  """A setting that names something that does not exist or cannot be loaded (an unknown score, window,
  normaliser or decoder form, an import path that fails): a mistake in the config itself, never a
  combination a sweep may skip."""


class CheckpointError(RuntimeError):
  """A run directory that cannot be read; the message says what is wrong and what to do."""


class InputError(ValueError):
  """Input the API cannot use (an empty list, a seed the run lacks, a sentence longer than the model takes);
  the message says which and what to pass instead."""


def pause_point(phase: str) -> None:
  """Fault injection for the tests: with ATTNMT_PAUSE_AT=`phase`, says so on stdout and sleeps up to a minute,
  so that a test can signal the process inside that phase deterministically. Phases: 'prepare' (data
  preparation, with the cache lock held), 'final_evaluation' (training's test evaluation), 'analysis'."""
  if os.environ.get('ATTNMT_PAUSE_AT') == phase:
    print(f'paused in {phase} (ATTNMT_PAUSE_AT)', flush=True)
    time.sleep(60)
