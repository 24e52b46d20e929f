"""The figures researchers read (PNG): attention heatmaps (also training's TensorBoard images, hence a module
beside the layers), BLEU by sentence length, a results bar chart, learning curves.

Figures are built without pyplot (matplotlib.figure.Figure): nothing here touches the backend, so a
notebook shows the Figures attnmt returns once, and a script on a machine without a display needs none.
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
from typing import Callable, Collection, Optional, Sequence

import numpy as np

DPI = 110  # of every saved figure, and of heatmaps rendered for TensorBoard
EXACT_ZERO_RGBA = (0.812, 0.886, 0.953, 1.0)  # pale blue


def mpl():
  """matplotlib, imported with the first figure: a process that draws none (translate, a refused setting)
  starts about half a second sooner."""
  import matplotlib.cm
  import matplotlib.colors
  import matplotlib.figure
  import matplotlib.ticker

  return matplotlib


def _heatmap_cmap():
  return mpl().colormaps['Greys']


def heatmap_colors(weights_TxS: np.ndarray) -> np.ndarray:
  """RGBA cells of a heatmap: grey by weight on a fixed [0, 1] scale, exactly-0 weights pale blue."""
  w = np.asarray(weights_TxS, np.float64)
  rgba = _heatmap_cmap()(np.clip(w, 0.0, 1.0))
  rgba[w == 0.0] = EXACT_ZERO_RGBA
  return rgba


# The report, the heatmap PNGs and TensorBoard's images draw at most this many output rows and source columns
# of a heatmap: a 6,000-token sentence would embed 36 million cells (100 MB of page) or take 3.5 GB to draw.
# What is cut is said on the page and in the PNG's title.
HEATMAP_MAX = 200


def bounded_panel(weights: np.ndarray, cols: list, rows: list, title: str, limit: int = HEATMAP_MAX) -> tuple:
  """(weights, source labels, output labels, title) of a heatmap PNG, cut to the first `limit` rows and columns,
  the title saying so when it was cut: a figure 6,000 tokens wide would take gigabytes to draw."""
  weights = np.asarray(weights)
  t, s = weights.shape
  if max(t, s) > limit:
    title += f' (truncated: the first {min(limit, t)} of {t} output and {min(limit, s)} of {s} source tokens)'
  return weights[:limit, :limit], list(cols[:limit]), list(rows[:limit]), title


def attention_figure(weights_TxS: np.ndarray, source_tokens: list[str], output_tokens: list[str], title: str = ''):
  """The figure of attention_heatmap (a matplotlib Figure), for callers that render it elsewhere, such as
  a TensorBoard image or a notebook."""
  return attention_panels([(weights_TxS, source_tokens, output_tokens, title)])


def attention_panels(panels: Sequence[tuple[np.ndarray, list[str], list[str], str]]):
  """Heatmaps side by side in one Figure, each panel (weights T x S, source tokens, output tokens, title)
  drawn as attention_heatmap draws one, on the same [0, 1] scale."""
  heights = [np.shape(w)[0] for w, *_ in panels]
  widths = [max(4.0, 0.32 * np.shape(w)[1] + 2.6) for w, *_ in panels]
  fig = mpl().figure.Figure(figsize=(sum(widths), max(3.0, 0.32 * max(heights) + 1.5)), dpi=DPI)
  axes = fig.subplots(1, len(panels), squeeze=False, width_ratios=widths)[0]
  for ax, (weights, source_tokens, output_tokens, title) in zip(axes, panels):
    _draw_attention(fig, ax, np.asarray(weights), source_tokens, output_tokens, title)
  fig.tight_layout()
  return fig


def _draw_attention(fig, ax, weights_TxS, source_tokens, output_tokens, title: str) -> None:
  t, s = weights_TxS.shape
  exact_zero = weights_TxS == 0.0
  ax.imshow(heatmap_colors(weights_TxS), aspect='auto')
  label = 'attention weight' + (' (pale blue: exactly 0)' if exact_zero.any() else '')
  scale = mpl().cm.ScalarMappable(norm=mpl().colors.Normalize(0.0, 1.0), cmap=_heatmap_cmap())
  fig.colorbar(scale, ax=ax, fraction=0.04, pad=0.02, label=label)
  ax.set_xticks(range(s))
  ax.set_xticklabels(source_tokens, rotation=90, fontsize=8)
  ax.set_yticks(range(t))
  ax.set_yticklabels(output_tokens, fontsize=8)
  ax.xaxis.tick_top()
  ax.set_xlabel('source')
  ax.set_ylabel('output')
  if title:
    ax.set_title(title, fontsize=9, pad=40)


def attention_heatmap(
  weights_TxS: np.ndarray, source_tokens: list[str], output_tokens: list[str], path: str, title: str = ''
) -> str:
  """Output tokens down the rows, source tokens across the columns (Bahdanau Fig. 3), saved as a PNG.

  The colour scale is fixed to [0, 1] (white = no weight, black = all of it) so heatmaps compare
  across sentences and variants. Weights that are exactly 0 (outside a local window, or cut by a sparse
  normaliser) are drawn pale blue, apart from small ones.
  """
  return save(attention_figure(weights_TxS, source_tokens, output_tokens, title), path)


def bleu_by_length(
  curves: dict[str, list[dict]],
  path: str,
  title: str = 'BLEU by source sentence length',
  intervals: Optional[dict[str, list[list[float]]]] = None,
) -> str:
  """bleu_by_length_figure saved as a PNG at `path`."""
  return save(bleu_by_length_figure(curves, title, intervals), path)


def bleu_by_length_figure(
  curves: dict[str, list[dict]],
  title: str = 'BLEU by source sentence length',
  intervals: Optional[dict[str, list[list[float]]]] = None,
  dashed: Collection[str] = (),
):
  """One line per variant: BLEU of each source-length bucket (rows from evaluation.bleu_by_length), with
  error bars where `intervals` gives a [low, high] 95% interval per bucket; the x labels give each bucket's
  sentence count. The variants in `dashed` (those whose score does not attend: the baselines) are dashed."""
  fig = mpl().figure.Figure(figsize=(7.5, 4.4))
  ax = fig.subplots()
  for name, rows in curves.items():
    x = [f"{r['bucket']}\n({r['sentences']})" for r in rows]
    y = np.array([r['bleu'] for r in rows])
    bars = (intervals or {}).get(name)
    yerr = None if bars is None else np.abs(np.array(bars, float).T - y)
    ax.errorbar(x, y, yerr=yerr, marker='o', capsize=3, label=name, linestyle='--' if name in dashed else '-')
  ax.set_xlabel('source sentence length in words (sentences)')
  ax.set_ylabel('BLEU')
  ax.set_title(title)
  ax.grid(alpha=0.3)
  ax.legend(fontsize=8)
  fig.tight_layout()
  return fig


def seed_strip(variants: list[dict], path: str, title: str = 'Test BLEU by seed', metric: str = 'BLEU') -> str:
  """The ranking at a glance: one row per variant, ordered by mean, its seeds as dots, its mean as a bar
  and its 95% interval as a line. `variants` hold 'variant', 'per_seed', 'mean' and 'interval' or 'ci'
  ([low, high]; absent or None for one seed: no line is drawn, and the title says the variants are not
  ranked)."""
  rows = sorted(variants, key=lambda v: v['mean'])
  fig = mpl().figure.Figure(figsize=(7.5, 1.2 + 0.45 * len(rows)))
  ax = fig.subplots()
  rng = np.random.default_rng(0)  # vertical jitter, so that equal seeds stay visible
  for y, v in enumerate(rows):
    interval = v.get('interval') or v.get('ci')
    if interval is not None and len(v['per_seed']) > 1:
      ax.plot(interval, [y, y], color='#4a7ab5', linewidth=2, solid_capstyle='butt', zorder=1)
    ax.plot([v['mean']] * 2, [y - 0.3, y + 0.3], color='#1f3b63', linewidth=2.5, zorder=2)
    jitter = rng.uniform(-0.12, 0.12, len(v['per_seed']))
    ax.scatter(v['per_seed'], y + jitter, s=22, color='#d9822b', edgecolor='black', linewidth=0.4, zorder=3)
  ax.set_yticks(range(len(rows)))
  ax.set_yticklabels([v['variant'] for v in rows], fontsize=8)
  seeds = sorted({len(v['per_seed']) for v in rows})
  note = (
    'one seed each: the variants are not ranked'
    if seeds == [1]
    else f'{"/".join(map(str, seeds))} seeds per variant: dots = seeds, bar = mean, line = 95% interval'
  )
  ax.set_title(f'{title}\n({note})', fontsize=9)
  ax.set_xlabel(metric)
  ax.grid(axis='x', alpha=0.3)
  ax.set_ylim(-0.6, len(rows) - 0.4)
  fig.tight_layout()
  return save(fig, path)


def save(fig, path: str) -> str:
  """Writes the Figure as a PNG at `path` (its folder created if missing); returns the path."""
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  fig.savefig(path, dpi=DPI)
  return path


class Drawing:
  """Figures drawn beside the caller's own work: `draw(fn, *args)` queues `fn(*args)`, a function of this module
  that saves a PNG, in one background process when this process may use two cores or more, else at once
  here; `close()` (or leaving the `with` block) waits for every figure, then raises the first error. An analysis
  decodes and scores on one core (its scoring holds Python's lock) while a second draws its heatmaps, about 1.5 s
  each at 60 x 60 tokens. The process is started with 'spawn': the caller's JAX threads are not forked."""

  def __init__(self, background: Optional[bool] = None):
    if background is None:  # the cores this process may use (plots sits below attnmt.training's row_threads)
      background = len(os.sched_getaffinity(0)) > 1 if hasattr(os, 'sched_getaffinity') else (os.cpu_count() or 1) > 1
    self._pool = None
    if background:
      self._pool = concurrent.futures.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context('spawn'))
    self._pending = []

  def draw(self, fn: Callable, *args) -> None:
    if self._pool is None:
      fn(*args)
    else:
      self._pending.append(self._pool.submit(fn, *args))

  def close(self) -> None:
    pending, self._pending = self._pending, []
    errors = []
    for future in pending:  # every figure is waited for: one that fails does not cut the others short
      try:
        future.result()
      except Exception as e:
        errors.append(e)
    if self._pool is not None:
      self._pool.shutdown()
      self._pool = None
    if errors:
      raise errors[0]

  def __enter__(self):
    return self

  def __exit__(self, exc_type, exc, tb):
    if exc_type is None:
      self.close()
    elif self._pool is not None:  # the error in the block is the one to see: the figures are abandoned, and
      processes = list(self._pool._processes.values())  # their process ends now, not after the caller has exited
      self._pool.shutdown(wait=False, cancel_futures=True)
      for process in processes:
        process.terminate()
        process.join()
      self._pool = None


