"""A window with an option of its own: local-m's positions |s - t| <= D, each weight scaled by a triangle
1 - |s - t| / (D + 1) (not renormalised, as local-p's Gaussian).

    --config.model.window='triangle:Triangle(size=4)'                   (examples/components on PYTHONPATH)
"""

import jax.numpy as jnp

from attnmt.model import windows
from attnmt.schema import Setting


class Triangle(windows.Window):
  settings = (Setting('size', 4, 'D: the half-width of the window', lo=1),)

  def centre(self, p, query_BxQ, length_B, t):  # p_t = t, as local-m
    return jnp.broadcast_to(jnp.asarray(t, jnp.float32), length_B.shape)

  def weights(self, e_S, positions_S, mask_S, centre):
    distance_S = jnp.abs(positions_S - centre)
    return self.normalize(e_S, mask_S & (distance_S <= self.size)) * (1 - distance_S / (self.size + 1))

  def flops(self):
    return 0
