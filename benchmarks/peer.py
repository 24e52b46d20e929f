r"""attnmt against a PyTorch peer on the CPU: the training step and greedy decoding of the main job's model, each
framework in processes of its own, taken in turn.

    python -m benchmarks.peer --size=main --what=train,greedy --pairs=10 --out=benchmarks/results/peer_2core.json
    python -m benchmarks.peer --size=main --isa=avx2 --out=...          # as on a processor without AVX-512
    python -m benchmarks.peer --size=main --frameworks=attnmt,torch,torch_compile   # a torch.compile row too
    python -m benchmarks.peer --size=tiny --pairs=1 --frameworks=attnmt              # a smoke check, no torch

The PyTorch side is benchmarks/torch_peer.py (eager, written the way a PyTorch user would), attnmt's is
benchmarks/peer_attnmt.py (the programs training and evaluation compile). `--size=main` is
experiments/configs/main_ablation.py: its model, batch size, optimiser, schedule, clipping and label smoothing.
Both sides get one synthetic batch (random token ids), 32 tokens per side (`cases.config_model`; `--width` sets
another: the main job's training batches average 40, tools/batch_shapes.py), each row's length drawn from (width - 8, width] with one row at
the full width: a bucketed batch of the main job (`pad_to_multiple=8`, sorted buckets). The PyTorch side starts
from attnmt's initial parameters (`torch_peer.load_attnmt`), so the JSON also says whether the two compute the
same function: their loss on the batch without dropout, and their greedy tokens. Greedy decoding writes exactly
`max_len` (= the target width) tokens on both sides: EOS's output bias is -1e9.

One process per framework per timing run (benchmarks/peer_worker.py): each is started on the cores given (its
CPU affinity, and `torch.set_num_threads`), loads only its own framework, compiles and warms up, times `--steps`
calls of each program and exits; the pairs run A B A B ... . XLA's and PyTorch's thread pools never share a process, so
neither spins or sleeps against the other's, and a slow phase of a shared machine falls on both sides of a pair.
A framework's figure is the median over pairs of its per-process medians; the ratio is PyTorch's time over
attnmt's, per pair, and the median of those.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from absl import app, flags

from attnmt import errors

ROOT = Path(__file__).resolve().parent.parent
SIZES = {'main': 'main_ablation', 'tiny': 'tiny'}  # --size -> experiments/configs/<name>.py
WHAT = ('train', 'greedy')
FRAMEWORKS = ('attnmt', 'torch', 'torch_compile')
# --isa=avx2: each library's own switch. XLA's caps the code it generates (whether the kernel libraries it calls,
# YNNPACK and Eigen, follow it is not established); ATen's caps its vectorised kernels, MKL's and oneDNN's their
# products (PyTorch's matrix products run in MKL).
ISA_ENV = {
  'native': {},
  'avx2': {'ATEN_CPU_CAPABILITY': 'avx2', 'MKL_ENABLE_INSTRUCTIONS': 'AVX2', 'ONEDNN_MAX_CPU_ISA': 'AVX2'},
}
XLA_ISA = {'native': '', 'avx2': '--xla_cpu_max_isa=AVX2'}
RECORDED_ENV = ('XLA_FLAGS', 'ATEN_CPU_CAPABILITY', 'MKL_ENABLE_INSTRUCTIONS', 'ONEDNN_MAX_CPU_ISA', 'OMP_NUM_THREADS')
MISSING_TORCH = (
  "--frameworks names PyTorch, which is not installed; install the peer's extra with the CPU wheel: pip install -e "
  "'.[peer]' --extra-index-url https://download.pytorch.org/whl/cpu (or pass --frameworks=attnmt)"
)


def _define_flags():
  """The command's flags, defined only when it runs (bench.py's and the tools' share some names)."""
  flags.DEFINE_enum('size', 'main', list(SIZES), "'main': experiments/configs/main_ablation.py; 'tiny': tiny.py")
  flags.DEFINE_list('what', list(WHAT), f'programs to time, from {",".join(WHAT)}')
  flags.DEFINE_list('frameworks', ['attnmt', 'torch'], f'in this order within a pair, from {",".join(FRAMEWORKS)}')
  flags.DEFINE_integer('pairs', 5, 'timing runs per framework, taken in turn (one process each)', lower_bound=1)
  flags.DEFINE_integer('steps', 10, 'timed calls of each program per process', lower_bound=1)
  flags.DEFINE_integer(
    'warmup', 2, 'untimed calls of each program per process (torch.compile compiles in the first)', lower_bound=1
  )
  flags.DEFINE_integer('width', 0, 'source and target width of the batch (0: the size\'s own)', lower_bound=0)
  flags.DEFINE_integer('cores', 0, 'CPUs each process runs on (0: all of this process\'s)', lower_bound=0)
  flags.DEFINE_enum('isa', 'native', list(ISA_ENV), "'avx2': both frameworks as on a processor without AVX-512")
  flags.DEFINE_enum(
    'threads',
    'auto',
    ['auto', '1'],
    "attnmt's rows in blocks on threads, as training and translate run them ('auto'), or each program whole ('1': "
    'train.step_threads=1, one block per decoded batch)',
  )
  flags.DEFINE_string('out', None, 'JSON output; default benchmarks/results/peer_<host>_<size>.json')


