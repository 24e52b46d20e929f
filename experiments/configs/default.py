"""Default attnmt config: Bahdanau attention on the embedded English-Spanish Bible, with the recipe that
learned fastest per CPU-minute in docs/learning.md (each choice names its figure in docs/curves/).

    python -m experiments.train --config=experiments/configs/default.py --workdir=runs/additive \
        --config.model.score=additive

The `model` section is attnmt.model.config.ModelConfig's defaults (every field commented there; vocabulary
sizes are filled in from the trained tokenizers); `data` is attnmt.data.get_data_config() (every field
commented there). The model is twice as wide as the main job's (size.png: level with it per minute over
5 minutes, still climbing when the small one flattens), and 12,000 steps take about an hour on 2 CPU cores.
"""

import dataclasses

import ml_collections

from attnmt.model.config import ModelConfig
from attnmt.data import get_data_config

VOCAB_FIELDS = ('source_vocab_size', 'target_vocab_size')


def get_model_config() -> ml_collections.ConfigDict:
  """attnmt.model.config.ModelConfig's defaults (the recipe; each field commented there), less the vocabulary
  sizes, which come from the trained tokenizers."""
  fields = dataclasses.asdict(ModelConfig())
  return ml_collections.ConfigDict({k: v for k, v in fields.items() if k not in VOCAB_FIELDS})


def get_train_config() -> ml_collections.ConfigDict:
  t = ml_collections.ConfigDict()
  t.seeds = '0'  # comma-separated; several seeds train together in one vmapped program
  t.num_steps = 12000  # optimiser steps (the cosine schedule ends here)
  t.time_budget_minutes = 0.0  # > 0: the step at which this much training time has passed becomes the last one
  t.learning_rate = 1e-2  # peak learning rate (Adam; schedule.png, size.png)
  t.schedule = 'cosine'  # 'constant', 'cosine' (to 0 at num_steps) or 'rsqrt' (1/sqrt(step) after warmup); schedule.png
  t.warmup_steps = 100  # linear warm-up from 0
  t.clip_norm = 1.0  # global-norm gradient clipping (0 = no clipping)
  t.label_smoothing = 0.1  # 0 = plain cross-entropy (regularisation.png)
  t.coverage_loss_weight = 0.0  # See et al. 2017: + weight * sum_t sum_i min(a_ti, sum_{t'<t} a_t'i) per token
  # Supervised attention (Liu et al. 2016, Mi et al. 2016): > 0 adds this weight times the cross-entropy of the
  # teacher-forced attention against gold alignments (train_step.alignment_loss) to the loss; 0 = off. Needs
  # gold alignments (data.name=synthetic_numbers, or tsv_pairs with data.alignment_path) and a score other than none.
  t.alignment_loss_weight = 0.0
  t.log_every = 50  # steps between progress lines and training-metric records
  t.eval_every = 1000  # steps between validation evaluations (0 = only at the end)
  t.eval_beam_size = 0  # 0 = greedy only at evaluation; k > 0 adds beam-search BLEU
  t.eval_max_sentences = 0  # validate on this many sentences spread over the lengths (0 = all)
  # At every evaluation, TensorBoard images of the first seed's attention on this many validation sentences
  # (greedy output; chosen once per run, spread over source length; 0 = none): attnmt/training/tensorboard_heatmaps.py
  t.tensorboard_heatmaps = 4
  t.checkpoint_every = 1000  # steps between checkpoints of the latest state
  t.beam_alpha = 0.6  # length penalty ((5 + len) / 6) ** alpha
  t.beam_coverage_penalty = 0.0  # beta of Wu et al. 2016: + beta * sum_i log(min(sum_t a_ti, 1)) on finished beams
  t.max_decode_factor = 1.5  # decode up to factor * source width + 10 tokens
  t.num_devices = 0  # data-parallel devices (0 = all, on every host); data.batch_size is the global batch
  t.nonfinite = 'stop'  # on a NaN/inf loss or gradient: 'stop' (no checkpoint after it) or 'skip' the update
  return t


def get_sweep_config(scores: str = 'none,additive,dot,general,concat') -> ml_collections.ConfigDict:
  """The axes of experiments/sweep.py: every combination is one variant (comma-separated values)."""
  s = ml_collections.ConfigDict()
  s.scores = scores
  s.query_timings = 'bahdanau'  # bahdanau, luong
  s.windows = 'global'  # global, local_m, local_p
  s.input_feeding = 'true'  # luong timing only: 'true', 'false' or 'true,false'
  s.axes = ''  # any other settings: 'model.window_size=4,8;train.learning_rate=3e-3,1e-2'
  # Several grids in one sweep: '|'-separated cases in the syntax of `axes`, each overriding the axes above;
  # the variants are the union of the cases' combinations. '' = the one grid above.
  s.cases = ''
  # 'i/n': train only variants i, i+n, ... (0 <= i < n); 'auto': every unfinished variant no other process holds.
  # Shards write no tables: sweep.report_only does, once they are done.
  s.shard = ''
  s.report_only = False  # True: train nothing; tables and analysis of the variants finished so far (merges shards)
  s.analyze = True  # after training: BLEU by length, heatmaps, AER where gold alignments exist
  s.beam_size = 0  # beam-search BLEU in the analysis (0: greedy only, faster)
  s.num_heatmaps = 3  # random test sentences drawn as heatmaps per variant
  s.heatmap_min_words = 0  # ... among those whose source has at least this many words
  return s


def get_config() -> ml_collections.ConfigDict:
  config = ml_collections.ConfigDict()
  config.model = get_model_config()
  config.data = get_data_config()
  config.data.vocab_size = 2000  # per side (vocab.png)
  config.data.eval_pad_to_multiple = 40  # evaluation widths 40/80/120: few decoders to compile
  config.train = get_train_config()
  return config
