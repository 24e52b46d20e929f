"""attnmt: attention for neural machine translation in JAX/Flax.

The Python API (attnmt/api.py), imported on first use:
  attnmt.load(run_dir)          a trained run: .translate(sentences), .attend(sources, references), .seeds, .config
  attnmt.heatmap(*translations) the attention as a matplotlib Figure
  attnmt.compare(run_dirs)      runs compared over seeds and test sentences, as data
  attnmt.train(config, workdir) trains a config and loads the run

Five packages, imported one way (analysis -> compare -> training -> model; data beside, used by training and
analysis):
  attnmt.model      the encoder-decoder, attention scores, windows, normalisers, decoding
  attnmt.data       corpora as TFDS builders, tokenisers, batches
  attnmt.training   settings, the training step and loop, checkpoints, evaluation
  attnmt.compare    which variant is better, by how much, and is it decided: paired tests, families, rounds
  attnmt.analysis   reloading runs, translations with attention, BLEU by length, AER, tables, plots, reports
"""

_API = ('Attention', 'Comparison', 'Run', 'Translation', 'compare', 'heatmap', 'load', 'train')


def __getattr__(name: str):
  # The API imports JAX, TFDS and matplotlib: `import attnmt.model` should not pay for them.
  if name in _API:
    from attnmt import api

    return getattr(api, name)
  raise AttributeError(f'module {__name__!r} has no attribute {name!r}')


def __dir__():
  return sorted(list(globals()) + list(_API))
