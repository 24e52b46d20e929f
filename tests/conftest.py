"""What the tests share.

`small`: the small model the model tests build on (tests/small_model.py), as a fresh dict per test.

One JAX compilation cache for the whole run: most of the suite's time is XLA compiling the same tiny
models again, in each test and in each `python -m experiments...` the tests start. The cache lives in a
temporary directory made when the run starts (set JAX_COMPILATION_CACHE_DIR to keep one across runs);
pytest-xdist's workers and every subprocess inherit it through the environment. A cached executable is
the one the compiler produced, so results are the same with it or without it. The size limit turns on
JAX's file lock, so that processes writing and reading one entry at once never see half a file.

Programs compile fast and run slow (tests/compiling.py: LLVM's optimisation off, XLA's older fusion emitter):
most tests compile far more than they run.
"""

import os
import shutil
import tempfile

import pytest

import compiling
from small_model import SMALL

CACHE_ENV = {
  # Programs that compile faster are not worth a file: with every program cached (0 here) one tiny run was
  # 17 % faster alone, but the whole suite took 3,062 s against 2,706 s, in-process model tests up to 9 times
  # longer, as the cache's size limit walks a directory of thousands of small entries on each write.
  'JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS': '0.2',
  'JAX_COMPILATION_CACHE_MAX_SIZE': str(8 << 30),
}


def pytest_configure(config):
  if 'JAX_COMPILATION_CACHE_DIR' not in os.environ:  # the controller; xdist workers inherit its directory
    os.environ['JAX_COMPILATION_CACHE_DIR'] = config._attnmt_jax_cache = tempfile.mkdtemp(prefix='attnmt-jax-cache-')
  for key, value in CACHE_ENV.items():
    os.environ.setdefault(key, value)
  os.environ['XLA_FLAGS'] = compiling.with_fast_compilation(os.environ.get('XLA_FLAGS', ''))


def pytest_unconfigure(config):
  made = getattr(config, '_attnmt_jax_cache', None)
  if made:
    shutil.rmtree(made, ignore_errors=True)


@pytest.fixture(autouse=True)
def _fresh_training_programs(request):
  """A test that monkeypatches may replace what a training step is traced from (train_step.train_step, the
  model's scans): it neither reuses a step that trainer cached before it nor leaves one behind."""
  if 'monkeypatch' not in request.fixturenames:
    yield
    return
  from attnmt.training import trainer  # here, not above: jax reads its cache settings from the environment

  trainer._seed_functions.cache_clear()
  yield
  trainer._seed_functions.cache_clear()


@pytest.fixture
def small() -> dict:
  """The small model's ModelConfig fields (a fresh dict per test)."""
  return dict(SMALL)
