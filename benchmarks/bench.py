r"""The speed benchmark: the bench config (docs/design.md) against this machine's matrix-multiply peak.

    python -m benchmarks.bench                      # everything, about 10 minutes on 2 CPU cores
    python -m benchmarks.bench --quick --only=train  # a smoke check
    ./launch.sh bench --dtype=bfloat16               # bf16 compute, float32 parameters (for GPUs)

Measures in one run: the float32 (or bf16) matmul peak, at the start, between every two timed
calls (each call's fraction of peak is taken against the peak of its own moment, see
benchmarks/timing.py) and at the end; the training step (compile time, median step, target
tokens/s, model GFLOP/s, fraction of peak); greedy and beam-5 decoding of 64 sentences to exactly 32 tokens; K = 1, 2, 4 seeds in one vmapped
program; every other score function and the `luong` query timing; with `--only=decode_seeds`, greedy decoding by K
seeds in one vmapped program against the seeds one after another. Prints a table and writes JSON
(`--out`, default `benchmarks/results/bench_<host>.json`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import socket
import sys
from pathlib import Path

from absl import app, flags

SECTIONS = ('train', 'decode', 'seeds', 'scores')  # what a plain run measures
OPTIONAL = ('decode_seeds',)  # only when --only names it

_QUICK = flags.DEFINE_bool('quick', False, 'fewer timed steps and smaller peak matrices: a smoke check')
_ONLY = flags.DEFINE_list('only', list(SECTIONS), f'sections to run, from {",".join(SECTIONS + OPTIONAL)}')
_DTYPE = flags.DEFINE_enum('dtype', 'float32', ['float32', 'bfloat16'], 'compute dtype (parameters stay float32)')
_OUT = flags.DEFINE_string('out', None, 'JSON output path; default benchmarks/results/bench_<host>.json')
_STEPS = flags.DEFINE_integer('steps', None, 'timed calls per figure (default 10, or 3 with --quick)')
_SEEDS = flags.DEFINE_list('seeds', ['1', '2', '4'], 'the seeds section: K seeds in one vmapped program, for each K')
_DECODE_SEEDS = flags.DEFINE_list(
  'decode_seeds', ['5'], 'the decode_seeds section: greedy decoding by K seeds, vmapped against one after another'
)
_PROBE = flags.DEFINE_bool(
  'probe',
  True,
  'probe the matmul peak between timed calls; --noprobe leaves the device to the timed program (every figure '
  'then divides by the start peak), e.g. for several processes timed at once on one GPU',
)
_MODEL = flags.DEFINE_enum(
  'model',
  'bench',
  ['bench', 'main', 'tiny'],
  "'bench': the bench config (docs/design.md); 'main': the main job's model, batch and length "
  "(experiments/configs/main_ablation.py); 'tiny': the tests' tiny config (a smoke check of the code path)",
)


def main_job_model():
  """The main job's model at its batch size and 32 tokens per side (cases.config_model)."""
  from benchmarks.cases import config_model

  return config_model('main_ablation')


def machine() -> dict:
  """What the figures were measured on."""
  import jax
  from attnmt.training import host_memory

  cpu = platform.processor() or ''
  try:
    for line in Path('/proc/cpuinfo').read_text().splitlines():
      if line.startswith('model name'):
        cpu = line.split(':', 1)[1].strip()
        break
  except OSError:
    pass
  return {
    'host': socket.gethostname(),
    'cpu': cpu,
    'cpu_cores': os.cpu_count(),
    'jax': jax.__version__,
    'backend': jax.default_backend(),
    'devices': [str(d) for d in jax.devices()],
    'xla_flags': os.environ.get('XLA_FLAGS', ''),
    'malloc': host_memory.allocator(),
  }


