"""What a `jax.profiler` trace says about the device: the kernels it launched (`device_events`), per step and by
kind (`device_kernels`), and the union of time intervals (`merged_length`) both count busy time with. Read by
benchmarks/kernels.py (kernels per call of the fused and readable paths) and tools/profile_step.py."""

import collections


def merged_length(intervals: list[tuple[int, int]]) -> int:
  """Total length of the union of half-open [start, end) intervals."""
  total, end = 0, None
  for s, e in sorted(intervals):
    if end is None or s > end:
      total += e - s
      end = e
    elif e > end:
      total += e - end
      end = e
  return total


# Kernel names by kind, matched in order against the lower-cased name. cuBLAS/CUTLASS products carry
# gemm/xmma/cutlass in their names, and XLA's own product kernels are `gemm_fusion...` or `...dot...`
# fusions; copies and fills are the runtime's memcpy/memset or XLA's copy/dynamic-update-slice kernels.
KERNEL_KINDS = (
  ('matrix products', ('gemm', 'xmma', 'cutlass', 'cublas', 'dot', 'matmul')),
  ('copies and fills', ('memcpy', 'memset', 'copy', 'dynamic_update_slice', 'dynamic-update-slice', 'broadcast')),
)


def kernel_kind(name: str) -> str:
  """'matrix products', 'copies and fills' or 'other kernels', from a device kernel's name."""
  low = name.lower()
  return next((kind for kind, marks in KERNEL_KINDS if any(m in low for m in marks)), 'other kernels')


def device_events(data):
  """The kernels of a `jax.profiler.ProfileData` trace, as events of the device's planes ('/device:...').

  A device plane's lines are its streams; lines named for XLA's ops or modules repeat the kernels' time in
  another grouping and would count it twice. A CPU backend's trace has none (its ops run on host threads)."""
  for plane in data.planes:
    if plane.name.startswith('/device:'):
      for line in plane.lines:
        if 'stream' in line.name.lower():
          yield from line.events


def device_kernels(data, steps: int, step_wall_s: float) -> dict | None:
  """Per step: kernels launched, the device's busy time (the union of kernel intervals over all its
  streams) in total and by kind, its idle share of the step's wall time, and the 8 costliest kernel
  names. `data` is a `jax.profiler.ProfileData`; the device's planes are named '/device:...'. None when
  the trace has no device plane (the CPU backend runs its ops on host threads)."""
  intervals, by_kind, by_name, count = [], collections.defaultdict(list), collections.Counter(), 0
  for ev in device_events(data):
    span = (ev.start_ns, ev.start_ns + ev.duration_ns)
    intervals.append(span)
    by_kind[kernel_kind(ev.name)].append(span)
    by_name[ev.name] += ev.duration_ns
    count += 1
  if not count:
    return None
  busy_s = merged_length(intervals) / steps / 1e9
  return {
    'kernels_per_step': count / steps,
    'busy_s': busy_s,
    'step_wall_s': step_wall_s,
    'idle_fraction': max(0.0, 1 - busy_s / step_wall_s),
    'mean_kernel_us': 1e6 * sum(by_name.values()) / 1e9 / count,
    'by_kind_s': {k: merged_length(v) / steps / 1e9 for k, v in sorted(by_kind.items())},
    'top_kernels_s': {k: v / steps / 1e9 for k, v in by_name.most_common(8)},
  }