def _fail(message: str):
  print(f'error: {message}', file=sys.stderr)
  sys.exit(2)


def processor() -> dict:
  """The CPU's model name and the vector extensions that decide the products' speed."""
  cpu = {'model': platform.processor(), 'flags': []}
  try:
    for line in Path('/proc/cpuinfo').read_text().splitlines():
      key, _, value = line.partition(':')
      if key.strip() == 'model name':
        cpu['model'] = value.strip()
      elif key.strip() == 'flags':
        cpu['flags'] = value.split()
        break
  except OSError:
    pass
  wanted = ('avx2', 'fma', 'avx512f', 'avx512_vnni', 'avx512_bf16', 'avx_vnni', 'amx_tile', 'amx_bf16')
  return {'model': cpu['model'], **{f: f in cpu['flags'] for f in wanted}}


def cpu_times(text: str) -> dict[int, tuple[int, int]]:
  """(busy, total) clock ticks per CPU from the text of /proc/stat ('cpuN user nice system idle iowait irq softirq
  steal ...'): idle and iowait are not busy; guest time is already counted in user."""
  times = {}
  for line in text.splitlines():
    name, *fields = line.split()
    if name.startswith('cpu') and name[3:].isdigit():
      ticks = [int(x) for x in fields[:8]]
      times[int(name[3:])] = (sum(ticks) - ticks[3] - ticks[4], sum(ticks))
  return times


def busy_share(before: dict, after: dict, cpus: list[int]) -> float:
  """The share of the interval between two cpu_times readings that `cpus` spent busy, all of them together."""
  busy = sum(after[c][0] - before[c][0] for c in cpus)
  total = sum(after[c][1] - before[c][1] for c in cpus)
  return busy / total if total > 0 else 0.0


def measure_busy(cpus: list[int], seconds: float = 2.0) -> float | None:
  """How busy other work keeps `cpus` now: their busy share over `seconds` while this process sleeps (None
  without /proc/stat). Unlike the load average, which trails by a minute, it does not count a run that just
  ended, such as the previous command of a series of peer runs."""
  try:
    before = cpu_times(Path('/proc/stat').read_text())
    time.sleep(seconds)
    return busy_share(before, cpu_times(Path('/proc/stat').read_text()), cpus)
  except (OSError, KeyError, ValueError):
    return None


def versions() -> dict:
  found = {'python': platform.python_version()}
  for name in ('jax', 'jaxlib', 'flax', 'optax', 'numpy', 'torch'):
    try:
      found[name] = importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
      found[name] = None
  return found


