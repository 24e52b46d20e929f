"""Which variant is better, by how much, and is it decided: the statistics of a comparison of variants.

  pair_tests    one contrast over seeds and test sentences: per-seed corpus BLEU, the jackknife over sentences,
                the paired test where the seeds match and the unpaired one where they do not, TOST
  family        the declared family of contrasts, the error budget of each look, the three answers
  verdicts      a family's verdicts from per-seed scores (compare_scores), every surface's one analysis
  planning      the seeds per variant that would decide an undecided contrast
  sequential    seeds trained in rounds until decided: a declared design of looks and its alpha spending
  calibration   the statistics proven by simulation on sacrebleu's BLEU and by A/A splits of real runs
  seed_design   the seed design proven at the seed level: paired seeds, unequal seed variances, families of 1-10

Calling the package is the API's `attnmt.compare(run_dirs, ...)` (attnmt.api.compare): runs decoded and
compared, as data. The two share a name because they answer one question; the call needs the whole API, so it
is imported only when made.
"""

import sys
import types


class _Package(types.ModuleType):
  def __call__(self, *args, **kwargs):
    from attnmt import api  # the one import upward: the call decodes runs, which this package never does

    return api.compare(*args, **kwargs)


sys.modules[__name__].__class__ = _Package
