"""Default attnmt config: Bahdanau attention on the embedded English-Spanish Bible, with the recipe that
learned fastest per CPU-minute in docs/learning.md (each choice names its figure in docs/curves/).

    python -m experiments.train --config=experiments/configs/default.py --workdir=runs/additive \
        --config.model.score=additive

The `model` section is attnmt.model.config.ModelConfig's defaults (every field commented there; vocabulary
sizes are filled in from the trained tokenizers; each component's options are written after its name,
`additive(size=64)`, and declared by the component); `data` is attnmt/data/config.py's DATA and `train`
attnmt/training/settings.py's TRAIN (every setting with its default, meaning and accepted values). The
model is twice as wide as the main job's (size.png: level with it per minute over 5 minutes, still climbing
when the small one flattens); docs/results/reference.md trains it for 12,000 steps.
"""

import ml_collections

from attnmt import schema
from attnmt.analysis import settings as analysis_settings
from attnmt.compare import family
from attnmt.model.config import model_defaults
from attnmt.schema import Setting
from attnmt.data import get_data_config
from attnmt.training.settings import get_train_config


# The sweep section (experiments/sweep.py): every combination of the axes is one variant (values
# comma-separated); the rest says how the variants train and what the analysis draws.
SWEEP = (
  Setting(
    'scores', 'none,additive,dot,general,concat', "model.score values, each with its options: 'additive(size=64)'"
  ),
  Setting('query_timings', 'bahdanau', "model.query_timing values: bahdanau, luong, 'luong(input_feeding=false)'"),
  Setting('windows', 'global', "model.window values: global, local_m, 'local_p(size=4)'"),
  Setting(
    'input_feeding',
    '',
    "former: luong's option now, written 'luong(input_feeding=false)' in query_timings; 'true,false' still reads "
    "as that, with a notice ('' = not set)",
    before='true',
  ),
  Setting(
    'axes', '', "any other settings: 'model.window=local_p(size=4),local_p(size=8);train.learning_rate=3e-3,1e-2'"
  ),
  Setting(
    'cases',
    '',
    "several grids in one sweep: '|'-separated cases in the syntax of `axes`, each overriding the axes above; "
    "the variants are the union of the cases' combinations ('' = the one grid above)",
  ),
  Setting(
    'shard',
    '',
    "'i/n': train only variants i, i+n, ... (0 <= i < n); 'auto': every unfinished variant no other process "
    'holds. Shards write no tables: sweep.report_only does, once they are done',
  ),
  Setting(
    'processes',
    'auto',
    "training processes: 'auto' = on a CPU, one single-threaded process per core while at least two variants "
    'are unfinished (they train 1.39x the tokens/s of one process on 2 cores; experiments/cores.py); N = N processes',
    before='1',  # a sweep config written before this setting trained in one process
  ),
  Setting('report_only', False, 'train nothing; tables and analysis of the variants finished so far (merges shards)'),
  Setting('analyze', True, 'after training: BLEU by length, heatmaps, AER where gold alignments exist'),
  *analysis_settings.SWEEP,  # beam_size, num_heatmaps, heatmap_min_words: the analysis's own (attnmt.analysis.settings)
  *family.SETTINGS,  # contrasts, delta, spending: the comparison's own settings (attnmt.compare.family)
  Setting(
    'rounds',
    0,
    'seeds until decided: train seeds_per_round more seeds of every variant per round, up to this many rounds, '
    'and stop when every contrast is ranked or equivalent (0: train train.seeds once); train.seeds is not read',
    lo=0,
  ),
  Setting('seeds_per_round', 5, 'with sweep.rounds: seeds per variant added by each round', lo=2),
  Setting(
    'first_seed',
    0,
    'with sweep.rounds: the first seed of round 1; a continuation of an earlier experiment starts past its seeds, '
    'which were looked at already',
    lo=0,
  ),
)


def get_sweep_config(scores: str = 'none,additive,dot,general,concat') -> ml_collections.ConfigDict:
  """The sweep section's defaults (SWEEP), with `scores` as its score axis."""
  s = schema.defaults(SWEEP)
  s.scores = scores
  return s


def get_config() -> ml_collections.ConfigDict:
  config = ml_collections.ConfigDict()
  config.model = model_defaults()
  config.data = get_data_config()
  config.data.vocab_size = 2000  # per side (vocab.png)
  config.data.eval_pad_to_multiple = 40  # evaluation widths 40/80/120: few decoders to compile
  config.train = get_train_config()
  return config