def run(
  cfg,
  sizes,
  sections=SECTIONS,
  peak_sizes=(1024, 2048),
  peak_repeats=10,
  log=print,
  seeds=(1, 2, 4),
  decode_seeds=(5,),
  probe_between=True,
) -> dict:
  """Runs the chosen sections on model `cfg` at `sizes`; returns the results as one JSON-able dict."""
  from benchmarks import cases
  from benchmarks.timing import FixedPeak, PeakProbe, matmul_peak

  unknown = set(sections) - set(SECTIONS + OPTIONAL)
  if unknown:
    raise ValueError(f'unknown section(s) {sorted(unknown)}; valid: {", ".join(SECTIONS + OPTIONAL)}')
  result = {
    'machine': machine(),
    'model': dataclasses.asdict(cfg),
    'sizes': dataclasses.asdict(sizes),
    'loadavg_start': os.getloadavg(),
  }
  peak_start = matmul_peak(peak_sizes, peak_repeats, cfg.dtype)
  log(f'matmul peak: {peak_start["gflops"]:.1f} GFLOP/s ({cfg.dtype})')
  peak = peak_start['gflops']
  probe = PeakProbe(peak_sizes[-1], cfg.dtype) if probe_between else FixedPeak(peak)

  def checked(case: dict) -> dict:
    """Marks a case whose probed peak fell well below the start's: the machine's load changed."""
    return {**case, 'load_changed': case['peak_gflops'] < 0.9 * peak}

  if 'train' in sections:
    result['train'] = checked(cases.train_case(cfg, sizes, probe, peak))
    log(f'train: {result["train"]["step_s"]:.3f} s/step')
  if 'decode' in sections:
    result['greedy'] = checked(cases.decode_case(cfg, sizes, probe, peak, beam=1))
    log(f'greedy: {result["greedy"]["call_s"]:.3f} s')
    result['beam'] = checked(cases.decode_case(cfg, sizes, probe, peak, beam=sizes.beam))
    log(f'beam: {result["beam"]["call_s"]:.3f} s')
  if 'seeds' in sections:
    result['seeds'] = [checked(cases.seeds_case(cfg, sizes, probe, peak, k)) for k in seeds]
    log('seeds: ' + ', '.join(f'{s["seeds"]}: {s["step_s"]:.3f} s' for s in result['seeds']))
  if 'decode_seeds' in sections:
    result['decode_seeds'] = [checked(cases.decode_seeds_case(cfg, sizes, probe, peak, k)) for k in decode_seeds]
    log(
      'decode seeds: '
      + ', '.join(
        f'{d["seeds"]}: {d["call_s"]:.3f} s vmapped, {d["sequential_s"]:.3f} s in turn' for d in result['decode_seeds']
      )
    )
  if 'scores' in sections:
    result['scores'] = {}
    for name, variant in cases.score_variants(cfg).items():
      result['scores'][name] = checked(cases.train_case(variant, sizes, probe, peak, breakdown=False))
      log(f'score {name}: {result["scores"][name]["step_s"]:.3f} s/step')
  peak_end = matmul_peak(peak_sizes, peak_repeats, cfg.dtype)
  result['peak'] = {
    'gflops': peak,
    'start': peak_start,
    'end': peak_end,
    'probe_n': probe.n,
    'loadavg_end': os.getloadavg(),
    'note': 'fraction_of_peak: median over timed calls of each call\'s rate against the '
    'mean of the n x n products timed right before and after it (peak_gflops is '
    'their median); fraction_of_start_peak uses the start measurement. A case whose '
    'peak_gflops is below 0.9 x start ran under a changed load (marked * in the table)',
  }
  return result


def table(result: dict) -> str:
  """The results as a Markdown table, one row per measured program."""
  rows = [('program', 'time (s)', 'rate', 'GFLOP', 'GFLOP/s', 'peak then', 'of peak', 'of start peak', 'compile (s)')]

  def add(name, seconds, rate, r):
    mark = '*' if r.get('load_changed') else ''
    rows.append(
      (
        name,
        f'{seconds:.3f}',
        rate,
        f'{r["gflop"]:.1f}',
        f'{r["gflops"]:.1f}',
        f'{r["peak_gflops"]:.1f}',
        f'{100 * r["fraction_of_peak"]:.0f}%{mark}',
        f'{100 * r["fraction_of_start_peak"]:.0f}%',
        f'{r["compile_s"]:.1f}',
      )
    )

  if 'train' in result:
    t = result['train']
    add('train step (additive, bahdanau)', t['step_s'], f'{t["target_tokens_per_s"]:.0f} tok/s', t)
  for key in ('greedy', 'beam'):
    if key in result:
      d = result[key]
      add(
        f'{key} decode, {result["sizes"]["batch"]} x {result["sizes"]["tgt_len"]}'
        + (f', beam {d["beam"]}' if key == 'beam' else ''),
        d['call_s'],
        f'{d["sentences_per_s"]:.1f} sent/s',
        d,
      )
  base = None
  for s in result.get('seeds', []):
    base = base or s['tokens_per_s_per_seed']
    memory = f', device peak {s["device_peak_bytes"] / 2**30:.2f} GiB' if s.get('device_peak_bytes') else ''
    add(
      f'{s["seeds"]} seed(s), vmapped',
      s['step_s'],
      f'{s["tokens_per_s_per_seed"]:.0f} tok/s/seed ({s["tokens_per_s_per_seed"] / base:.2f}x){memory}',
      s,
    )
  for d in result.get('decode_seeds', []):
    add(
      f'greedy decode, {d["seeds"]} seeds vmapped',
      d['call_s'],
      f'{d["speedup"]:.2f}x the seeds in turn ({d["sequential_s"]:.3f} s); tokens equal {100 * d["tokens_equal"]:.1f}%',
      d,
    )
  for name, t in result.get('scores', {}).items():
    add(f'train step, {name}', t['step_s'], f'{t["target_tokens_per_s"]:.0f} tok/s', t)
  widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
  lines = ['| ' + ' | '.join(c.ljust(w) for c, w in zip(r, widths)) + ' |' for r in rows]
  lines.insert(1, '| ' + ' | '.join('-' * w for w in widths) + ' |')
  p = result['peak']
  if any('*' in row[6] for row in rows):
    lines.append('* the peak probed during this row was below 0.9 x the start: the machine\'s load changed')
  if p['probe_n']:
    lines.append(
      f'\n"peak then": the median of {p["probe_n"]}^3 products timed between the calls; "of peak" is '
      'the median over calls of each call\'s rate against the products right before and after it.'
    )
  else:
    lines.append('\nNo products timed between the calls (--noprobe): "peak then" and "of peak" are the start\'s.')
  lines.append(
    f'matmul peak at the start {p["gflops"]:.1f} GFLOP/s {p["start"]["dtype"]} (end of run: {p["end"]["gflops"]:.1f}); '
    f'{result["machine"]["cpu"]}, {result["machine"]["cpu_cores"]} cores, jax {result["machine"]["jax"]}, '
    f'{result["machine"].get("malloc", "system malloc")}'
  )
  if 'train' in result and 'forward_s' in result['train']:
    t = result['train']
    lines.append(
      f'train step parts: forward {t["forward_s"]:.3f} s ({100 * t["forward_fraction_of_peak"]:.0f}% of peak), '
      f'backward {t["forward_backward_s"] - t["forward_s"]:.3f} s ({100 * t["backward_fraction_of_peak"]:.0f}%), '
      f'optimiser and rest {t["step_s"] - t["forward_backward_s"]:.3f} s'
    )
  return '\n'.join(lines)


