"""experiments/common.use_compilation_cache: where the entry points cache compiled programs, and that the
user's own JAX settings and ATTNMT_JAX_CACHE=0 win. (That a command really writes and reads the cache is
checked end to end in test_entry_points.py's translate.)"""

import os

import jax
import pytest

from experiments import common

KEYS = ('jax_compilation_cache_dir', 'jax_persistent_cache_min_compile_time_secs', 'jax_compilation_cache_max_size')


@pytest.fixture
def jax_settings(monkeypatch, tmp_path):
  """The three JAX settings restored after the test, and a user environment without the tests' cache."""
  before = {k: getattr(jax.config, k) for k in KEYS}
  for var in (
    'JAX_COMPILATION_CACHE_DIR',
    'JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS',
    'JAX_COMPILATION_CACHE_MAX_SIZE',
  ):
    monkeypatch.delenv(var, raising=False)
  monkeypatch.delenv('ATTNMT_JAX_CACHE', raising=False)
  monkeypatch.setenv('XDG_CACHE_HOME', str(tmp_path))
  yield tmp_path
  for k, v in before.items():
    jax.config.update(k, v)


def test_a_users_command_caches_under_xdg_cache_home(jax_settings):
  common.use_compilation_cache()
  assert jax.config.jax_compilation_cache_dir == os.path.join(str(jax_settings), 'attnmt', 'jax')
  assert os.path.isdir(jax.config.jax_compilation_cache_dir)
  assert jax.config.jax_persistent_cache_min_compile_time_secs == common.CACHE_MIN_COMPILE_SECONDS == 0.2
  assert jax.config.jax_compilation_cache_max_size == common.CACHE_MAX_BYTES == 4 * 1024**3


def test_the_users_own_settings_and_the_switch_win(jax_settings, monkeypatch):
  before = jax.config.jax_compilation_cache_dir
  monkeypatch.setenv('ATTNMT_JAX_CACHE', '0')
  assert common.compilation_cache_dir() is None
  common.use_compilation_cache()
  assert jax.config.jax_compilation_cache_dir == before and not (jax_settings / 'attnmt').exists()
  monkeypatch.delenv('ATTNMT_JAX_CACHE')
  monkeypatch.setenv('JAX_COMPILATION_CACHE_DIR', str(jax_settings / 'mine'))
  monkeypatch.setenv('JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS', '5')
  assert common.compilation_cache_dir() == str(jax_settings / 'mine')
  common.use_compilation_cache()  # JAX reads its own variables: nothing is overridden
  assert jax.config.jax_compilation_cache_dir == before and not (jax_settings / 'attnmt').exists()


def test_an_unwritable_cache_home_compiles_without_a_cache(jax_settings):
  if os.geteuid() == 0:
    blocker = jax_settings / 'attnmt'
    blocker.write_text('a file where the cache folder would go')  # root can write anywhere, but not into a file
  else:
    jax_settings.chmod(0o500)
  before = jax.config.jax_compilation_cache_dir
  try:
    common.use_compilation_cache()
  finally:
    jax_settings.chmod(0o700)
  assert jax.config.jax_compilation_cache_dir == before
