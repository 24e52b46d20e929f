"""Looking inside trained runs: reload a run directory (`inspection.load_run`, `load_model`), translate
and force-decode with attention, alignment error rate, the analysis of a set of runs (`report`), its
tables, plots, HTML page and exports.
"""