def counts(flag, values: list[str], needed: bool) -> list[int]:
  """The seed counts of --`flag` (each a whole number from 1 up; at least one when its section runs), or one line
  on stderr and exit status 2."""
  bad = next((v for v in values if not (v.strip().isascii() and v.strip().isdigit() and int(v) > 0)), None)
  if bad is not None or (needed and not values):
    problem = f'{bad!r} is not a seed count' if bad is not None else 'names no seed count'
    _fail(f'--{flag}={",".join(values)}: {problem}; pass whole numbers from 1 up, e.g. --{flag}=1,2,4')
  return [int(v) for v in values]


def _fail(message: str):
  print(f'error: {message}', file=sys.stderr)
  sys.exit(2)


def main(argv):
  del argv
  valid = SECTIONS + OPTIONAL
  unknown = [s for s in _ONLY.value if s not in valid]
  if unknown or not _ONLY.value:
    what = f'unknown section{"s" * (len(unknown) > 1)} {", ".join(unknown)}' if unknown else 'names no section'
    _fail(f'--only={",".join(_ONLY.value)}: {what}; the sections are {", ".join(valid)}')
  seeds = counts('seeds', _SEEDS.value, 'seeds' in _ONLY.value)
  decode_seeds = counts('decode_seeds', _DECODE_SEEDS.value, 'decode_seeds' in _ONLY.value)
  import jax

  from benchmarks.cases import BENCH_MODEL, Sizes, config_model

  models = {'bench': lambda: (BENCH_MODEL, Sizes()), 'main': main_job_model, 'tiny': lambda: config_model('tiny')}
  cfg, sizes = models[_MODEL.value]()
  cfg = dataclasses.replace(cfg, dtype=_DTYPE.value)
  steps = _STEPS.value or (3 if _QUICK.value else 10)
  sizes = dataclasses.replace(sizes, steps=steps, warmup=1 if _QUICK.value else 2)
  # An accelerator needs larger products to reach its peak: on an H100 the 2048^3 bfloat16 product ran at
  # 173 TFLOP/s, against about 790 at 8192^3 (benchmarks/README.md, "On a GPU").
  big = jax.default_backend() != 'cpu'
  peak_sizes = ((1024, 4096) if big else (512, 1024)) if _QUICK.value else ((2048, 8192) if big else (1024, 2048))
  result = run(
    cfg,
    sizes,
    tuple(_ONLY.value),
    peak_sizes,
    3 if _QUICK.value else 10,
    seeds=seeds,
    decode_seeds=decode_seeds,
    probe_between=_PROBE.value,
  )
  print(table(result))
  name = f'bench_{socket.gethostname()}' + ('' if _MODEL.value == 'bench' else f'_{_MODEL.value}')
  out = Path(_OUT.value or Path(__file__).parent / 'results' / f'{name}.json')
  out.parent.mkdir(parents=True, exist_ok=True)
  out.write_text(json.dumps(result, indent=1))
  print(f'wrote {out}')


if __name__ == '__main__':
  app.run(main)
