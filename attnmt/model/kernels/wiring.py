"""The fused kernels in the model (model.kernels='pallas'; the default 'xla' is the readable path): what a model
runs fused and why the rest is not (`fused_parts`, said once by `notice`), and the steps that run in place of the
readable ones (`fast_path`: Seq2Seq hands them to its Encoder and Decoder, whose code imports nothing from here).

The cell steps of every cell fuse; the decoder's attention fuses for a score, window and normaliser whose classes
declare `fuses` (registry.Component: the built-in dot, scaled_dot, general, additive, normed_additive and concat,
the global window and the softmax; a subclass, a user's, only if it says so itself) and no intervention. Off a GPU
nothing fuses unless a test asks for the interpreter (`forced`).
"""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

from attnmt.model import attention, deferred_scan, normalizers, scores, windows
from attnmt.model.kernels.attention import additive_attend, attend
from attnmt.model.kernels.cells import gru_step, lstm_step

_forced: list[bool] = []  # `forced`'s modes, innermost last
_noticed: set = set()  # the lines `notice` printed


@contextlib.contextmanager
def forced(interpret: bool):
  """Within it, a model with kernels='pallas' calls its kernels whatever the backend: in Pallas's interpreter
  (True: the tests, on a CPU) or lowered for Triton (False: jax.export for CUDA on a machine without a GPU).
  Only tracing reads it: a program traced inside keeps its mode when jit's cache hands it out again."""
  _forced.append(bool(interpret))
  try:
    yield
  finally:
    _forced.pop()


class Fused(NamedTuple):
  """What a model runs as fused kernels (`fused_parts`)."""

  cells: bool  # the encoder's and decoder's cell steps: lstm_step / gru_step
  attention: str | None  # the decoder's attention step: 'attend' or 'additive_attend'; None: the readable path
  interpret: bool  # in Pallas's interpreter (`forced(True)`); else lowered for Triton
  line: str  # what runs fused and, for the rest, why not, in one line (`notice`)


def fused_parts(cfg, intervention=None) -> Fused:
  """What the model of `cfg` (with `intervention`, Seq2Seq's) runs as fused kernels, and why the rest is not.

  Off a GPU nothing is fused unless a test asks for the interpreter (`forced`): Pallas would interpret the kernels
  there, one program step at a time, far slower than XLA's readable path, which gives the same model up to
  rounding. That is a notice, not a refusal, so that a run trained on a GPU with the kernels still evaluates,
  translates and resumes on a CPU from its saved config."""
  if cfg.kernels != 'pallas':
    return Fused(False, None, False, 'model.kernels=xla: the readable path (XLA) throughout')
  backend = jax.default_backend()
  if not _forced and backend != 'gpu':
    return Fused(
      False,
      None,
      False,
      f"model.kernels=pallas: JAX's backend is {backend}, not a GPU, and off a GPU Pallas only interprets its "
      'kernels, far slower than XLA: the readable path runs throughout, as with model.kernels=xla',
    )
  interpret = bool(_forced and _forced[-1])
  score = scores.build(cfg)
  differs = [] if score.fuses else [f"score '{cfg.score}'"]
  if not windows.build(cfg).fuses:
    differs.append(f"window '{cfg.window}'")
  if not normalizers.build(cfg).fuses:
    differs.append(f"normaliser '{cfg.normalizer}'")
  if intervention is not None:
    differs.append(f'an intervention ({type(intervention).__name__}) that sets the weights')
  where = " in Pallas's interpreter" if interpret else ''
  fused = f"model.kernels=pallas: fused{where}: the encoder's and decoder's {cfg.cell.upper()} steps"
  if not differs:
    return Fused(
      True, score.fuses, interpret, f"{fused} and the decoder's {score.name} attention (scores, softmax, context)"
    )
  covered = ', '.join(name for name in scores.names() if scores.REGISTRY.resolve(name).fuses)
  return Fused(
    True,
    None,
    interpret,
    f"{fused}; the attention runs the readable path, as its kernels cover the scores {covered} with window "
    f"'global' and normaliser 'softmax', and no intervention (here: {', '.join(differs)})",
  )


def notice(cfg, intervention=None) -> None:
  """With model.kernels='pallas', prints `fused_parts`' line to stderr, once per process: a model is traced many
  times (initialisation, the training step, decoding), and what runs where is said once."""
  if cfg.kernels == 'pallas':
    _say_once(fused_parts(cfg, intervention).line)


def _say_once(line: str) -> None:
  if line not in _noticed:
    _noticed.add(line)
    print(f'notice: {line}', file=sys.stderr)


