"""plots.Drawing: figures drawn in a background process are the figures drawn at once, and its errors surface."""

import os
import time

import numpy as np
import pytest

from attnmt import plots

WEIGHTS = np.array([[0.7, 0.3, 0.0], [0.1, 0.8, 0.1]])
SOURCE, OUTPUT = ['el', 'perro', '</s>'], ['the', 'dog']


def test_background_figures_are_the_figures_drawn_here(tmp_path):
  """The same heatmap, drawn in the background process and in this one, is the same PNG, byte for byte; each
  is on disk once the drawing closes."""
  here, there = str(tmp_path / 'here.png'), str(tmp_path / 'sub' / 'there.png')
  with plots.Drawing(background=False) as now:
    now.draw(plots.attention_heatmap, WEIGHTS, SOURCE, OUTPUT, here, 'a title')
    assert os.path.exists(here)  # drawn at once
  drawing = plots.Drawing(background=True)
  drawing.draw(plots.attention_heatmap, WEIGHTS, SOURCE, OUTPUT, there, 'a title')
  drawing.close()
  with open(here, 'rb') as a, open(there, 'rb') as b:
    assert a.read() == b.read()
  drawing.close()  # closing twice waits for nothing more


def test_a_failed_figure_is_raised_when_the_drawing_closes(tmp_path):
  """A figure that cannot be saved (its folder is a file) raises its own error from close, after the others
  were drawn; an error inside the `with` block is the one raised, not the figures'."""
  (tmp_path / 'file').write_text('not a folder')
  bad, good = str(tmp_path / 'file' / 'x.png'), str(tmp_path / 'good.png')
  with pytest.raises((FileExistsError, NotADirectoryError)):
    with plots.Drawing(background=True) as drawing:
      drawing.draw(plots.attention_heatmap, WEIGHTS, SOURCE, OUTPUT, bad)
      drawing.draw(plots.attention_heatmap, WEIGHTS, SOURCE, OUTPUT, good)
  assert os.path.getsize(good) > 0
  late = str(tmp_path / 'late.png')
  with pytest.raises(KeyError, match='in the block'):
    with plots.Drawing(background=True) as drawing:
      drawing.draw(plots.attention_heatmap, WEIGHTS, SOURCE, OUTPUT, bad)
      drawing.draw(time.sleep, 2.0)  # the process is busy when the block fails
      drawing.draw(plots.attention_heatmap, WEIGHTS, SOURCE, OUTPUT, late)
      processes = list(drawing._pool._processes.values())
      raise KeyError('in the block')
  # the drawing process ended with the block, not 2 s later (it would otherwise outlive a command that exits on
  # the error, holding its stdout and writing figures after it); the figure queued behind is never drawn. The
  # pool's own thread may reap the process first: is_alive() can lag its end by a moment.
  ended = time.time() + 1.0
  while any(p.is_alive() for p in processes) and time.time() < ended:
    time.sleep(0.02)
  assert processes and not any(p.is_alive() for p in processes)
  time.sleep(2.2)
  assert not os.path.exists(late)
