"""Looking inside trained runs: reload a run directory (`inspection.load_run`, `load_model`: one `LoadedRun`), translate
and force-decode with attention, alignment error rate, the analysis of a set of runs (`report`;
each run's own part: `run_analysis`; their verdicts: `run_verdicts`), its tables, plots, HTML page and exports.
"""
