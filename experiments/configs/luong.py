"""Luong et al. (2015) Table 4 reproduced at the main job's size: the scores `location`, `dot`, `general`
and `concat` with the global window, `dot` and `general` with the local-m and local-p windows, all with
Luong query timing and input feeding, plus Bahdanau's `additive` (bahdanau timing, global) as the reference and
`none` with Luong's decoder (uniform weights, trained so: Wiegreffe & Pinter's baseline for this form).
Three seeds per variant (trained together in one vmapped program), each variant for the main job's budget.

    ./launch.sh sweep --config=experiments/configs/luong.py --workdir=runs/luong

It resumes: run the same command again after an interruption. On a CPU it trains one single-threaded
process per core (sweep.processes=auto), then writes the tables and the analysis. To split it over
machines, --config.sweep.shard=i/n or =auto, then --config.sweep.report_only=true (docs/sweeps.md).
Its wall time is in docs/results/luong.md, which trained each seed as its own run instead
(--config.sweep.axes="train.seeds=0,1,2"; the tables pool them).
"""

from experiments.configs import main_ablation


def get_config():
  config = main_ablation.get_config()
  config.train.seeds = '0,1,2'
  s = config.sweep
  s.scores = 'location,dot,general,concat(size=64)'
  s.query_timings = 'luong'  # with input feeding, its default
  s.windows = 'global'
  s.cases = '|'.join(
    (
      'model.score=location,dot,general,concat(size=64)',  # Table 4, global
      'model.score=none',  # Wiegreffe & Pinter's baseline for this decoder form: trained with uniform weights
      'model.score=dot,general;model.window=local_m,local_p(predictor_size=64)',  # Table 4, local-m and local-p
      f'model.score=additive(size=64);model.query_timing={config.model.query_timing}',  # the reference: Bahdanau 2015
    )
  )
  s.heatmap_min_words = 30
  return config
