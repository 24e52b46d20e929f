"""The analysis's settings, declared once as `schema.Setting` rows: a sweep's section holds the ones its
analysis reads (experiments/configs/default.py, `sweep.beam_size` ...), and the entry points' flags are these
rows (`experiments.common.define_flags`: `analyze --beam_size` is the same setting, default and check)."""

from attnmt.schema import Setting

WHICH = Setting('which', 'best', 'which checkpoint of each run', choices=('best', 'latest'))
BEAM_SIZE = Setting(
  'beam_size', 0, 'beam width of the beam-search translations and their BLEU, beside greedy (0: greedy only)', lo=0
)
HEATMAPS = (
  Setting('num_heatmaps', 3, 'random test sentences drawn as heatmaps per variant', lo=0),
  Setting('heatmap_min_words', 0, '... among those whose source has at least this many words', lo=0),
)
SWEEP = (BEAM_SIZE, *HEATMAPS)  # what a sweep's analysis reads from its section
RUNS = (  # analyze --runs
  WHICH,
  *SWEEP,
  Setting('heatmap_seed', 0, 'seed choosing the random heatmap sentences'),
  Setting('report_sentences', 200, 'report.html embeds this many test sentences (plus the heatmap ones)', lo=0),
)
