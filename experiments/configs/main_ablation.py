"""The main job: a small ablation of attention scores on the embedded English-Spanish Bible, 2 seeds each,
sized to finish within 20 minutes on 2 CPU cores, then the analysis (BLEU by length, heatmaps).

    ./launch.sh main          # = python -m experiments.sweep --config=experiments/configs/main_ablation.py

The sweep section lists the axes; every combination is one variant (invalid ones are reported and skipped).
"""
from experiments.configs import default


def get_config():
  config = default.get_config()
  m, d, t = config.model, config.data, config.train
  d.vocab_size = 4000
  d.max_source_length = 48
  d.max_target_length = 48
  d.pad_to_multiple = 16          # few distinct batch shapes: few compilations
  m.embed_size = 128
  m.encoder_hidden_size = 128     # annotations of 256 = decoder size, so 'dot' applies
  m.decoder_hidden_size = 256
  m.attention_size = 128
  m.output_size = 256
  m.dropout = 0.1
  t.seeds = '0,1'
  t.num_steps = 1200
  t.learning_rate = 2e-3
  t.warmup_steps = 100
  t.schedule = 'rsqrt'
  t.log_every = 100
  t.eval_every = 0                # validation once, at the end (it picks the checkpoint the test uses)
  t.eval_max_sentences = 400
  t.checkpoint_every = 400
  config.sweep = default.get_sweep_config()
  return config