def synthetic_batch(vocab: tuple[int, int], rows: int, widths: tuple[int, int], seed: int = 0) -> dict:
  """Random ids in attnmt's batch layout (attnmt/data/README.md: EOS ends each row, BOS starts `tgt_in`, PAD
  after), each length drawn from (width - 8, width] and row 0 at the full width."""
  rng = np.random.default_rng(seed)
  out = {}
  for side, v, w in (('src', vocab[0], widths[0]), ('tgt', vocab[1], widths[1])):
    length = rng.integers(max(w - 7, 1), w + 1, size=rows)
    length[0] = w
    pos = np.arange(w)[None, :]
    ids = np.where(pos < length[:, None] - 1, rng.integers(4, v, size=(rows, w)), 0)
    out[side] = np.where(pos == length[:, None] - 1, 2, ids).astype(np.int32)
    out[f'{side}_len'] = length.astype(np.int32)
  tgt_out = out.pop('tgt')
  tgt_in = np.concatenate([np.ones((rows, 1), np.int32), tgt_out[:, :-1]], axis=1)
  tgt_in = np.where(np.arange(widths[1])[None, :] < out['tgt_len'][:, None], tgt_in, 0)
  return {**out, 'tgt_in': tgt_in, 'tgt_out': tgt_out}


def make_job(size: str, width: int, what: list[str], steps: int, warmup: int, cores: int) -> tuple[dict, dict]:
  """The job every worker reads (the model, its PyTorch spec, the train section, sizes, timing) and the batch.
  Refuses, in one line, a model the PyTorch peer does not implement."""
  import dataclasses

  from attnmt.model import forms, scores
  from benchmarks.cases import config_model

  name = SIZES[size]
  cfg, sizes = config_model(name)
  score, form = scores.build(cfg), forms.build(cfg)
  supported = (
    score.name == 'additive' and not score.uses_coverage,
    form.name == 'bahdanau',
    (cfg.window, cfg.normalizer, cfg.init_state, cfg.dtype) == ('global', 'softmax', 'bridge', 'float32'),
    cfg.encoder_layers == cfg.decoder_layers == 1 and cfg.bidirectional,
  )
  if not all(supported):
    _fail(f'the PyTorch peer is the additive, bahdanau, one-layer, bridge model; {name} is {cfg}')
  train = importlib.import_module(f'experiments.configs.{name}').get_config().train.to_dict()
  src_w, tgt_w = (width, width) if width else (sizes.src_len, sizes.tgt_len)
  shared = (
    'source_vocab_size',
    'target_vocab_size',
    'embed_size',
    'cell',
    'encoder_hidden_size',
    'decoder_hidden_size',
  )
  torch_spec = {
    **{k: getattr(cfg, k) for k in shared + ('dropout',)},
    'attention_size': score.size,
    'deep_output_size': form.deep_output_size,
  }
  job = {
    'size': size,
    'config': f'experiments/configs/{name}.py',
    'model': dataclasses.asdict(cfg),
    'torch_spec': torch_spec,
    'train': train,
    'sizes': {'batch': sizes.batch, 'src_width': src_w, 'tgt_width': tgt_w, 'max_len': tgt_w},
    'what': what,
    'steps': steps,
    'warmup': warmup,
    'cores': cores,
  }
  return job, synthetic_batch((cfg.source_vocab_size, cfg.target_vocab_size), sizes.batch, (src_w, tgt_w))


