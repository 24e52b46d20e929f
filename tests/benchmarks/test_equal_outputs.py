"""tools/equal_outputs.py, the bit-for-bit check of a refactor, on its first variant: saved then compared it
finds every array equal; an array changed by one ulp is reported and the exit status is 1."""

import numpy as np

from tools import equal_outputs


def test_save_compare_and_a_changed_array_is_found(tmp_path, capsys):
  path = str(tmp_path / 'before.npz')
  assert equal_outputs.main(['equal_outputs.py', 'save', path, '--first=1']) == 0
  assert equal_outputs.main(['equal_outputs.py', 'compare', path, '--first=1']) == 0
  assert 'compared' in capsys.readouterr().out
  arrays = dict(np.load(path))
  key = next(k for k in arrays if k.endswith('|logits'))
  arrays[key] = np.nextafter(arrays[key], np.inf)
  np.savez(path, **arrays)
  assert equal_outputs.main(['equal_outputs.py', 'compare', path, '--first=1']) == 1
  out = capsys.readouterr().out
  assert f'DIFF {key}' in out and ': 1 differ' in out
