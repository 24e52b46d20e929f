"""The errors attnmt raises for what a user can fix, each with a one-line message: a setting that cannot work,
a run directory that cannot be read, input the API cannot use."""


class ConfigError(ValueError):
  """A configuration value that cannot work; the message says which and how to fix it."""


class UnknownChoice(ConfigError):
  """A setting that names something that does not exist or cannot be loaded (an unknown score, window,
  normaliser or decoder form, an import path that fails, an option the component does not declare or a value it
  cannot take): a mistake in the config itself, never a
  combination a sweep may skip."""


class CheckpointError(RuntimeError):
  """A run directory that cannot be read; the message says what is wrong and what to do."""


class InputError(ValueError):
  """Input the API cannot use (an empty list, a seed the run lacks, a sentence longer than the model takes);
  the message says which and what to pass instead."""
