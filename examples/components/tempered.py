"""A normaliser with an option of its own: softmax at a temperature, a_i = softmax(e / T)_i.

--config.model.normalizer='tempered:Tempered(temperature=0.5)'     (examples/components on PYTHONPATH)
"""

from attnmt.model import normalizers
from attnmt.schema import Setting


class Tempered(normalizers.Normalizer):
  settings = (Setting('temperature', 1.0, 'T: below 1 sharpens the weights, above 1 flattens them', lo='>0'),)

  def normalize(self, e_S, mask_S):
    return normalizers.masked_softmax(e_S / self.temperature, mask_S)
