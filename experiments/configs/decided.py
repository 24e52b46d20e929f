"""Seeds until decided, at a scale a CPU finishes: the main job's scores (none, additive, dot, general, concat)
on the synthetic numbers task with a small model, trained in rounds of 5 seeds per variant until every
contrast is ranked or equivalent within ±0.5 BLEU, at most 8 rounds (docs/results/decided.md).

    ./launch.sh sweep --config=experiments/configs/decided.py --workdir=runs/decided

Each round is a sweep of 5 vmapped seeds per variant in <workdir>/round-r; the looks are in
<workdir>/rounds.md. On a GPU the same design runs on the main job's config:
--config=experiments/configs/main_ablation.py --config.sweep.scores='none,additive(size=64),dot,general,concat(size=64)'
--config.sweep.rounds=8 --config.sweep.seeds_per_round=5.
"""

from experiments.configs import tiny


def get_config():
  config = tiny.get_config()
  d, t = config.data, config.train
  d.synthetic_size = 4000  # training sentences
  d.synthetic_eval_size = 4000  # validation and test sentences, each: the test set every look scores
  t.num_steps = 1500
  t.schedule = 'cosine'
  t.learning_rate = 1e-2
  t.warmup_steps = 50
  t.eval_every = 500
  t.eval_max_sentences = 400  # validation on a tenth: the test set is what the looks score
  t.checkpoint_every = 500
  s = config.sweep
  s.scores = 'none,additive(size=16),dot,general,concat(size=16)'  # tiny's attention size
  s.beam_size = 0
  s.num_heatmaps = 0
  s.rounds = 8  # at most 40 seeds per variant
  s.seeds_per_round = 5
  return config
