"""Pre-flight: a user's own components traced on a tiny model before any data is prepared.

A score, window, normaliser or decoder form selected by import path (one attnmt does not register) runs once
on 2 sentences of 3 source positions and 2 target steps, without computing anything (`jax.eval_shape`):
teacher forcing in training mode, then one greedy decoding step. An output of the wrong shape or dtype
(`registry.check_output`), a parameter named like one of the decoder's, a method the class must define, or any
other failure inside it is refused in one line naming the class and the fix, instead of a traceback after
the data are prepared. Built-in components are tested by the suite and are not traced here.
"""

from __future__ import annotations

import dataclasses
import os

import jax
import jax.numpy as jnp

from attnmt.errors import ConfigError
from attnmt.model import attention
from attnmt.model.config import COMPONENTS, ModelConfig


def _tiny_batch():
  """2 sentences of 3 source positions and 2 target steps: what the tracing of a tiny model reads."""
  return jnp.full((2, 3), 4, jnp.int32), jnp.array([3, 2], jnp.int32), jnp.full((2, 2), 4, jnp.int32)


def user_kinds(cfg: ModelConfig) -> list[str]:
  """The component settings of `cfg` that select a user's own class, in COMPONENTS order."""
  return [kind for kind, registry in COMPONENTS.items() if not registry.is_builtin(getattr(cfg, kind))]


def check(cfg: ModelConfig) -> None:
  """Traces the model once when `cfg` selects a user's own component (module docstring); nothing otherwise."""
  users = user_kinds(cfg)
  if not users:
    return
  from attnmt.model.seq2seq import Seq2Seq  # seq2seq imports the decoder, which imports this package's modules

  small = dataclasses.replace(cfg, source_vocab_size=8, target_vocab_size=8)
  src, length, tgt = _tiny_batch()

  def run():
    model = Seq2Seq(small)
    variables = model.init({'params': jax.random.key(0), 'dropout': jax.random.key(1)}, src, length, tgt)
    model.apply(variables, src, length, tgt, True, rngs={'dropout': jax.random.key(2)})
    memory, state = model.apply(variables, src, length, method=Seq2Seq.encode)
    return model.apply(variables, memory, state, tgt[:, 0], method=Seq2Seq.decode_step)

  named = ' or '.join(f"model.{kind} '{getattr(cfg, kind)}'" for kind in users)
  try:
    attention.check_user_code(small)  # the attention's parts alone first: their messages are the most precise
    jax.eval_shape(run)
  except ConfigError:
    raise
  except NotImplementedError as e:
    raise ConfigError(f'{e} ({named})') from None
  except Exception as e:  # anything else inside the user's code: one line, not a traceback from inside Flax
    first = str(e).strip().splitlines()[0] if str(e).strip() else ''
    raise ConfigError(
      f'tracing a tiny model with user code {named} failed: {type(e).__name__}: {first[:300]}; fix that class '
      '(run attnmt.model.preflight.check(cfg) to see the full traceback under a debugger)'
    ) from None


def check_size(cfg: ModelConfig, vocab_size: int, seeds: int) -> None:
  """Refuses a model whose float32 parameters, with their gradients and Adam's two moments for each of `seeds`
  seeds, need more memory than this machine has (counted by `jax.eval_shape` at `vocab_size` per side, nothing
  allocated): one line naming the sizes, instead of a run that stalls allocating them (a size option of 1e9)."""
  from attnmt.model.seq2seq import Seq2Seq

  sized = dataclasses.replace(cfg, source_vocab_size=vocab_size, target_vocab_size=vocab_size)
  src, length, tgt = _tiny_batch()
  try:
    shapes = jax.eval_shape(
      lambda: Seq2Seq(sized).init({'params': jax.random.key(0), 'dropout': jax.random.key(1)}, src, length, tgt)
    )
  except Exception:  # a model that cannot be built says why when training builds it
    return
  count = sum(leaf.size for leaf in jax.tree.leaves(shapes))
  need, have = count * 4 * 4 * seeds, os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES')
  if need > have:
    raise ConfigError(
      f'the model has {count:,} parameters: with their gradients and optimizer state for {seeds} seed(s) '
      f"{need / 2**30:,.0f} GiB, more than this machine's {have / 2**30:,.0f} GiB; choose smaller sizes "
      '(model.*_size and the components\' size options)'
    )
