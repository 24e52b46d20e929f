"""Decoder forms: what one decoder step does around its attention, each one class, chosen by name or import
path like a score, with its options after the name (`model.query_timing=bahdanau`,
`=luong(input_feeding=false)` or `=my_pkg.forms:Mine(size=64)`; attnmt/model/registry.py).

A form decides where the attention's query comes from, what layer 0 of the RNN reads besides the previous
target embedding, what carries over to the next step, and the output layer's hidden vector before the
vocabulary projection. Everything else (embedding, RNN layers, attention, dropout, the vocabulary
projection W_out, the teacher-forced scan and the decoding loops) is the decoder's and is shared:

    params(param)              its parameters, declared with param(name, shape, init=lecun_normal)
    input_size()               the width of layer 0's input besides E y_{t-1} (the context, h~_{t-1}, ...)
    feed_size()                the width of the vector a step hands to the next (`State.feed`; 0: none)
    output_size()              the width of the hidden vector the vocabulary projection reads
    step(p, state, tools)      one step: the RNN layers and the attention, in the form's order -> Step
    hidden(p, out, emb_xE)     the output layer's hidden vector from a step's `out` (any leading shape)
    check()                    the constraints on the rest of the config: raise ConfigError naming the fix
    flops(rows)                the FLOPs of the form's own products in one step for `rows` queries

`tools.attend(query_BxD)` returns (context B x H, weights B x S, the attention's next state);
`tools.layers(carries, x_BxI or None)` runs the RNN layers on [E y_{t-1} ; x] and returns (carries, top
hidden state B x D). `step` runs inside the teacher-forced scan; `hidden` runs once over all steps, so
put every product that does not feed the next step there (it becomes one large product). A product by a
parameter in `step` has its weight gradient formed after the backward scan (`deferred_scan`) by itself.

Letters: B batch, S source positions, H annotation size, D decoder size, E embedding size.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import flax.linen as nn

from attnmt.errors import ConfigError
from attnmt.model.registry import Component, Declare, Params, Registry, matmul_flops
from attnmt.schema import Setting


class Step(NamedTuple):
  """What a form's step returns: the RNN carries, the vector for the next step (`State.feed`), the per-step
  outputs its `hidden` reads (a dict of B x _ arrays), the attention weights (B x S) and the attention's state."""

  rnn: tuple
  feed: jax.Array
  out: dict
  weights: jax.Array
  attention: dict


class Tools(NamedTuple):
  """The decoder's shared parts, handed to a form's step (see the module docstring)."""

  attend: Callable[[jax.Array], tuple[jax.Array, jax.Array, dict]]
  layers: Callable[[tuple, Any], tuple[tuple, jax.Array]]


class DecoderForm(Component):
  """Base of every decoder form; a subclass defines `step` and `hidden` and overrides the sizes it changes."""

  def params(self, param: Declare) -> Params:
    return {}

  def input_size(self) -> int:
    return 0

  def feed_size(self) -> int:
    return 0

  def output_size(self) -> int:
    return self.cfg.decoder_hidden_size

  def step(self, p: Params, state, tools: Tools) -> Step:
    raise NotImplementedError(f'decoder form {type(self).__name__} must define step(p, state, tools)')

  def hidden(self, p: Params, out: dict, emb_xE: jax.Array) -> jax.Array:
    raise NotImplementedError(f'decoder form {type(self).__name__} must define hidden(p, out, emb_xE)')

  def check(self) -> None:
    """Raises ConfigError if the form cannot work with the rest of `self.cfg`."""

  def flops(self, rows: int) -> int:
    """FLOPs of the form's own products (not the RNN layers, the attention or W_out) in one step."""
    raise NotImplementedError(
      f"decoder form {type(self).__name__} must define flops(rows): the benchmark's FLOP count needs it"
    )


REGISTRY = Registry(DecoderForm, 'query_timing')
register, names, build = REGISTRY.register, REGISTRY.names, REGISTRY.build


