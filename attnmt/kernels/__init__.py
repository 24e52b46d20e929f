"""CPU kernels through XLA's FFI for the decoder's attention (`attention.cc`).

- `additive_scores`: Bahdanau's e_i = v . tanh(q + k_i) and its gradient. XLA:CPU runs them as
  several passes over the batch x S x A keys at every decoder step; the kernel makes one.
- `context`: c = Σ_i a_i h_i per row and its input gradient, which XLA:CPU runs as Eigen batched
  matrix-vector products on one thread.

Both share rows with XLA's intra-op threads. Together they save about 27 ms of the bench-config
training step (benchmarks/README.md, "The attention as CPU kernels").

The library is compiled on first use with the system's C++ compiler (`g++`, or $CXX) into a cache
directory ($ATTNMT_KERNEL_CACHE, else ~/.cache/attnmt/kernels), keyed by the source, the flags, the
jaxlib version and the CPU's instruction sets (it is built with -march=native); `launch.sh setup`
builds it ahead. Without a compiler, or with ATTNMT_KERNELS=0, `available()` is False and callers
use their JAX path, which is also what runs on GPUs and TPUs (callers pick per platform with
`jax.lax.platform_dependent`), for other dtypes than float32, in programs traced under a mesh of
several devices (data-parallel ones, see `parallel.tracing`: XLA's partitioner cannot split a custom
call) and under `disabled()`.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import logging
import os
import platform
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

import jax
import jax.numpy as jnp
import jaxlib

SOURCE = Path(__file__).with_name('attention.cc')
# Fast-math lets the compiler replace tanh's division by a reciprocal estimate and one Newton step
# (-mrecip); the source keeps NaNs itself. Compile-only: linking with these flags would add
# crtfastmath.o, which sets flush-to-zero for the whole process when the library loads. On x86 the
# kernel stays with 256-bit vectors: built with AVX-512 it is as fast itself, but the encoder's
# products (XLA's) run 5-10 % slower on an AMD EPYC (benchmarks/README.md, "The attention as CPU kernels").
_X86 = platform.machine().lower() in ('x86_64', 'amd64')
COMPILE_FLAGS = (
  '-O3',
  *(('-march=native', '-mno-avx512f', '-mrecip') if _X86 else ('-mcpu=native',)),
  '-ffast-math',
  '-fopenmp-simd',
  '-std=c++17',
  '-fPIC',
)
FORWARD, BACKWARD = 'attnmt_additive_forward', 'attnmt_additive_backward'
CONTEXT, CONTEXT_GRAD = 'attnmt_context_forward', 'attnmt_context_input_grad'

_state = threading.local()
_lock = threading.Lock()


def _cpu_features() -> str:
  try:
    for line in Path('/proc/cpuinfo').read_text().splitlines():
      if line.startswith(('flags', 'Features')):
        return line
  except OSError:
    pass
  return platform.processor() or platform.machine()


def library_path() -> Path:
  """Where the compiled library for this source, compiler flags, jaxlib and CPU lives."""
  key = '\n'.join([SOURCE.read_text(), ' '.join(COMPILE_FLAGS), jaxlib.__version__, _cpu_features()])
  cache = Path(os.environ.get('ATTNMT_KERNEL_CACHE') or Path.home() / '.cache' / 'attnmt' / 'kernels')
  return cache / f'attention-{hashlib.sha256(key.encode()).hexdigest()[:16]}.so'


def _compile(target: Path) -> None:
  """Compiles the source into `target` (atomically: concurrent processes may race to build it)."""
  cxx = os.environ.get('CXX') or 'g++'
  if not shutil.which(cxx):
    raise FileNotFoundError(f'no C++ compiler {cxx!r} on PATH (install g++ or set CXX)')
  target.parent.mkdir(parents=True, exist_ok=True)
  with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
    obj, lib = Path(tmp) / 'kernel.o', Path(tmp) / target.name
    include = ['-I', jax.ffi.include_dir()]
    for cmd in (
      [cxx, *COMPILE_FLAGS, *include, '-c', str(SOURCE), '-o', str(obj)],
      [cxx, '-shared', str(obj), '-o', str(lib)],
    ):
      done = subprocess.run(cmd, capture_output=True, text=True)
      if done.returncode != 0:
        raise RuntimeError(f'{" ".join(cmd)} failed: {done.stderr.strip().splitlines()[-1:] or done.returncode}')
    os.replace(lib, target)


@functools.cache
def _load() -> bool:
  if os.environ.get('ATTNMT_KERNELS', '1') == '0':
    return False
  path = library_path()
  try:
    with _lock:
      if not path.exists():
        _compile(path)
    lib = ctypes.cdll.LoadLibrary(str(path))
  except (OSError, RuntimeError) as err:
    logging.warning('attnmt: CPU attention kernel unavailable (%s); using the JAX path, which is slower on CPU', err)
    return False
  jax.ffi.register_ffi_target(FORWARD, jax.ffi.pycapsule(lib.AttnmtAdditiveForward), platform='cpu')
  jax.ffi.register_ffi_target(BACKWARD, jax.ffi.pycapsule(lib.AttnmtAdditiveBackward), platform='cpu')
  jax.ffi.register_ffi_target(CONTEXT, jax.ffi.pycapsule(lib.AttnmtContextForward), platform='cpu')
  jax.ffi.register_ffi_target(CONTEXT_GRAD, jax.ffi.pycapsule(lib.AttnmtContextInputGrad), platform='cpu')
  return True


def available() -> bool:
  """Whether the program being traced may use the kernel: built and registered, not switched off by
  `disabled()`, and no mesh of several devices set (`parallel.tracing`): XLA's partitioner would
  gather a custom call's operands onto every device and run it on the whole batch there."""
  if getattr(_state, 'disabled', False):
    return False
  mesh = jax.sharding.get_abstract_mesh()
  return (mesh.empty or mesh.size <= 1) and _load()


