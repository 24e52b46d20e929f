"""The CPU attention kernels (attnmt/kernels) against NumPy and against the JAX paths they replace."""

import functools
import logging
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AbstractMesh

from attnmt import attention, deferred_scan, kernels, model, train_step
from attnmt.config import ModelConfig

if os.environ.get('ATTNMT_KERNELS') == '0':
  pytest.skip('ATTNMT_KERNELS=0: the kernel is switched off', allow_module_level=True)


def test_kernel_is_built():
  # launch.sh installs g++; without it every test below would silently compare the JAX path with itself.
  assert kernels.available(), 'the CPU attention kernel did not build: see the warning logged above'


def numpy_scores_and_grads(q, k, v, de):
  """e = v . tanh(q + k) and the gradients of sum(de * e), in float64 (q: N x A, k: N x S x A, v: A)."""
  q, k, v, de = (np.asarray(x, np.float64) for x in (q, k, v, de))
  t = np.tanh(k + q[:, None, :])
  e = t @ v
  dpre = de[:, :, None] * v * (1 - t * t)
  return e, dpre.sum(1), dpre, np.einsum('ns,nsa->a', de, t)


def random_case(rows, positions, size, seed=0, scale=1.0):
  rng = np.random.default_rng(seed)
  q = rng.normal(size=(rows, size)).astype(np.float32) * scale
  k = rng.normal(size=(rows, positions, size)).astype(np.float32) * scale
  v = rng.normal(size=(size,)).astype(np.float32) * 0.3
  de = rng.normal(size=(rows, positions)).astype(np.float32)
  return q, k, v, de


def batched_grads(fn, q, k, v, de):
  scores = lambda q, k, v: jax.vmap(fn, (0, 0, None))(q, k, v)
  e, vjp = jax.vjp(scores, q, k, v)
  return (e, *vjp(jnp.asarray(de)))


@pytest.mark.parametrize('rows,positions,size', [(1, 1, 1), (7, 5, 13), (64, 32, 512), (9, 3, 40)])
def test_scores_and_gradients_equal_numpy(rows, positions, size):
  # Odd sizes: rows not a multiple of the 4-row chunks the threads claim, A not a multiple of the vector width.
  q, k, v, de = random_case(rows, positions, size, scale=1.5)
  got = batched_grads(kernels.additive_scores, q, k, v, de)
  for name, g, want in zip(('e', 'dq', 'dk', 'dv'), got, numpy_scores_and_grads(q, k, v, de)):
    np.testing.assert_allclose(g, want, rtol=2e-5, atol=2e-5 * max(1.0, np.abs(want).max()), err_msg=name)


def test_kernel_equals_jax_path_jitted_and_unbatched():
  q, k, v, de = random_case(6, 11, 24, seed=1)
  for fn in (lambda *a: a, jax.jit(lambda *a: a)):
    args = fn(q, k, v)
    ours = jax.vjp(kernels.additive_scores, args[0][2], args[1][2], args[2])  # one sentence: q A, k S x A
    ref = jax.vjp(attention.additive_scores_jax, args[0][2], args[1][2], args[2])
    np.testing.assert_allclose(ours[0], ref[0], rtol=1e-5, atol=1e-6)
    for a, b in zip(ours[1](jnp.asarray(de[2])), ref[1](jnp.asarray(de[2]))):
      np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_per_row_v_and_two_batch_axes():
  # vmap over seeds and sentences, with v per seed: the kernel sees N = seeds x sentences rows and v per row.
  rng = np.random.default_rng(2)
  q = rng.normal(size=(3, 5, 16)).astype(np.float32)
  k = rng.normal(size=(3, 5, 4, 16)).astype(np.float32)
  v = rng.normal(size=(3, 16)).astype(np.float32)
  loss = lambda fn: lambda q, k, v: jnp.sum(jnp.sin(jax.vmap(jax.vmap(fn, (0, 0, None)))(q, k, v)))
  ours = jax.value_and_grad(loss(kernels.additive_scores), argnums=(0, 1, 2))(q, k, v)
  ref = jax.value_and_grad(loss(attention.additive_scores_jax), argnums=(0, 1, 2))(q, k, v)
  np.testing.assert_allclose(ours[0], ref[0], rtol=1e-5)
  for a, b in zip(ours[1], ref[1]):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize('in_axes', [(0, None, None), (None, 0, None), (0, 0, 0), (None, None, 0)])
