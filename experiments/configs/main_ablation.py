"""The main job: a small ablation of attention scores on the embedded English-Spanish Bible, 2 seeds each,
sized to finish within 20 minutes on 2 CPU cores, then the analysis (BLEU by length, heatmaps).

    ./launch.sh main          # = python -m experiments.sweep --config=experiments/configs/main_ablation.py

The sweep section lists the axes; every combination is one variant (invalid ones are reported and skipped).
"""
from experiments.configs import default


def get_config():
  config = default.get_config()
  m, d, t = config.model, config.data, config.train
  d.vocab_size = 2000
  d.max_source_length = 40        # training pairs up to 40 tokens (with EOS); evaluation keeps every sentence
  d.max_target_length = 40
  d.pad_to_multiple = 40          # training batches have one shape (one compilation); evaluation 40/80/120
  m.embed_size = 64
  m.encoder_hidden_size = 64      # annotations of 128 = decoder size, so 'dot' applies
  m.decoder_hidden_size = 128
  m.attention_size = 64
  m.output_size = 128
  m.dropout = 0.1
  t.seeds = '0,1'
  t.num_steps = 100000            # the time budget ends training first
  t.time_budget_minutes = 1.8     # per variant: 5 variants, evaluation and analysis fit in 20 minutes on 2 cores
  t.learning_rate = 3e-3
  t.warmup_steps = 50
  t.schedule = 'rsqrt'
  t.log_every = 50
  t.eval_every = 0                # validation once, at the end (it picks the checkpoint the test uses)
  t.eval_max_sentences = 300
  t.checkpoint_every = 500
  config.sweep = default.get_sweep_config()
  return config