def learning_curves(curves: dict[str, list[dict]], path: str, title: str = '', dashed: Collection[str] = ()) -> str:
  """Validation BLEU and perplexity against training minutes, one line per run (those in `dashed`, the
  baselines whose score does not attend, dashed).

  `curves` maps a label to its validation records from metrics.jsonl (each with 'train_seconds',
  'bleu' and 'perplexity', the last two lists over seeds: the mean is drawn)."""
  fig = mpl().figure.Figure(figsize=(11, 4.2))
  ax_bleu, ax_ppl = fig.subplots(1, 2)
  for name, records in curves.items():
    minutes = [r['train_seconds'] / 60 for r in records]
    style = dict(marker='o', markersize=3, label=name, linestyle='--' if name in dashed else '-')
    ax_bleu.plot(minutes, [np.mean(r['bleu']) for r in records], **style)
    ax_ppl.plot(minutes, [np.mean(r['perplexity']) for r in records], **style)
  ax_bleu.set_ylabel('validation BLEU')
  ax_ppl.set_ylabel('validation perplexity')
  ax_ppl.set_yscale('log')
  ax_ppl.yaxis.set_major_formatter(mpl().ticker.ScalarFormatter())
  ax_ppl.yaxis.set_minor_formatter(mpl().ticker.ScalarFormatter())
  for ax in (ax_bleu, ax_ppl):
    ax.set_xlabel('training minutes (evaluation excluded)')
    ax.grid(alpha=0.3, which='both')
  ax_bleu.legend(fontsize=8)
  if title:
    fig.suptitle(title)
  fig.tight_layout()
  return save(fig, path)