def test_operands_shared_by_the_rows(in_axes):
  # Under vmap an unbatched operand reaches the kernel with a leading 1 (broadcast over the rows).
  rng = np.random.default_rng(4)
  shapes = ((10,), (3, 10), (10,))
  args = [rng.normal(size=((5,) if ax == 0 else ()) + shape).astype(np.float32) for ax, shape in zip(in_axes, shapes)]
  loss = lambda fn: lambda *a: jnp.sum(jnp.cos(jax.vmap(fn, in_axes)(*a)))
  ours = jax.value_and_grad(loss(kernels.additive_scores), argnums=(0, 1, 2))(*args)
  ref = jax.value_and_grad(loss(attention.additive_scores_jax), argnums=(0, 1, 2))(*args)
  np.testing.assert_allclose(ours[0], ref[0], rtol=1e-5)
  for a, b, arg in zip(ours[1], ref[1], args):
    assert a.shape == arg.shape
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize('lead', [(), (7,), (2, 5)])
def test_context_and_its_gradients_equal_numpy(lead):
  # c = Σ_s w_s h_s per row: the decoder's context product (deferred_scan.product with batched annotations).
  rng = np.random.default_rng(5)
  w = rng.random(size=lead + (6,)).astype(np.float32)
  m = rng.normal(size=lead + (6, 19)).astype(np.float32)
  dc = rng.normal(size=lead + (19,)).astype(np.float32)
  c, vjp = jax.vjp(kernels.context, w, m)
  dw, dm = vjp(jnp.asarray(dc))
  w64, m64, dc64 = (x.astype(np.float64) for x in (w, m, dc))
  np.testing.assert_allclose(c, np.einsum('...s,...sh->...h', w64, m64), rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(dw, np.einsum('...h,...sh->...s', dc64, m64), rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(dm, w64[..., :, None] * dc64[..., None, :], rtol=1e-6, atol=1e-6)


def test_context_under_vmap_with_shared_annotations():
  rng = np.random.default_rng(6)
  w = rng.random(size=(4, 3, 6)).astype(np.float32)
  m = rng.normal(size=(3, 6, 8)).astype(np.float32)  # the same annotations for all 4 mapped rows
  loss = lambda fn: lambda w, m: jnp.sum(jnp.sin(jax.vmap(fn, (0, None))(w, m)))
  ours = jax.value_and_grad(loss(kernels.context), argnums=(0, 1))(w, m)
  ref = jax.value_and_grad(loss(lambda w, m: jnp.einsum('...s,...sh->...h', w, m)), argnums=(0, 1))(w, m)
  np.testing.assert_allclose(ours[0], ref[0], rtol=1e-5)
  for a, b in zip(ours[1], ref[1]):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def test_tanh_saturates_and_keeps_nan():
  q = np.zeros((1, 4), np.float32)
  k = np.array([[[30.0, -30.0, np.inf, -np.inf], [np.nan, 0.0, 0.0, 0.0], [1e-5, 0.0, 0.0, 0.0]]], np.float32)
  v = np.array([1.0, 10.0, 100.0, 1000.0], np.float32)
  e = np.asarray(jax.vmap(kernels.additive_scores, (0, 0, None))(q, k, v))
  assert e[0, 0] == 1.0 - 10.0 + 100.0 - 1000.0  # tanh = +-1 exactly once saturated, also at +-inf
  assert np.isnan(e[0, 1])  # a NaN key is not clamped into a finite score
  assert e[0, 2] == np.float32(1e-5)  # tanh(x) = x for tiny x


def test_platforms_and_meshes_choose_the_path():
  q, k, v = jnp.ones((4, 8)), jnp.ones((4, 3, 8)), jnp.ones((8,))
  grad = jax.jit(
    jax.grad(
      lambda q, k, v: jnp.sum(jax.vmap(attention.additive_scores, (0, 0, None))(q, k, v) ** 2), argnums=(0, 1, 2)
    )
  )
  lowered = lambda platforms: grad.trace(q, k, v).lower(lowering_platforms=platforms).as_text()
  assert lowered(('cpu',)).count('attnmt_additive') == 2  # forward and backward kernels
  assert 'attnmt_additive' not in lowered(('cuda',))
  assert 'attnmt_additive' not in lowered(('tpu',))
  context = jax.jit(jax.grad(lambda w, m: jnp.sum(deferred_scan.product(w, m) ** 2), argnums=(0, 1)))
  lowered = lambda platforms: context.trace(q[:, :3], k).lower(lowering_platforms=platforms).as_text()
  assert lowered(('cpu',)).count('attnmt_context') == 2
  assert 'attnmt_context' not in lowered(('cuda',))
  with kernels.disabled():
    assert not kernels.available()
  with jax.sharding.use_abstract_mesh(AbstractMesh((2,), ('data',))):  # a data-parallel program
    assert not kernels.available()
  with jax.sharding.use_abstract_mesh(AbstractMesh((1,), ('data',))):
    assert kernels.available()
  bf16 = (
    jax.jit(lambda q, k, v: attention.additive_scores(q, k, v))
    .trace(q[0].astype(jnp.bfloat16), k[0].astype(jnp.bfloat16), v.astype(jnp.bfloat16))
    .lower()
    .as_text()
  )
  assert 'attnmt_additive' not in bf16  # float32 only


def test_training_step_with_kernel_equals_jax_path():
  cfg = ModelConfig(
    dropout=0.0,
    source_vocab_size=11,
    target_vocab_size=13,
    embed_size=8,
    encoder_hidden_size=6,
    decoder_hidden_size=10,
    attention_size=12,
    output_size=9,
    score='additive',
  )
  params = model.init_params(cfg, jax.random.PRNGKey(0))
  rng = np.random.default_rng(3)
  batch = {
    'src': rng.integers(3, 11, (5, 7)),
    'src_len': np.array([7, 6, 3, 1, 5]),
    'tgt_in': rng.integers(3, 13, (5, 6)),
    'tgt_out': rng.integers(3, 13, (5, 6)),
    'tgt_len': np.array([6, 2, 5, 4, 1]),
  }
  loss = lambda p: train_step.loss_fn(cfg, p, batch, None, False)[0]
  step = jax.jit(jax.value_and_grad(loss))
  text = step.lower(params).as_text()
  assert 'attnmt_additive' in text and 'attnmt_context' in text
  with kernels.disabled():
    ref_step = jax.jit(jax.value_and_grad(loss))
    assert 'attnmt_' not in ref_step.lower(params).as_text()
    ref = ref_step(params)
  got = step(params)
  np.testing.assert_allclose(got[0], ref[0], rtol=1e-6)
  for path, a in jax.tree_util.tree_leaves_with_path(got[1]):
    b = functools.reduce(lambda t, key: t[key.key], path, ref[1])
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6, err_msg=jax.tree_util.keystr(path))


def test_missing_compiler_falls_back_with_a_warning(tmp_path, monkeypatch, caplog):
  monkeypatch.setenv('ATTNMT_KERNEL_CACHE', str(tmp_path / 'cache'))
  monkeypatch.setenv('CXX', 'no-such-compiler-attnmt')
  with pytest.raises(FileNotFoundError, match='no C.. compiler'):
    kernels._compile(kernels.library_path())
  with caplog.at_level(logging.WARNING):
    assert kernels._load.__wrapped__() is False
  assert 'CPU attention kernel unavailable' in caplog.text and 'JAX path' in caplog.text
  assert not (tmp_path / 'cache').exists() or not any((tmp_path / 'cache').iterdir())  # nothing half-written


def test_library_is_cached_by_source_and_machine(tmp_path, monkeypatch):
  monkeypatch.setenv('ATTNMT_KERNEL_CACHE', str(tmp_path))
  first = kernels.library_path()
  assert first.parent == tmp_path and first.suffix == '.so'
  monkeypatch.setattr(kernels, 'COMPILE_FLAGS', kernels.COMPILE_FLAGS + ('-DX',))
  assert kernels.library_path() != first
