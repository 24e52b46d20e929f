"""Normaliser x score: an axis of attention beyond the score, swept at the main job's size.

`model.normalizer` (softmax, sparsemax, entmax15) crossed with `additive` (Bahdanau) and `general`
(Luong) scores, each trained for the main job's 2,200 steps, then the analysis: test BLEU with its
seed statistics, attention entropy and monotonicity, heatmaps (coverage is experiments/configs/coverage.py).
docs/results/attention_axes.md records what it measured.

    ./launch.sh sweep --config=experiments/configs/attention_axes.py --workdir=runs/attention_axes

Re-running the same command resumes.
"""

from experiments.configs import main_ablation


def get_config():
  config = main_ablation.get_config()
  config.sweep.scores = f'{config.model.score},general'  # additive at the main job's size
  config.sweep.axes = 'model.normalizer=softmax,sparsemax,entmax15'
  config.sweep.beam_size = 5  # beam BLEU too, where the coverage penalty acts
  return config
