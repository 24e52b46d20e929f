"""The fused kernels (attnmt/model/kernels/) equal the readable path: values and gradients
for every input, one step, under vmap over seeds and in a scan; and they lower to Triton for a GPU.

On the CPU the kernels run in Pallas's interpreter, so these tests check the kernels' arithmetic, blocking and
padding; the CUDA lowering checks what Triton accepts (block shapes, dtypes, operations) without a GPU.
Shapes are odd (batch 3, hidden 5, 7 positions) so that every padding is exercised, or span two blocks in each
direction (batch 17, hidden 40) so that the grid and the inner loops are.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl

from attnmt.model import attention, kernels, normalizers, rnn, scores
from attnmt.model.kernels import blocks

TOL = 1e-5  # float32: relative, and absolute against the array's largest entry (sums of many terms cancel)
GATES = {'lstm': 4, 'gru': 3}


def close(a, b):
  for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
    y = np.asarray(y)
    np.testing.assert_allclose(np.asarray(x), y, rtol=TOL, atol=TOL * max(1.0, float(np.max(np.abs(y), initial=0))))


def normal(rng, *shape):
  return jnp.asarray(rng.normal(size=shape), jnp.float32)


# --- The cells: arguments (xproj, h, [c], W_hh, [b_hn]) and keep, the kernel and the readable step ---------------


def cell_args(cell, rng, B, H):
  G = GATES[cell] * H
  args = (normal(rng, B, G), normal(rng, B, H))
  args += (normal(rng, B, H),) if cell == 'lstm' else ()
  args += (normal(rng, H, G) / np.sqrt(H),)
  args += (normal(rng, H),) if cell == 'gru' else ()
  return args, jnp.arange(B) % 3 != 1  # every third row is padding


def fused_cell(cell, args, keep, tap=None):
  if cell == 'lstm':
    return kernels.lstm_step(*args, keep, tap=tap)
  return (kernels.gru_step(*args, keep, tap=tap),)


def readable_cell(cell, args, keep):
  if cell == 'lstm':
    x, h, c, W = args
    return rnn.cell_update('lstm', {}, (h, c), x, h @ W, keep)
  x, h, W, b_hn = args
  return rnn.cell_update('gru', {'b_hn': b_hn}, (h,), x, h @ W, keep)


def cell_loss(step, cell, keep):
  """A loss that weights every output entry differently, so that no gradient hides behind a symmetric sum."""

  def loss(*args):
    outs = step(cell, args, keep)
    return sum(jnp.sum(jnp.sin(o) * (k + 1 + jnp.arange(o.size).reshape(o.shape) / o.size)) for k, o in enumerate(outs))

  return loss


@pytest.mark.parametrize('cell', ['lstm', 'gru'])
@pytest.mark.parametrize('B, H', [(3, 5), (17, 40)])
@pytest.mark.slow
def test_cell_step_equals_readable(cell, B, H):
  args, keep = cell_args(cell, np.random.default_rng(0), B, H)
  close(fused_cell(cell, args, keep), readable_cell(cell, args, keep))
  argnums = tuple(range(len(args)))
  grads = jax.jit(jax.grad(cell_loss(fused_cell, cell, keep), argnums))(*args)
  close(grads, jax.grad(cell_loss(readable_cell, cell, keep), argnums)(*args))
  kept_out = ~np.asarray(keep)
  np.testing.assert_array_equal(np.asarray(grads[0])[kept_out], 0.0)  # padding rows: no gradient to xproj


def scan_loss(step, cell, xs_TxBxG, keep_TxB, carry, params):
  def body(carry, inputs):
    x, keep = inputs
    new = step(cell, (x, *carry, *params), keep)
    return new, new[0]

  final, hs_TxBxH = jax.lax.scan(body, carry, (xs_TxBxG, keep_TxB))
  weights = 1.0 + jnp.arange(hs_TxBxH.size).reshape(hs_TxBxH.shape) / hs_TxBxH.size
  return jnp.sum(jnp.sin(hs_TxBxH) * weights) + sum(jnp.sum(c**2) for c in final)


@pytest.mark.parametrize('cell', ['lstm', 'gru'])
def test_cell_scan_equals_readable_scan(cell):
  """Four steps of a scan, rows ending at different steps: values and gradients for the inputs, the initial carry
  and the parameters."""
  T, B, H = 4, 3, 5
  rng = np.random.default_rng(1)
  args, _ = cell_args(cell, rng, B, H)
  xs_TxBxG = normal(rng, T, B, GATES[cell] * H)
  keep_TxB = jnp.arange(T)[:, None] < jnp.array([4, 2, 3])[None, :]
  carry, params = (args[1:3], args[3:]) if cell == 'lstm' else (args[1:2], args[2:])

  def loss(step):
    return lambda xs, carry, params: scan_loss(step, cell, xs, keep_TxB, carry, params)

  value, grads = jax.jit(jax.value_and_grad(loss(fused_cell), argnums=(0, 1, 2)))(xs_TxBxG, carry, params)
  ref_value, ref_grads = jax.value_and_grad(loss(readable_cell), argnums=(0, 1, 2))(xs_TxBxG, carry, params)
  close((value, grads), (ref_value, ref_grads))


@pytest.mark.parametrize('cell', ['lstm', 'gru'])
def test_weight_gradient_deferred_through_the_tap(cell):
  """W_hh held constant in the scan, its gradient formed after it as Σ_t h_tᵀ dtap_t (one product, as
  `deferred_scan` does), equals autodiff's; and the VJP forms no per-step product when W_hh is held constant."""
  T, B, H = 4, 3, 5
  rng = np.random.default_rng(2)
  args, _ = cell_args(cell, rng, B, H)
  xs_TxBxG = normal(rng, T, B, GATES[cell] * H)
  keep_TxB = jnp.arange(T)[:, None] < jnp.array([4, 2, 3])[None, :]
  carry, (W, *rest) = (args[1:3], args[3:]) if cell == 'lstm' else (args[1:2], args[2:])

  def loss(W, taps_TxBxG, hold=True):
    def body(carry, inputs):
      x, keep, tap = inputs
      new = fused_cell(cell, (x, *carry, jax.lax.stop_gradient(W) if hold else W, *rest), keep, tap=tap)
      return new, (new[0], carry[0])

    final, (hs, h_prev_TxBxH) = jax.lax.scan(body, carry, (xs_TxBxG, keep_TxB, taps_TxBxG))
    weights = 1.0 + jnp.arange(hs.size).reshape(hs.shape) / hs.size
    return jnp.sum(jnp.sin(hs) * weights) + sum(jnp.sum(c**2) for c in final), h_prev_TxBxH

  taps = jnp.zeros_like(xs_TxBxG)
  (dW_held, dtaps_TxBxG), h_prev_TxBxH = jax.jit(jax.grad(loss, argnums=(0, 1), has_aux=True))(W, taps)
  np.testing.assert_array_equal(np.asarray(dW_held), 0.0)  # held constant: no gradient from inside the scan
  deferred = jnp.einsum('tbh,tbg->hg', h_prev_TxBxH, dtaps_TxBxG)
  full = jax.grad(lambda W: scan_loss(readable_cell, cell, xs_TxBxG, keep_TxB, carry, (W, *rest)))(W)
  close(deferred, full)
  # The backward pass with W_hh held and with W_hh differentiated: only the second forms h_tᵀ dz_t in the scan.
  grad = lambda hold: jax.grad(lambda W, taps: loss(W, taps, hold)[0], argnums=(0, 1))
  products = lambda hold: str(jax.make_jaxpr(grad(hold))(W, taps)).count('dot_general')
  assert products(hold=True) == products(hold=False) - 1


