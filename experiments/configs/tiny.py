"""A tiny config for tests and smoke runs: the synthetic numbers task, a small model, a few steps.

python -m experiments.train --config=experiments/configs/tiny.py --workdir=/tmp/attnmt_tiny
"""

from experiments.configs import default


def get_config():
  config = default.get_config()
  d, m, t = config.data, config.model, config.train
  d.name = 'synthetic_numbers'
  d.synthetic_size = 600
  d.synthetic_eval_size = 40
  d.tokenizer = 'word'
  d.vocab_size = 64
  d.batch_size = 16
  d.fixed_source_length = 16  # one batch shape: one compilation
  d.fixed_target_length = 32
  d.max_source_length = 16
  d.max_target_length = 32
  d.eval_pad_to_multiple = 0
  m.embed_size = 16
  m.encoder_hidden_size = 16
  m.decoder_hidden_size = 32
  m.score = 'additive(size=16)'
  m.query_timing = 'bahdanau(deep_output_size=16)'
  m.dropout = 0.1
  t.num_steps = 40
  t.schedule = 'rsqrt'  # the tests' expected losses and BLEU were set on this schedule
  t.label_smoothing = 0.0  # ... and without label smoothing
  t.warmup_steps = 5
  t.learning_rate = 3e-3
  t.log_every = 10
  t.eval_every = 20
  t.checkpoint_every = 10
  t.tensorboard_heatmaps = 0  # a decoder and a figure per evaluation: test_evaluation_statistics.py asks for them
  config.sweep = default.get_sweep_config('none,additive(size=16)')
  config.sweep.query_timings = m.query_timing
  config.sweep.beam_size = 3
  config.sweep.num_heatmaps = 2
  return config
