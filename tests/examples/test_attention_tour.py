"""examples/attention_tour.ipynb runs from top to bottom (nbclient with ipykernel) on two tiny runs this test
trains, `none` and `additive` of the synthetic task; an error in any cell fails the test."""

import os

import nbclient
import nbformat
import pytest

from attnmt.training import trainer
from experiments.configs import tiny

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NOTEBOOK = os.path.join(ROOT, 'examples', 'attention_tour.ipynb')


@pytest.fixture(scope='module')
def run_dir(tmp_path_factory):
  root = tmp_path_factory.mktemp('tour')
  for score in ('none', 'additive'):
    config = tiny.get_config()
    config.model.score = score
    config.data.data_dir = str(root / 'data')
    config.train.num_steps = config.train.eval_every = 10
    trainer.train_and_evaluate(config, str(root / f'{score}-bahdanau-global'))
  return root


def execute(run_dir, steps: int = 4) -> nbformat.NotebookNode:
  """The notebook executed on the runs in `run_dir` (every cell, or CellExecutionError at the first error)."""
  notebook = nbformat.read(NOTEBOOK, as_version=4)
  env = {'ATTNMT_RUN_DIR': str(run_dir), 'ATTNMT_TOUR_STEPS': str(steps), 'JAX_PLATFORMS': 'cpu', 'PYTHONPATH': ROOT}
  saved = {k: os.environ.get(k) for k in env}
  os.environ.update(env)  # the kernel inherits this process's environment
  try:
    nbclient.NotebookClient(
      notebook, timeout=600, kernel_name='python3', resources={'metadata': {'path': ROOT}}
    ).execute()
  finally:
    for k, v in saved.items():
      os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)
  return notebook


@pytest.mark.slow
def test_the_tour_is_stored_without_outputs_and_runs_without_an_error(run_dir):
  stored = nbformat.read(NOTEBOOK, as_version=4)
  code = [c for c in stored.cells if c.cell_type == 'code']
  assert all(not c.outputs and c.execution_count is None for c in code)
  notebook = execute(run_dir)
  outputs = [o for c in notebook.cells if c.cell_type == 'code' for o in c.outputs]
  assert not [o for o in outputs if o.output_type == 'error']
  images = [o for o in outputs if 'image/png' in o.get('data', {})]
  # two heatmaps side by side, forced decoding, the permuted attention, BLEU by length, the new score's heatmap
  assert len(images) == 5
  printed = ''.join(o.get('text', '') for o in outputs if o.output_type == 'stream')
  assert printed.count('counterfactual: ') == 6  # 3 verses x (permute, uniform)
  (table,) = [o.data['text/markdown'] for o in outputs if 'text/markdown' in o.get('data', {})]
  assert '| none/bahdanau/global | 1 |' in table and '| additive/bahdanau/global | 1 |' in table
  assert '± 0.00' not in table and 'not ranked' in table  # one seed each: values alone, no ranking


def test_a_missing_run_directory_stops_the_tour_at_its_first_load_with_one_line(tmp_path):
  """ATTNMT_RUN_DIR naming no runs: the cell that loads them fails with attnmt's own one-line CheckpointError
  (the directory and what to pass), not a third-party error from deeper down."""
  missing = tmp_path / 'nowhere'
  with pytest.raises(nbclient.exceptions.CellExecutionError) as e:
    execute(missing)
  assert e.value.ename == 'CheckpointError'
  assert e.value.evalue == f'{missing / "none-bahdanau-global"} does not exist; pass the workdir of a training run'
  assert not missing.exists()  # nothing was created
