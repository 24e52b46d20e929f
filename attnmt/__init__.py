"""attnmt: attention for neural machine translation in JAX/Flax.

Four packages, imported one way (analysis -> training -> model; data beside, used by training and analysis):
  attnmt.model      the encoder-decoder, attention scores, windows, normalisers, decoding
  attnmt.data       corpora as TFDS builders, tokenisers, batches
  attnmt.training   settings, the training step and loop, checkpoints, evaluation
  attnmt.analysis   reloading runs, translations with attention, BLEU by length, AER, tables, plots, reports
"""
