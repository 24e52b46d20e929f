"""An intervention with an option of its own: the attention weights raised to a power and renormalised,
a'_i = a_i^p / sum_j a_j^p (p > 1 sharpens towards the largest weight, p < 1 flattens towards uniform).

    python -m experiments.analyze --runs=... --interventions='uniform,sharpen:Sharpen(power=4)'
"""

import jax.numpy as jnp

from attnmt.model import interventions
from attnmt.schema import Setting


class Sharpen(interventions.Intervention):
  settings = (Setting('power', 2.0, 'p, the exponent of every weight', lo='>0'),)

  def counterfactual(self, w_S, valid_S, length, t, key):
    powered = jnp.where(valid_S, jnp.power(w_S, self.power), 0.0)
    return powered / jnp.maximum(jnp.sum(powered), 1e-30)