# --- Attention -------------------------------------------------------------------------------------------------


def attention_args(rng, B, S, D, V):
  """(query, keys, v, values) and a mask whose rows have S, S // 2 and no valid positions (then repeating). The
  query and v are scaled by 1/sqrt(D), so that the scores stay of order 1 and float32 rounding below the tolerance."""
  args = (normal(rng, B, D) / np.sqrt(D), normal(rng, B, S, D), normal(rng, D) / np.sqrt(D), normal(rng, B, S, V))
  lengths = jnp.array([S, S // 2, 0] * B)[:B]
  return args, jnp.arange(S) < lengths[:, None]


def fused_attention(additive, args, mask):
  q, k, v, values = args
  if additive:
    return kernels.additive_attend(q, k, v, values, mask)
  return kernels.attend(q, k, values, mask)


def readable_attention(additive, args, mask):
  """Per sentence the score, normalizers.masked_softmax (the global window's softmax) and attention.context."""
  q, k, v, values = args

  def one(q_D, k_SxD, mask_S):
    e_S = scores.additive_scores(q_D, k_SxD, v) if additive else k_SxD @ q_D
    return normalizers.masked_softmax(e_S, mask_S)

  weights_BxS = jax.vmap(one)(q, k, mask)
  return attention.context(weights_BxS, values), weights_BxS


def attention_loss(attend, additive, mask):
  def loss(*args):
    ctx, w = attend(additive, args, mask)
    return jnp.sum(jnp.sin(ctx) * jnp.arange(1, ctx.shape[-1] + 1)) + jnp.sum(w * jnp.cos(jnp.arange(w.shape[-1])))

  return loss


@pytest.mark.parametrize('additive', [False, True], ids=['dot', 'additive'])
@pytest.mark.parametrize('B, S, D, V', [(3, 7, 6, 9), (2, 20, 40, 33)])
@pytest.mark.slow
def test_attention_equals_readable(additive, B, S, D, V):
  """Context and weights, and the gradients for the query, keys, v and values, with masked positions and a row
  with no valid position; masked positions have exactly 0 weight and 0 gradient."""
  args, mask = attention_args(np.random.default_rng(3), B, S, D, V)
  (ctx, w), ref = fused_attention(additive, args, mask), readable_attention(additive, args, mask)
  close((ctx, w), ref)
  masked = ~np.asarray(mask)
  np.testing.assert_array_equal(np.asarray(w)[masked], 0.0)
  argnums = (0, 1, 2, 3) if additive else (0, 1, 3)
  grads = jax.jit(jax.grad(attention_loss(fused_attention, additive, mask), argnums))(*args)
  close(grads, jax.grad(attention_loss(readable_attention, additive, mask), argnums)(*args))
  for g in (grads[1], grads[-1]):  # keys, values
    np.testing.assert_array_equal(np.asarray(g)[masked], 0.0)
  # The values held constant (as a scan that defers their gradient holds them): the other gradients are unchanged.
  held = jax.jit(jax.grad(attention_loss(fused_attention, additive, mask), argnums[:-1]))(*args)
  close(held, grads[:-1])


# --- Under vmap over seeds, and a decoder-like scan of both -----------------------------------------------------


@pytest.mark.parametrize('cell, additive', [('lstm', False), ('gru', True)], ids=['lstm-dot', 'gru-additive'])
@pytest.mark.slow
def test_vmap_over_seeds(cell, additive):
  """The codebase vmaps the training step over a leading seeds axis: the kernels' values and gradients under
  jax.vmap equal the readable path's, seed by seed."""
  seeds, rng = 2, np.random.default_rng(4)
  cells = [cell_args(cell, rng, 3, 5) for _ in range(seeds)]
  keep = cells[0][1]
  cell_batch = jax.tree.map(lambda *a: jnp.stack(a), *[a for a, _ in cells])
  grad = lambda step: jax.vmap(jax.value_and_grad(cell_loss(step, cell, keep), tuple(range(len(cells[0][0])))))
  close(jax.jit(grad(fused_cell))(*cell_batch), grad(readable_cell)(*cell_batch))

  attn = [attention_args(rng, 3, 7, 6, 9) for _ in range(seeds)]
  mask = attn[0][1]
  attn_batch = jax.tree.map(lambda *a: jnp.stack(a), *[a for a, _ in attn])
  grad = lambda step: jax.vmap(jax.value_and_grad(attention_loss(step, additive, mask), (0, 1, 2, 3)))
  close(jax.jit(grad(fused_attention))(*attn_batch), grad(readable_attention)(*attn_batch))


@pytest.mark.parametrize('cell, additive', [('lstm', False), ('gru', True)], ids=['lstm-dot', 'gru-additive'])
def test_decoder_like_scan_equals_readable(cell, additive):
  """Bahdanau's step in a scan: attend with the previous state, feed the context through the cell. The fused
  scan's loss and its gradients for every input (annotations, keys, parameters, initial carry) equal the
  readable scan's."""
  T, B, S, H = 3, 3, 7, 5
  rng = np.random.default_rng(5)
  args, _ = cell_args(cell, rng, B, H)
  (_, keys, v, annotations), mask = attention_args(rng, B, S, H, H)
  W_c = normal(rng, H, GATES[cell] * H)
  xs_TxBxG = normal(rng, T, B, GATES[cell] * H)
  keep = jnp.ones((B,), bool)
  carry, params = (args[1:3], args[3:]) if cell == 'lstm' else (args[1:2], args[2:])

  def loss(cell_step, attend):
    def run(xs, carry, params, keys, v, annotations, W_c):
      def body(carry, x):
        ctx, w = attend(additive, (carry[0], keys, v, annotations), mask)
        new = cell_step(cell, (x + ctx @ W_c, *carry, *params), keep)
        return new, (new[0], w)

      final, (hs, ws) = jax.lax.scan(body, carry, xs)
      return jnp.sum(jnp.sin(hs)) + jnp.sum(ws * jnp.arange(S)) + jnp.sum(final[0] ** 2)

    return jax.value_and_grad(run, argnums=tuple(range(7)))

  inputs = (xs_TxBxG, carry, params, keys, v, annotations, W_c)
  close(jax.jit(loss(fused_cell, fused_attention))(*inputs), loss(readable_cell, readable_attention)(*inputs))


# --- Lowering for a GPU -----------------------------------------------------------------------------------------


@pytest.mark.parametrize('dtype', ['float32', 'bfloat16'])  # model.dtype's choices
def test_kernels_lower_to_triton_for_cuda(dtype):
  """Every kernel, forward and backward, lowers for CUDA (jax.export with platforms=['cuda'], on a CPU-only jaxlib):
  Pallas's Triton lowering accepts the block shapes, dtypes and operations. Triton's own compilation (register
  and shared-memory limits, dot sizes) runs only on a GPU. The Triton call has no export-compatibility guarantee,
  which the export is told to accept; nothing here is serialised."""
  struct = lambda *s: jax.ShapeDtypeStruct(s, jnp.dtype(dtype))
  B, H, S = 17, 40, 20
  mask = jax.ShapeDtypeStruct((B, S), jnp.bool_)
  keep = jax.ShapeDtypeStruct((B,), jnp.bool_)
  cases = {
    'lstm': (
      functools.partial(kernels.lstm_step, interpret=False),
      struct(B, 4 * H),
      struct(B, H),
      struct(B, H),
      struct(H, 4 * H),
      keep,
    ),
    'gru': (
      functools.partial(kernels.gru_step, interpret=False),
      struct(B, 3 * H),
      struct(B, H),
      struct(H, 3 * H),
      struct(H),
      keep,
    ),
    'attend': (
      functools.partial(kernels.attend, interpret=False),
      struct(B, H),
      struct(B, S, H),
      struct(B, S, 9),
      mask,
    ),
    'additive_attend': (
      functools.partial(kernels.additive_attend, interpret=False),
      struct(B, H),
      struct(B, S, H),
      struct(H),
      struct(B, S, 9),
      mask,
    ),
  }
  triton = jax.export.DisabledSafetyCheck.custom_call('__gpu$xla.gpu.triton')
  for name, (f, *shapes) in cases.items():
    loss = lambda *a: sum(jnp.sum(jnp.sin(o.astype(jnp.float32))) for o in jax.tree.leaves(f(*a)))
    grad = jax.jit(jax.grad(loss, argnums=tuple(range(len(shapes) - 1))))
    exported = jax.export.export(grad, platforms=['cuda'], disabled_checks=[triton])(*shapes)
    assert exported.mlir_module().count('__gpu$xla.gpu.triton') == 2, name  # the forward and the backward kernel


def test_the_lowering_check_sees_a_block_triton_refuses():
  """The check above can fail: a kernel whose block is not a power of two is refused when lowered for CUDA."""

  def f(x):
    return blocks.pallas(
      lambda x_ref, o_ref: o_ref.__setitem__(..., x_ref[...] * 2),
      'bad',
      (1,),
      [pl.BlockSpec((12, 16), lambda i: (0, 0))],
      pl.BlockSpec((12, 16), lambda i: (0, 0)),
      jax.ShapeDtypeStruct((12, 16), jnp.float32),
      False,
      x,
    )

  triton = jax.export.DisabledSafetyCheck.custom_call('__gpu$xla.gpu.triton')
  with pytest.raises(ValueError, match='power of 2'):
    jax.export.export(jax.jit(f), platforms=['cuda'], disabled_checks=[triton])(
      jax.ShapeDtypeStruct((12, 16), jnp.float32)
    )
