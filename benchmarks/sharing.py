r"""Several training processes sharing one device against one process alone: what the main job's layout costs.

    python -m benchmarks.sharing ALONE.json TOGETHER_0.json TOGETHER_1.json ... [--out=sharing.json]

Each file is what `benchmarks.bench --only=seeds --seeds=K --noprobe` wrote: ALONE from one process with the
device to itself, TOGETHER_i from N processes started at once (device_check.sh's `concurrent` part, the way
its main job trains N variants as N shards). A sweep in one process trains the variants one after another,
so N variants cost N times the alone step; N processes at once cost what their slowest step takes. The
ratio of the two is what running the variants at once saves (above 1) or loses (below 1). The processes'
timed windows are checked to overlap: a process that timed alone while the others were still compiling
would flatter the shared figure.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def summarise(alone: dict, together: list[dict]) -> dict:
  """The figures of the comparison, from the bench JSONs (each with one `seeds` row of the same K)."""
  (a,) = alone['seeds']
  rows = [t['seeds'][0] for t in together]
  if any(r['seeds'] != a['seeds'] for r in rows):
    raise ValueError(
      f'every run must time the same K seeds; got {a["seeds"]} alone, {[r["seeds"] for r in rows]} at once'
    )
  n = len(rows)
  shared_s = [r['step_s'] for r in rows]
  start = max(r['timed_window'][0] for r in rows)  # the span in which every process was timing
  end = min(r['timed_window'][1] for r in rows)
  longest = max(r['timed_window'][1] - r['timed_window'][0] for r in rows)
  return {
    'seeds_per_process': a['seeds'],
    'processes': n,
    'alone_step_s': a['step_s'],
    'shared_step_s': shared_s,
    # N variants' steps: one process, in turn (N alone steps), against N processes at once (the slowest one)
    'in_turn_s': n * a['step_s'],
    'at_once_s': max(shared_s),
    'at_once_speedup': n * a['step_s'] / max(shared_s),
    'overlap_fraction': max(0.0, end - start) / longest if longest > 0 else 0.0,
  }


def table(s: dict) -> str:
  return '\n'.join(
    [
      f'{s["processes"]} processes of {s["seeds_per_process"]} vmapped seeds each, sharing one device:',
      f'  alone: {1e3 * s["alone_step_s"]:.2f} ms per step; at once: '
      + ', '.join(f'{1e3 * t:.2f}' for t in s['shared_step_s'])
      + ' ms per step',
      f'  {s["processes"]} variants\' steps in turn {1e3 * s["in_turn_s"]:.2f} ms, at once {1e3 * s["at_once_s"]:.2f} ms: '
      f'at once is {s["at_once_speedup"]:.2f}x in turn; the timed windows overlapped '
      f'{100 * s["overlap_fraction"]:.0f} % of the longest',
    ]
  )


def main(argv: list[str]) -> int:
  out = next((a.split('=', 1)[1] for a in argv if a.startswith('--out=')), None)
  paths = [a for a in argv if not a.startswith('--')]
  if len(paths) < 2:
    print('usage: python -m benchmarks.sharing ALONE.json TOGETHER_0.json [TOGETHER_1.json ...] [--out=FILE]')
    return 2
  try:
    alone, *together = [json.loads(Path(p).read_text()) for p in paths]
    s = summarise(alone, together)
  except (OSError, ValueError, KeyError) as e:
    print(f'benchmarks.sharing: cannot compare {paths}: {e!r}; each must be a bench JSON with a seeds section')
    return 1
  print(table(s))
  if out:
    Path(out).write_text(json.dumps(s, indent=1))
  return 0


if __name__ == '__main__':
  sys.exit(main(sys.argv[1:]))