@register
class Bahdanau(DecoderForm):
  """Bahdanau et al. 2015 (Appendix A.2): the query is s_{t-1}, the context enters the recurrence, and a deep
  output layer reads the new state, the context and the previous target embedding:

      c_t = attend(s_{t-1});  s_t = RNN(s_{t-1}, [E y_{t-1} ; c_t]);  hidden = tanh(W_g [s_t ; c_t ; E y_{t-1}] + b_g)
  """

  name = 'bahdanau'
  settings = (
    Setting('deep_output_size', 256, 'size of tanh(W_g [s_t ; c_t ; E y_{t-1}])', lo=1, formerly=('output_size',)),
  )

  def params(self, param):
    cfg, g = self.cfg, self.deep_output_size
    return {
      'W_g': param('W_g', (cfg.decoder_hidden_size + cfg.annotation_size + cfg.embed_size, g)),
      'b_g': param('b_g', (g,), nn.initializers.zeros),
    }

  def input_size(self):
    return self.cfg.annotation_size

  def output_size(self):
    return self.deep_output_size

  def step(self, p, state, tools):
    ctx_BxH, weights_BxS, attention = tools.attend(state.rnn[-1][0])  # the query is the previous top state
    carries, s_BxD = tools.layers(state.rnn, ctx_BxH)
    return Step(carries, state.feed, {'s': s_BxD, 'context': ctx_BxH}, weights_BxS, attention)

  def hidden(self, p, out, emb_xE):
    return jnp.tanh(jnp.concatenate([out['s'], out['context'], emb_xE], -1) @ p['W_g'] + p['b_g'])

  def flops(self, rows):
    cfg = self.cfg
    return matmul_flops(rows, self.deep_output_size, cfg.decoder_hidden_size + cfg.annotation_size + cfg.embed_size)


@register
class Luong(DecoderForm):
  """Luong et al. 2015 (Sec. 3): the query is the new state s_t; the attentional vector h~_t = tanh(W_c [c_t ; s_t])
  is the output layer's hidden vector and, with input feeding (Sec. 3.3), the next step's extra input:

      s_t = RNN(s_{t-1}, [E y_{t-1} ; h~_{t-1}]);  c_t = attend(s_t);  h~_t = tanh(W_c [c_t ; s_t])
  """

  name = 'luong'
  settings = (
    Setting(
      'input_feeding', True, 'feed h~_{t-1} into the next RNN input (Luong Sec. 3.3)', formerly=('input_feeding',)
    ),
  )

  def params(self, param):
    d = self.cfg.decoder_hidden_size
    return {'W_c': param('W_c', (self.cfg.annotation_size + d, d))}

  def input_size(self):
    return self.feed_size()

  def feed_size(self):
    return self.cfg.decoder_hidden_size if self.input_feeding else 0

  def step(self, p, state, tools):
    feeding = self.input_feeding
    carries, s_BxD = tools.layers(state.rnn, state.feed if feeding else None)
    ctx_BxH, weights_BxS, attention = tools.attend(s_BxD)
    h_tilde_BxD = jnp.tanh(jnp.concatenate([ctx_BxH, s_BxD], -1) @ p['W_c'])
    return Step(carries, h_tilde_BxD if feeding else state.feed, {'h_tilde': h_tilde_BxD}, weights_BxS, attention)

  def hidden(self, p, out, emb_xE):
    return out['h_tilde']

  def flops(self, rows):
    d = self.cfg.decoder_hidden_size
    return matmul_flops(rows, d, self.cfg.annotation_size + d)


def decoder_names(cfg) -> tuple[str, ...]:
  """The names the decoder itself gives its parameters and submodules beside a form's (attnmt/model/decoder.py):
  a form's parameter may not take one of them."""
  own = ['embed', 'attention', 'layers', *(f'layer{i}' for i in range(cfg.decoder_layers)), 'W_out', 'b_out']
  return tuple(own + (['W_bridge', 'b_bridge'] if cfg.init_state == 'bridge' else []))


def check_param_names(form: DecoderForm) -> None:
  """Refuses, with one line naming the class, a form that declares a parameter under a name the decoder uses
  itself (decoder_names) or declares one name twice: in Flax either is a long traceback from inside setup.
  Only the names are looked at (params() is traced abstractly); any other failure of params() is left to the
  model's own initialisation to report."""
  taken, declared = decoder_names(form.cfg), set()

  def param(name, shape, init=None):
    if name in taken:
      raise ConfigError(
        f"decoder form {type(form).__name__} declares a parameter named '{name}', a name the decoder uses for its "
        f'own; rename it (the decoder uses {", ".join(taken)})'
      )
    if name in declared:
      raise ConfigError(
        f"decoder form {type(form).__name__} declares the parameter '{name}' twice; give each parameter its own name"
      )
    declared.add(name)
    return jnp.zeros(tuple(shape), jnp.float32)

  try:
    jax.eval_shape(lambda: form.params(param))
  except ConfigError:
    raise
  except Exception:  # the form's params() fails in another way: initialising the model reports it as it did
    pass


def check_sizes(form: DecoderForm) -> None:
  """Refuses, with one line naming the class, a form whose declared sizes are not non-negative integers or whose
  parameters take a name the decoder uses (check_param_names). ModelConfig runs this when it is built, so a
  training run stops here before any data is prepared."""
  check_param_names(form)
  for what in ('input_size', 'feed_size', 'output_size'):
    size = getattr(form, what)()
    if not isinstance(size, int) or size < (1 if what == 'output_size' else 0):
      raise ConfigError(
        f'decoder form {type(form).__name__}.{what}() returned {size!r}; expected an integer '
        + ('of at least 1' if what == 'output_size' else '>= 0')
      )
