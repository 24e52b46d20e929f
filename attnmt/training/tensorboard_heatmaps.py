"""Attention heatmaps of fixed validation sentences in the run's TensorBoard event file, at every evaluation,
so that a researcher can watch attention form over training (as Joey NMT shows it).

`train.tensorboard_heatmaps` sentences are chosen once per run, spread over the validation split's source
lengths (`spread_over_lengths`), among those of at most plots.HEATMAP_MAX source tokens: a longer one would be
drawn cut, and keeping its attention (output x source floats) would grow with the square of its length; how
many were passed over is said once, when the run starts. At each evaluation they are translated greedily
with the first seed's parameters, and the attention of that greedy output is drawn with
plots.attention_figure (source tokens across the top, output tokens down the side, weights on a fixed
[0, 1] scale; cut to plots.HEATMAP_MAX output rows by plots.bounded_panel) and written through
tensorboardX as a PNG image, tag `validation/attention/sentence_<index>` at the evaluation's step. No
TensorFlow is involved. A sweep that trains seeds as runs (a train.seeds axis) draws them in each variant's first
seed's run, as a run of several seeds draws them for its first seed (experiments/sweep.py).
"""

from __future__ import annotations

import numpy as np

from attnmt import data
from attnmt.training import evaluation, parallel
from attnmt import plots
from attnmt.data import pipeline
from attnmt.data.tokenizers import token_labels

TAG = 'validation/attention/sentence_{index}'


def spread_over_lengths(source_lengths_N: np.ndarray, count: int) -> np.ndarray:
  """Positions of `count` sentences spread over source length: those at the (k + 1) / (count + 1)
  quantiles of the length order, k = 0..count-1 (neither the shortest nor the longest sentence unless
  there are too few), ties broken by position; sorted, distinct, all of them when count >= N."""
  n = len(source_lengths_N)
  if count >= n:
    return np.arange(n)
  by_length = np.argsort(source_lengths_N, kind='stable')
  ranks = np.round((np.arange(1, count + 1) / (count + 1)) * (n - 1)).astype(int)
  return np.sort(by_length[np.unique(ranks)])


def choose(source_lengths_N: np.ndarray, count: int, limit: int = plots.HEATMAP_MAX) -> tuple[np.ndarray, int]:
  """Positions of `count` sentences spread over source length (spread_over_lengths) among those of at most
  `limit` tokens, and how many longer sentences were passed over."""
  lengths = np.asarray(source_lengths_N)
  short = np.flatnonzero(lengths <= limit)
  return short[spread_over_lengths(lengths[short], count)], len(lengths) - len(short)


class ValidationHeatmaps:
  """The fixed validation sentences of a run and the writing of their heatmaps at each evaluation."""

  def __init__(self, cfg, config, prepared: data.PreparedData, count: int, seed: int, variant: str, mesh=None):
    d = config.data
    split = prepared.tokenized['validation']
    kept = pipeline.length_filter(split, *data.length_limits(d, 'validation'))  # what evaluation translates
    chosen, passed_over = choose(split.src_len[kept], count)
    self.indices = kept[chosen]
    if passed_over and count and parallel.is_main_process():
      print(
        f'TensorBoard heatmaps: {passed_over} validation sentence(s) longer than {plots.HEATMAP_MAX} source '
        f'tokens not among those drawn',
        flush=True,
      )
    self.batch = pipeline.build_batch(split, self.indices, data.batch_options(d, 'validation'))
    self.cfg, self.train, self.prepared, self.mesh = cfg, config.train, prepared, mesh
    self.seed, self.variant = seed, variant
    self.sources = data.raw_texts(prepared, 'validation')[0]

  def write(self, writer, step: int, params) -> None:
    """Greedy translations of the sentences with the first seed's parameters (every process takes part when
    the mesh spans several), and one image per sentence in `writer` (metrics_io.MetricsWriter) at `step`."""
    p = evaluation.seed_params(params, 0)
    t = self.train
    translations = evaluation.translate(
      self.cfg,
      p,
      [self.batch],
      self.prepared.tgt_tokenizer,
      0,
      t.beam_alpha,
      t.max_decode_factor,
      keep_attention=True,
      mesh=self.mesh,
    )
    if not writer.enabled:
      return
    src_tok, tgt_tok = self.prepared.src_tokenizer, self.prepared.tgt_tokenizer
    for row, x in enumerate(translations):  # sorted by index, as self.indices and the batch rows
      src_labels = token_labels(src_tok, self.batch['src'][row, : int(self.batch['src_len'][row])].tolist())
      out_labels = token_labels(tgt_tok, x.ids)
      title = (
        f'{self.variant} | validation #{x.index} | step {step} | greedy output, seed {self.seed}\n'
        f'{self.sources[x.index][:90]}'
      )
      figure = plots.attention_figure(*plots.bounded_panel(x.attention, src_labels, out_labels, title))
      writer.figure(TAG.format(index=x.index), figure, step)
    writer.flush()
