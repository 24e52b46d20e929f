"""The `train` section of an attnmt config (every setting: default, meaning, accepted values, in TRAIN) and
the checks of a whole config before a run writes anything; each failure is one ConfigError naming the key
and its valid range.

The data section is declared in attnmt/data/config.py, the model in attnmt/model/config.py (ModelConfig,
whose validate checks values, names and combinations); settings that only work together across sections
(supervised attention) are checked by validate_supervision.
"""

from __future__ import annotations

import ml_collections

from attnmt import schema
from attnmt.data.config import DATA, validate_data
from attnmt.errors import ConfigError
from attnmt.model import scores
from attnmt.model.config import MODEL, canonical_section
from attnmt.training import row_threads
from attnmt.schema import Setting

TRAIN = (
  Setting(
    'seeds',
    '0',
    "comma-separated; several seeds train together in one vmapped program; in a sweep 'auto' is 0 on a CPU and "
    '0,1,2,3,4 on an accelerator (experiments/cores.py)',
  ),
  Setting('num_steps', 12000, 'optimiser steps (the cosine schedule ends here)', lo=1, resumable=True),
  Setting(
    'time_budget_minutes',
    0.0,
    '> 0: the step at which this much training time has passed becomes the last one',
    lo=0.0,
    resumable=True,
  ),
  Setting('learning_rate', 1e-2, 'peak learning rate (Adam; schedule.png, size.png)', lo='>0'),
  Setting(
    'schedule',
    'cosine',
    "'constant', 'cosine' (to 0 at num_steps) or 'rsqrt' (1/sqrt(step) after warmup); schedule.png",
    choices=('constant', 'cosine', 'rsqrt'),
  ),
  Setting('warmup_steps', 100, 'linear warm-up from 0', lo=0),
  Setting('clip_norm', 1.0, 'global-norm gradient clipping (0 = no clipping)', lo=0.0),
  Setting('label_smoothing', 0.1, '0 = plain cross-entropy (regularisation.png)', lo=0.0, hi='<1'),
  Setting(
    'coverage_loss_weight',
    0.0,
    'See et al. 2017: + weight * sum_t sum_i min(a_ti, sum_{t\'<t} a_t\'i) per token',
    lo=0.0,
  ),
  Setting(
    'alignment_loss_weight',
    0.0,
    'supervised attention (Liu et al. 2016, Mi et al. 2016): > 0 adds this weight times the cross-entropy of the '
    'teacher-forced attention against gold alignments (train_step.alignment_loss) to the loss; 0 = off. Needs gold '
    'alignments (data.name=synthetic_numbers, or tsv_pairs with data.alignment_path) and a score other than none',
    lo=0.0,
  ),
  Setting('log_every', 50, 'steps between progress lines and training-metric records', lo=1, resumable=True),
  Setting('eval_every', 1000, 'steps between validation evaluations (0 = only at the end)', lo=0, resumable=True),
  Setting('eval_beam_size', 0, '0 = greedy only at evaluation; k > 0 adds beam-search BLEU', lo=0, resumable=True),
  Setting(
    'eval_max_sentences', 0, 'validate on this many sentences spread over the lengths (0 = all)', lo=0, resumable=True
  ),
  Setting(
    'tensorboard_heatmaps',
    4,
    "at every evaluation, TensorBoard images of the first seed's attention on this many validation sentences "
    '(greedy output; chosen once per run, spread over source length; 0 = none; a sweep over train.seeds draws them '
    "in each variant's first seed's run): attnmt/training/tensorboard_heatmaps.py",
    lo=0,
    resumable=True,
  ),
  Setting('checkpoint_every', 1000, 'steps between checkpoints of the latest state', lo=1, resumable=True),
  Setting('beam_alpha', 0.6, 'length penalty ((5 + len) / 6) ** alpha', lo=0.0),
  Setting(
    'beam_coverage_penalty',
    0.0,
    'beta of Wu et al. 2016: + beta * sum_i log(min(sum_t a_ti, 1)) on finished beams',
    lo=0.0,
  ),
  Setting('max_decode_factor', 1.5, 'decode up to factor * source width + 10 tokens', lo='>0'),
  Setting(
    'num_devices',
    0,
    'data-parallel devices (0 = all, on every host); data.batch_size is the global batch',
    lo=0,
    resumable=True,
  ),
  Setting(
    'step_threads',
    'auto',
    "the training step as this many blocks of the batch's rows, each on its own thread, added up in one update "
    "(attnmt/training/row_threads.py): 'auto' is one per core on a CPU with one device while blocks keep 32 rows, "
    'else 1 (the step as one program); the same update up to rounding, with other dropout masks',
    resumable=True,
    before='1',
  ),
  Setting(
    'nonfinite',
    'stop',
    "on a NaN/inf loss or gradient: 'stop' (no checkpoint after it) or 'skip' the update",
    choices=('stop', 'skip'),
    resumable=True,
  ),
)


# Every section's rows: what `checkpoints` fills into an older run's config and compares on resume.
SECTIONS = {'model': tuple(row for row in MODEL if not row.derived), 'data': DATA, 'train': TRAIN}


def get_train_config() -> ml_collections.ConfigDict:
  """The train section's defaults (TRAIN)."""
  return schema.defaults(TRAIN)


def _section(config, name: str) -> ml_collections.ConfigDict:
  section = config.get(name) if hasattr(config, 'get') else None
  if section is None:
    raise ConfigError(f'the config has no {name} section; start from experiments/configs/default.py')
  return section


def validate_train(t) -> None:
  schema.check('train', TRAIN, t)
  try:
    row_threads.check_setting(t.step_threads)
  except ValueError as e:
    raise ConfigError(str(e)) from None


def has_gold_alignments(d) -> bool:
  """Whether the corpus of data config `d` carries gold word alignments: the synthetic task does, and a
  tsv_pairs corpus with a Pharaoh file (data.alignment_path)."""
  return d.name == 'synthetic_numbers' or (d.name == 'tsv_pairs' and bool(d.alignment_path))


def validate_supervision(config) -> None:
  """Supervised attention (train.alignment_loss_weight > 0) needs attention to train and gold alignments."""
  weight = config.train.alignment_loss_weight
  if not weight:
    return
  if not scores.build(config.model).attends:
    raise ConfigError(
      f'train.alignment_loss_weight={weight} trains attention, and model.score={config.model.score} has none '
      '(every weight is 1 / length); use an attention score such as additive, or set the weight to 0'
    )
  if not has_gold_alignments(config.data):
    raise ConfigError(
      f'train.alignment_loss_weight={weight} needs gold alignments, and data.name={config.data.name} has none; '
      'use data.name=synthetic_numbers, or tsv_pairs with data.alignment_path (a Pharaoh file), or set the '
      'weight to 0'
    )


def canonical(config, live: bool = False) -> ml_collections.ConfigDict:
  """A copy of `config` as it trains and as config.json stores it: the model section under current keys, each
  component selection with every option written out (model.config.canonical_section; `live`: a config about
  to run, whose former model settings print how to write them now, and are refused where nothing reads them). Training, the API and the sweep all pass a config
  through here once, on the way in."""
  out = ml_collections.ConfigDict(config.to_dict())
  out.model = canonical_section(_section(config, 'model').to_dict(), live)
  return out


def validate(config) -> None:
  """Every train, data and model value against its declaration, before anything is written."""
  validate_train(_section(config, 'train'))
  validate_data(_section(config, 'data'))
  model = canonical_section(_section(config, 'model'))  # values; ModelConfig.validate: names, combinations
  schema.check('model', MODEL, model)
  validate_supervision(config)