def on_cpu(kernel, fallback, *args):
  """kernel(*args) where the program runs on the CPU, fallback(*args) on other platforms.

  The fallback everywhere when the kernels are not `available()` or an operand is not float32. The
  platform is chosen when the program is lowered (`jax.lax.platform_dependent`).
  """
  if all(a.dtype == jnp.float32 for a in args) and available():
    return jax.lax.platform_dependent(*args, cpu=kernel, default=fallback)
  return fallback(*args)


@contextlib.contextmanager
def disabled():
  """Traces (jits) inside use the JAX path: for programs sharded over several devices."""
  before = getattr(_state, 'disabled', False)
  _state.disabled = True
  try:
    yield
  finally:
    _state.disabled = before


def _ffi_call(target: str, result_shapes, vmap_method: str = 'expand_dims'):
  if not _load():
    raise RuntimeError(
      'the CPU attention kernel is not available (see the warning logged); '
      'call attention.additive_scores, which falls back to the JAX path'
    )
  # expand_dims: under vmap an unbatched operand (v, shared by the rows) gets a leading 1, not copies.
  return jax.ffi.ffi_call(target, result_shapes, vmap_method=vmap_method)


@jax.custom_vjp
def additive_scores(query_A: jax.Array, keys_SxA: jax.Array, v_A: jax.Array) -> jax.Array:
  """e_s = v . tanh(query + keys_s) by the kernel (float32, CPU only; vmap adds leading axes)."""
  return _ffi_call(FORWARD, jax.ShapeDtypeStruct(keys_SxA.shape[:-1], jnp.float32))(query_A, keys_SxA, v_A)


def _forward(query_A, keys_SxA, v_A):
  return additive_scores(query_A, keys_SxA, v_A), (query_A, keys_SxA, v_A)


def _backward(residuals, de_S):
  query_A, keys_SxA, v_A = residuals
  shapes = (
    jax.ShapeDtypeStruct(query_A.shape, jnp.float32),
    jax.ShapeDtypeStruct(keys_SxA.shape, jnp.float32),
    jax.ShapeDtypeStruct(query_A.shape, jnp.float32),
  )  # dv per query row (kernel: N x A)
  dq, dk, dv = _ffi_call(BACKWARD, shapes)(query_A, keys_SxA, v_A, de_S)
  return dq, dk, dv.reshape(-1, v_A.shape[-1]).sum(0).reshape(v_A.shape) if v_A.ndim < query_A.ndim else dv


additive_scores.defvjp(_forward, _backward)


@jax.custom_vjp
def context(weights_xS: jax.Array, annotations_xSxH: jax.Array) -> jax.Array:
  """c = Σ_s w_s h_s per row (leading axes shared by both operands), float32, CPU only."""
  out = jax.ShapeDtypeStruct(annotations_xSxH.shape[:-2] + annotations_xSxH.shape[-1:], jnp.float32)
  return _ffi_call(CONTEXT, out, 'broadcast_all')(weights_xS, annotations_xSxH)


def _context_forward(weights_xS, annotations_xSxH):
  return context(weights_xS, annotations_xSxH), (weights_xS, annotations_xSxH)


def _context_backward(residuals, dc_xH):
  weights_xS, annotations_xSxH = residuals
  dw = _ffi_call(CONTEXT_GRAD, jax.ShapeDtypeStruct(weights_xS.shape, jnp.float32), 'broadcast_all')(
    dc_xH, annotations_xSxH
  )
  return dw, jnp.einsum('...s,...h->...sh', weights_xS, dc_xH)


context.defvjp(_context_forward, _context_backward)
