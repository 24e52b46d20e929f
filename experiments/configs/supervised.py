"""Supervised attention on the synthetic task: additive attention trained with and without the alignment loss
(train.alignment_loss_weight 0 and 1; same seed, data order and steps), then the sweep's analysis: AER against
the task's gold alignments, BLEU, attention entropy. A few minutes per variant on 2 CPU cores
(docs/results/supervised.md records what it measured).

    python -m experiments.sweep --config=experiments/configs/supervised.py --workdir=runs/supervised
"""

from experiments.configs import default


def get_config():
  config = default.get_config()
  m, d, t = config.model, config.data, config.train
  d.name = 'synthetic_numbers'  # digits -> German number words, with gold word alignments
  d.synthetic_eval_size = 500  # validation and test sentences, each
  d.vocab_size = 100  # sentencepiece stops at 26 + 58 pieces: words, but '▁' + ',' and '▁' + 'und'
  d.batch_size = 32
  d.fixed_source_length = 24  # one batch shape, one compilation: sources have up to 19 tokens with EOS,
  d.fixed_target_length = 32  # targets 31
  d.eval_pad_to_multiple = 0
  m.embed_size = 32
  m.encoder_hidden_size = 32
  m.decoder_hidden_size = 64
  m.score = 'additive(size=32)'
  m.query_timing = 'bahdanau(deep_output_size=64)'
  m.dropout = 0.1
  t.num_steps = 5000
  t.learning_rate = 1e-2
  t.warmup_steps = 100
  t.label_smoothing = 0.0
  t.log_every = 50
  t.eval_every = 1000
  t.checkpoint_every = 1000
  config.sweep = default.get_sweep_config(m.score)
  config.sweep.query_timings = m.query_timing
  config.sweep.axes = 'train.alignment_loss_weight=0,1'
  config.sweep.num_heatmaps = 2
  return config