class FastPath(NamedTuple):
  """The steps a model runs fused, in place of the readable ones; None where the readable path runs."""

  cell: Callable | None  # (cell, p, carry, x W_ih + b, valid_B) -> carry, for rnn.cell_update with h W_hh
  attend: Callable | None  # (cfg, p, query, keys, annotations, length, state) -> (context, weights, state)


def fast_path(cfg, intervention=None) -> FastPath | None:
  """The fused steps of the model of `cfg` (`fused_parts`), said once (`notice`); None when nothing fuses."""
  fused = fused_parts(cfg, intervention)
  if cfg.kernels == 'pallas':
    _say_once(fused.line)
  if not fused.cells:
    return None
  attend_step = None
  if fused.attention:
    attend_step = functools.partial(attention_step, kernel=fused.attention, interpret=fused.interpret)
  return FastPath(functools.partial(cell_step, interpret=fused.interpret), attend_step)


def cell_step(
  cell: str, p: dict, carry: tuple, xproj_BxG: jax.Array, valid_B: jax.Array | None, interpret: bool
) -> tuple:
  """`rnn.cell_update` with its product h W_hh as one fused kernel (lstm_step / gru_step): one batch axis
  (B x H), as the encoder's and decoder's steps have.

  The weight gradient follows the readable path's plan. The kernel gets W_hh held constant, and as its `tap` the
  product stop_gradient(h) @ W_hh: the kernel never reads the tap's value (so XLA drops the product; it is not
  computed) and returns the cotangent of h W_hh as the tap's. The one way from the loss to W_hh is then that
  product, an ordinary one: in a scan run by `deferred_scan` it is deferred like every product by a parameter
  (dW_hh = Σ_t h_tᵀ dz_t, one product after the backward scan), under plain autodiff it is the readable path's
  per-step product. h's own gradient (dz W_hhᵀ) is the kernel's; through the stop_gradient none flows twice.
  """
  h = carry[0]
  W_hh = p['W_hh'].astype(h.dtype)
  keep_B = jnp.ones(h.shape[:1], bool) if valid_B is None else valid_B
  tap_BxG = jax.lax.stop_gradient(h) @ W_hh
  held = jax.lax.stop_gradient(W_hh)
  if cell == 'lstm':
    return lstm_step(xproj_BxG, h, carry[1], held, keep_B, tap=tap_BxG, interpret=interpret)
  b_hn = p['b_hn'].astype(h.dtype)
  return (gru_step(xproj_BxG, h, held, b_hn, keep_B, tap=tap_BxG, interpret=interpret),)


def attention_step(
  cfg,
  p: dict,
  query_BxQ: jax.Array,
  keys_BxSxK: jax.Array,
  annotations_BxSxH: jax.Array,
  length_B: jax.Array,
  state: dict,
  kernel: str,
  interpret: bool,
) -> tuple[jax.Array, jax.Array, dict]:
  """`attention.attention_step` and `attention.context` as one kernel, `attend` (or `additive_attend` for the
  additive family: the score's `fuses`), for a score, window and normaliser that `fused_parts` fuses: the context
  (B x H), the weights (B x S, float32) and the attention's next state.

  The score's query half (`kernel_query`: W q, or q itself; `scaled_dot`'s q / sqrt(Q)) and coverage's term C_i w_cov, added to
  the keys, are formed here as `attention_step` forms them. The kernel gets the annotations held constant; their
  gradient comes from the product `context` of the held weights by the annotations, whose value nobody reads (XLA
  drops it) and whose cotangent is the context's (`deferred_scan.tap`): inside the decoder's scan that product
  is deferred like the readable path's, Σ_t a_tᵀ dc_t after the backward scan.
  """
  score = scores.build(cfg)
  if score.uses_coverage:
    keys_BxSxK = keys_BxSxK + state['coverage'][..., None].astype(keys_BxSxK.dtype) * p['w_cov'].astype(
      keys_BxSxK.dtype
    )
  half_BxK = score.kernel_query(p, query_BxQ)
  mask_BxS = jnp.arange(keys_BxSxK.shape[1])[None, :] < length_B[:, None]
  values = jax.lax.stop_gradient(annotations_BxSxH)
  if kernel == 'additive_attend':
    ctx_BxH, weights_BxS = additive_attend(
      half_BxK, keys_BxSxK, score.scoring_vector(p), values, mask_BxS, interpret=interpret
    )
  else:
    ctx_BxH, weights_BxS = attend(half_BxK, keys_BxSxK, values, mask_BxS, interpret=interpret)
  ctx_BxH = deferred_scan.tap(ctx_BxH, attention.context(jax.lax.stop_gradient(weights_BxS), annotations_BxSxH))
  new = dict(state)
  if score.uses_coverage:
    new['coverage'] = state['coverage'] + weights_BxS
  return ctx_BxH, weights_BxS, new
