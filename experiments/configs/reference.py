"""The reference run: `none` (RNNencdec) and `additive` (Bahdanau) attention at the default model size,
trained to convergence (12,000 steps each, about an hour each on 2 CPU cores), then the analysis with
greedy and beam-5 BLEU, BLEU by source length and heatmaps of long sentences. docs/results/reference.md
records what it measured.

    ./launch.sh sweep --config=experiments/configs/reference.py --workdir=runs/reference

Re-running the same command resumes an interrupted run from its last checkpoint, so it can run in the
background (nohup ... &) while other work goes on.
"""

from experiments.configs import default


def get_config():
  config = default.get_config()
  config.sweep = default.get_sweep_config('none,additive')
  config.sweep.beam_size = 5  # beam-search BLEU beside greedy in the analysis
  config.sweep.heatmap_min_words = 30  # heatmaps of long sentences, where attention matters
  return config
