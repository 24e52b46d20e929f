"""A decoder form with an option of its own: Bahdanau et al.'s maxout output layer (2015, Appendix A.2.2),
the deep output's pre-activation split into groups of `pieces` and the maximum of each group kept.

    --config.model.query_timing='maxout:Maxout(pieces=2)'               (examples/components on PYTHONPATH)
"""

import jax
import jax.numpy as jnp

from attnmt.model import forms
from attnmt.schema import Setting


class Maxout(forms.Bahdanau):  # Bahdanau's step and its option deep_output_size; a new output layer
  settings = forms.Bahdanau.settings + (Setting('pieces', 2, 'units the maximum is taken over', lo=1),)

  def params(self, param):
    c, width = self.cfg, self.deep_output_size * self.pieces
    return {
      'W_g': param('W_g', (c.decoder_hidden_size + c.annotation_size + c.embed_size, width)),
      'b_g': param('b_g', (width,), jax.nn.initializers.zeros),
    }

  def hidden(self, p, out, emb_xE):  # once over all steps: max over each group of W_g [s ; c ; E y] + b_g
    pre = jnp.concatenate([out['s'], out['context'], emb_xE], -1) @ p['W_g'] + p['b_g']
    return jnp.max(pre.reshape(pre.shape[:-1] + (-1, self.pieces)), axis=-1)

  def flops(self, rows):
    return self.pieces * super().flops(rows)