def run_worker(framework: str, folder: Path, pair: int, env: dict, cpus: list[int]) -> dict:
  """Starts one worker on `cpus` and returns its record; a failed worker ends the command with its message."""
  result = folder / f'{framework}_{pair}.json'
  command = [sys.executable, '-m', 'benchmarks.peer_worker', framework, str(folder), str(result)]
  done = subprocess.run(
    command, cwd=ROOT, env=env, capture_output=True, text=True, preexec_fn=lambda: os.sched_setaffinity(0, cpus)
  )
  if done.returncode == 2:  # the worker's own one line (peer_worker: torch missing)
    print(
      (done.stderr.strip().splitlines() or [f'error: the {framework} worker exited with status 2'])[-1], file=sys.stderr
    )
    sys.exit(2)
  if done.returncode:
    sys.exit(f'the {framework} worker failed (exit {done.returncode}):\n{done.stderr[-3000:]}')
  return json.loads(result.read_text())


def summary(runs: list[dict], what: list[str], frameworks: list[str]) -> dict:
  """Per program: each framework's per-process medians and their median; each PyTorch row's ratio to attnmt."""
  out = {}
  for w in what:
    medians = {fw: [statistics.median(r['times_s'][w]) for r in runs if r['framework'] == fw] for fw in frameworks}
    entry = {
      fw: {
        'median_s': statistics.median(m),
        'process_medians_s': m,
        'times_s': [r['times_s'][w] for r in runs if r['framework'] == fw],
      }
      for fw, m in medians.items()
    }
    for fw in frameworks:
      if fw != 'attnmt' and 'attnmt' in frameworks:
        ratios = [b / a for a, b in zip(medians['attnmt'], medians[fw])]
        entry[f'{fw}_over_attnmt'] = {'median': statistics.median(ratios), 'per_pair': ratios}
    out[w] = entry
  return out


def agreement(first: dict[str, dict]) -> dict:
  """Parameter counts, and whether each PyTorch side computes attnmt's function from attnmt's parameters."""
  out = {'parameters': {fw: r['parameters'] for fw, r in first.items()}}
  if 'attnmt' not in first:
    return out
  a = first['attnmt']
  for fw, r in first.items():
    if fw == 'attnmt' or not r.get('from_attnmt_parameters'):
      continue
    out['parameters'][f'{fw}_less_duplicate_biases'] = r['parameters'] - r['duplicate_biases']
    check = {'eval_loss': {'attnmt': a['eval_loss'], fw: r['eval_loss']}}
    if 'greedy_tokens' in a:
      check['greedy_tokens_equal'] = float(np.mean(np.array(a['greedy_tokens']) == np.array(r['greedy_tokens'])))
    out[f'{fw}_same_function'] = check
  return out


def table(result: dict) -> str:
  """The medians and ratios as a Markdown table, one row per program."""
  frameworks = result['frameworks']
  peers = [fw for fw in frameworks if fw != 'attnmt'] if 'attnmt' in frameworks else []
  rows = [['program', *(f'{fw} (s)' for fw in frameworks), *(f'{fw} / attnmt' for fw in peers)]]
  for w, entry in result['results'].items():
    ratios = [f'{entry[f"{fw}_over_attnmt"]["median"]:.2f}x' for fw in peers]
    rows.append([w, *(f'{entry[fw]["median_s"]:.4f}' for fw in frameworks), *ratios])
  lines = ['| ' + ' | '.join(r) + ' |' for r in rows]
  lines.insert(1, '|' + ' --- |' * len(rows[0]))
  return '\n'.join(lines)


def run_pairs(f, job: dict, batch: dict, cpus: list[int]) -> tuple[dict, list[dict]]:
  """Every framework's worker, pair after pair; returns the environment they ran in and their records."""
  env = {**os.environ, **ISA_ENV[f.isa], 'JAX_PLATFORMS': 'cpu'}
  env['XLA_FLAGS'] = ' '.join(x for x in (os.environ.get('XLA_FLAGS', ''), XLA_ISA[f.isa]) if x)
  runs = []
  with tempfile.TemporaryDirectory(prefix='attnmt-peer-') as tmp:
    folder = Path(tmp)
    (folder / 'job.json').write_text(json.dumps(job))
    np.savez(folder / 'batch.npz', **batch)
    for pair in range(f.pairs):
      for fw in f.frameworks:
        runs.append({**run_worker(fw, folder, pair, env, cpus), 'pair': pair})
        medians = ', '.join(f'{w} {statistics.median(runs[-1]["times_s"][w]):.4f} s' for w in f.what)
        print(f'pair {pair} {fw}: {medians}', flush=True)
  return env, runs


