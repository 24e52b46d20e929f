r"""The wall time of one command, as JSON: what a whole run costs, compilation included.

    python -m benchmarks.wall --out=wall.json -- ./launch.sh main --workdir=/tmp/w --config.sweep.scores=additive

Runs the command after `--` (its output passes through), then writes {'command', 'wall_s', 'returncode'} to
`--out` and exits with the command's status. benchmarks/device_check.sh's part `compile` times one variant of the
main job with every training width its own shape against one shape this way.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time


def main(argv: list[str]) -> int:
  if '--' not in argv or not argv[argv.index('--') + 1 :]:
    print('usage: python -m benchmarks.wall [--out=FILE] -- COMMAND ...', file=sys.stderr)
    return 2
  split = argv.index('--')
  options, command = argv[:split], argv[split + 1 :]
  out = next((o.split('=', 1)[1] for o in options if o.startswith('--out=')), None)
  start = time.perf_counter()
  returncode = subprocess.call(command)
  record = {'command': command, 'wall_s': round(time.perf_counter() - start, 3), 'returncode': returncode}
  if out:
    with open(out, 'w') as f:
      json.dump(record, f, indent=1)
  print(json.dumps(record))
  return returncode


if __name__ == '__main__':
  sys.exit(main(sys.argv[1:]))
