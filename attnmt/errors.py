"""The error every layer raises for a setting that cannot work."""


class ConfigError(ValueError):
  """A configuration value that cannot work; the message says which and how to fix it."""