def main(argv):
  del argv
  f = flags.FLAGS
  bad = [w for w in f.what if w not in WHAT] + [fw for fw in f.frameworks if fw not in FRAMEWORKS]
  if bad or not f.what or not f.frameworks or len(set(f.frameworks)) != len(f.frameworks):
    _fail(f'--what={",".join(f.what)} --frameworks={",".join(f.frameworks)}: choose from {WHAT} and {FRAMEWORKS}')
  if any(fw != 'attnmt' for fw in f.frameworks) and importlib.util.find_spec('torch') is None:
    _fail(MISSING_TORCH)
  cpu = processor()
  if f.isa == 'avx2' and not cpu['avx2']:
    _fail(f'--isa=avx2 on a processor without AVX2 ({cpu["model"]}); use --isa=native')
  allowed = sorted(os.sched_getaffinity(0))
  if f.cores > len(allowed):
    _fail(f'--cores={f.cores}: this process may run on {len(allowed)} CPUs; pass 1 to {len(allowed)} (0: all of them)')
  cpus = allowed[: f.cores or None]
  out = Path(f.out or ROOT / 'benchmarks' / 'results' / f'peer_{socket.gethostname()}_{f.size}.json')
  problem = errors.out_problem(f.out or str(out), f'peer_{f.size}.json')
  if problem:  # before the timing, which a failed write would lose
    _fail(problem)
  load, busy = os.getloadavg(), measure_busy(cpus)
  if (load[0] if busy is None else busy * len(cpus)) > 0.5:
    what = f'load average {load[0]:.1f}' if busy is None else f'the cores {100 * busy:.0f} % busy before the run'
    print(
      f'warning: {what}: other work shares the cores, and PyTorch\'s OpenMP threads can then '
      'slow down far more than XLA\'s (benchmarks/README.md, "PyTorch peer"); time on quiet cores'
    )
  job, batch = make_job(f.size, f.width, f.what, f.steps, f.warmup, len(cpus))
  job['threads'] = f.threads
  if f.threads != 'auto':
    job['train']['step_threads'] = f.threads
  env, runs = run_pairs(f, job, batch, cpus)
  first = {r['framework']: r for r in runs if r['pair'] == 0}
  result = {
    'command': sys.argv,
    'frameworks': f.frameworks,
    'isa': f.isa,
    'env': {k: env.get(k, '') for k in RECORDED_ENV + ('LD_PRELOAD',)},
    'cpus': cpus,
    'processor': cpu,
    'host': socket.gethostname(),
    'versions': versions(),
    'loadavg_start': load,
    'busy_before': busy,
    'loadavg_end': os.getloadavg(),
    'job': job,
    'batch': {'kind': 'synthetic', **{k: v.tolist() for k, v in batch.items() if k.endswith('_len')}},
    **agreement(first),
    'results': summary(runs, f.what, f.frameworks),
    'workers': [{k: v for k, v in r.items() if k not in ('times_s', 'greedy_tokens')} for r in runs],
  }
  print(table(result))
  print('parameters: ' + ', '.join(f'{k} {v:,}' for k, v in result['parameters'].items()))
  for key in (k for k in result if k.endswith('_same_function')):
    print(f'{key}: {result[key]}')
  out.parent.mkdir(parents=True, exist_ok=True)
  out.write_text(json.dumps(result, indent=1))
  print(f'wrote {out}')


if __name__ == '__main__':
  _define_flags()
  app.run(main)
