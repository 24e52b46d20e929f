"""The main job: does attention help, and where? `none` (RNNencdec), `additive` (Bahdanau) and `general`
(Luong) attention on the embedded English-Spanish Bible, two seeds each on a CPU (five on an accelerator), every
variant trained for the same number of steps, then the analysis: test BLEU with its interval (seeds and a
jackknife over the test sentences) and the declared family's verdicts, BLEU by source length, attention
monotonicity, entropy, repetition, heatmaps. Two seeds measure the seed variance, enough to rank attention over
`none`; telling the attention scores apart needs more (--config.train.seeds=0,1,2,... ; docs/results/main.md).
The time on 2 CPU cores: docs/results/main.md, "Time".

    ./launch.sh main          # = python -m experiments.sweep --config=experiments/configs/main_ablation.py

Every setting below was chosen from a learning curve; docs/learning.md shows the curves, and the figure
each comment names is in docs/curves/. The sweep section lists the axes; every combination is one variant.
"""

from experiments.configs import default


def get_config():
  config = default.get_config()
  m, d, t = config.model, config.data, config.train
  d.vocab_size = 2000  # per side (vocab.png)
  d.max_source_length = 64  # training pairs up to 64 tokens with EOS: 26,415 of 28,106 (length.png)
  d.max_target_length = 64
  d.pad_to_multiple = 8  # bucketed widths 8..64: less padding (length.png)
  d.equal_widths = True  # source and target share the width: 7 shapes to compile instead of 24, 2 minutes
  # less compilation per variant on one core; bucketed by the longer side of each pair (batching.sort_keys), the
  # batches pad fewer slots than apart (tests/data/test_pipeline.py; benchmarks/README.md, "Batch shapes")
  d.eval_pad_to_multiple = 40  # evaluation widths 40/80/120: 3 shapes to compile per decoder
  m.embed_size = 64  # model size (size.png)
  m.encoder_hidden_size = 64  # annotations of 128 = decoder size, so 'dot' applies too
  m.decoder_hidden_size = 128
  m.score = 'additive(size=64)'  # A, the hidden size of the additive score
  m.query_timing = 'bahdanau(deep_output_size=128)'
  m.dropout = 0.1  # (regularisation.png)
  t.seeds = 'auto'  # a CPU: 2 seeds per variant; an accelerator: 5 vmapped seeds (experiments/cores.py, auto_seeds)
  t.num_steps = 2200  # the same number of updates for every variant (step-matched)
  t.time_budget_minutes = 0.0
  t.learning_rate = 1e-2  # (schedule.png)
  t.schedule = 'cosine'  # to 0 at num_steps (schedule.png)
  t.warmup_steps = 50
  t.label_smoothing = 0.1  # (regularisation.png)
  t.log_every = 50
  t.eval_every = 500  # validation curve of every variant (results_curves.png)
  t.eval_max_sentences = 300  # spread over the lengths
  t.checkpoint_every = 500
  config.sweep = default.get_sweep_config(f'none,{m.score},general')
  config.sweep.query_timings = m.query_timing
  config.sweep.heatmap_min_words = 30  # heatmaps of long sentences, where attention matters
  return config
