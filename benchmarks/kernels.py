r"""The fused Pallas kernels (attnmt/model/kernels/) against the readable path in one decoder
recurrence, a `lax.scan` over T steps of attention, then the cell: whether the kernels (called by the model with
model.kernels=pallas on a GPU) pay off.

    python -m benchmarks.kernels --size=main --steps=32 --repeats=20 --out=kernels_main.json   # on a GPU
    python -m benchmarks.kernels --dry --out=/tmp/kernels.json   # any backend: tiny, interpreted, 2 steps

Both versions run Bahdanau's step (the previous state s is the query, the context enters the cell's input) in
`deferred_scan.deferred_weight_scan`, as `Decoder.__call__` runs its scan:
- readable: the decoder's code inline: `attention.attention_weights` (the score by name, global window, softmax),
  `attention.context`, the context's part of layer 0's input product c W_ih, `rnn.cell_update` with s W_hh;
- fused: `kernels.attend` (dot) or `additive_attend` (W s outside), c W_ih, `kernels.lstm_step` or
  `gru_step`; W_hh and the values held constant in the scan, their gradients formed after it from taps
  (Σ_t s_{t-1}ᵀ dz_t, Σ_t a_tᵀ dc_t; kernels.py's docstring).
The keys (U h + b; for dot an array of their own, as `general`'s h W) and the embedding's part of the input product
are inputs, made outside the scan as the decoder makes them. Source lengths are S - (b mod 8): masks are exercised.

Per case (cell-score) and version: compile time; the median wall time per scan step over --repeats calls after a
warm-up, forward only and forward + backward (`jax.grad` of a fixed random projection of the outputs: states,
contexts, weights; with the products formed after the scan); readable / fused (above 1: the kernels are faster).
On a GPU, the kernels a call launches (a profiler trace, benchmarks/traces.py), in all and per step in the loops.
The largest absolute difference of every output and gradient at the default matmul precision (on a GPU TF32 on both
sides: XLA's products and the Triton dots) and at 'highest', beside the readable side's largest magnitude. A version
that fails (e.g. Triton refuses a kernel) is recorded with its error and the run goes on; the JSON is rewritten as
it grows, so a run cut short keeps what it measured.
Letters: T steps, B batch, S source positions, D decoder state, V annotation (value) size, A additive size, G gates.
"""

from __future__ import annotations

import collections
import dataclasses
import glob
import json
import sys
import tempfile
from importlib import metadata
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from absl import app, flags

from attnmt.model import attention, deferred_scan, kernels, rnn, scores
from benchmarks import cases, traces
from attnmt import errors
from benchmarks.timing import compile_timed, median_seconds

CASES = ('lstm-additive', 'gru-dot', 'lstm-dot', 'gru-additive')  # cell-score


@dataclasses.dataclass(frozen=True)
class Shapes:
  """One decoder recurrence's sizes."""

  T: int
  B: int
  S: int
  D: int
  V: int
  A: int


def model(size: str, steps: int | None):
  """(model config, Shapes) of 'bench' (cases.BENCH_MODEL), 'main' (the main job's model at its batch) or 'tiny'
  (the tests' config): batch, source length, decoder and annotation sizes, the additive score's size; T steps
  (default: the target length, 32)."""
  if size == 'bench':
    cfg, sizes = cases.BENCH_MODEL, cases.Sizes()
  else:
    cfg, sizes = cases.config_model('main_ablation' if size == 'main' else 'tiny')
  A = scores.REGISTRY.options(cfg.score)[1]['size']
  cfg = dataclasses.replace(cfg, window='global', normalizer='softmax')
  return cfg, Shapes(
    steps or sizes.tgt_len, sizes.batch, sizes.src_len, cfg.decoder_hidden_size, cfg.annotation_size, A
  )


def inputs(s: Shapes, cell: str, score: str, seed: int = 0) -> tuple[dict, jax.Array, dict]:
  """Random inputs (the differentiated pytree), source lengths and the loss's projections of the outputs."""
  rng = np.random.default_rng(seed)
  normal = lambda scale, *shape: jnp.asarray(scale * rng.normal(size=shape), jnp.float32)
  G = rnn.num_gates(cell) * s.D
  args = {
    'attention': {'W': normal(s.D**-0.5, s.D, s.A), 'v': normal(s.A**-0.5, s.A)} if score == 'additive' else {},
    # dot: keys of norm about 1, so that e = k . s stays of order 1 and the softmax is not one-hot
    'keys': normal(1.0 if score == 'additive' else s.D**-0.5, s.B, s.S, s.A if score == 'additive' else s.D),
    'annotations': normal(1.0, s.B, s.S, s.V),
    'emb_proj': normal(0.5, s.T, s.B, G),
    'W_ih': normal(s.V**-0.5, s.V, G),
    'b': normal(0.1, G),
    'W_hh': normal(s.D**-0.5, s.D, G),
  }
  args['carry'] = tuple(normal(0.5, s.B, s.D) for _ in range(2 if cell == 'lstm' else 1))  # (h, c) or (h,)
  if cell == 'gru':
    args['b_hn'] = normal(0.1, s.D)
  length_B = jnp.asarray(np.maximum(1, s.S - np.arange(s.B) % 8), jnp.int32)
  projections = {'states': normal(1.0, s.T, s.B, s.D), 'contexts': normal(1.0, s.T, s.B, s.V)}
  projections['weights'] = normal(1.0, s.T, s.B, s.S)
  return args, length_B, projections


def _invariants(args: dict) -> dict:
  return {k: v for k, v in args.items() if k not in ('emb_proj', 'carry')}


def readable_scan(cfg, args: dict, length_B: jax.Array) -> dict:
  """The decoder's step as the model runs it (module docstring): states, contexts and weights, T x B x ..."""

  def step(inv, carry, emb_proj_BxG):
    a, length = inv
    s_BxD = carry[0]
    weights_BxS = attention.attention_weights(cfg, a['attention'], s_BxD, a['keys'], length, jnp.int32(0))
    ctx_BxV = attention.context(weights_BxS, a['annotations'])
    x_BxG = emb_proj_BxG + a['b'] + ctx_BxV @ a['W_ih']
    new = rnn.cell_update(cfg.cell, a, carry, x_BxG, s_BxD @ a['W_hh'])
    return new, {'states': new[0], 'contexts': ctx_BxV, 'weights': weights_BxS}

  inv = (_invariants(args), length_B)
  return deferred_scan.deferred_weight_scan(step, inv, args['carry'], args['emb_proj'])[1]


def fused_scan(cell: str, score: str, interpret: bool, args: dict, length_B: jax.Array, taps=(None, None)) -> dict:
  """The same step through the kernels; `taps` (T x B x G, T x B x V zeros) receive the cotangents of s W_hh and
  of the context, from which `fused_gradients` forms the gradients of W_hh and the values."""
  mask_BxS = jnp.arange(args['keys'].shape[1])[None, :] < length_B[:, None]

  def step(inv, carry, xs):
    a, mask = inv
    emb_proj_BxG, tap_BxG, tap_BxV = xs
    s_BxD = carry[0]
    values = jax.lax.stop_gradient(a['annotations'])
    if score == 'additive':
      q_BxA, v_A = s_BxD @ a['attention']['W'], a['attention']['v']
      ctx_BxV, weights_BxS = kernels.additive_attend(q_BxA, a['keys'], v_A, values, mask, interpret=interpret)
    else:
      ctx_BxV, weights_BxS = kernels.attend(s_BxD, a['keys'], values, mask, interpret=interpret)
    if tap_BxV is not None:
      ctx_BxV = deferred_scan.tap(ctx_BxV, tap_BxV)
    x_BxG = emb_proj_BxG + a['b'] + ctx_BxV @ a['W_ih']
    W_hh, keep_B = jax.lax.stop_gradient(a['W_hh']), jnp.ones(s_BxD.shape[:1], bool)
    if cell == 'lstm':
      new = kernels.lstm_step(x_BxG, *carry, W_hh, keep_B, tap=tap_BxG, interpret=interpret)
    else:
      new = (kernels.gru_step(x_BxG, s_BxD, W_hh, a['b_hn'], keep_B, tap=tap_BxG, interpret=interpret),)
    return new, {'states': new[0], 'contexts': ctx_BxV, 'weights': weights_BxS}

  xs = (args['emb_proj'], *taps)
  return deferred_scan.deferred_weight_scan(step, (_invariants(args), mask_BxS), args['carry'], xs)[1]


def objective(outs: dict, projections: dict) -> jax.Array:
  return sum(jnp.sum(outs[k] * projections[k]) for k in sorted(outs))


def readable_gradients(cfg, args, length_B, projections) -> tuple[dict, dict]:
  """(outputs, gradients of every input) of the readable scan."""

  def loss(args):
    outs = readable_scan(cfg, args, length_B)
    return objective(outs, projections), outs

  grads, outs = jax.grad(loss, has_aux=True)(args)
  return outs, grads


def fused_gradients(cell, score, interpret, args, length_B, projections) -> tuple[dict, dict]:
  """(outputs, gradients of every input) of the fused scan, W_hh's and the values' formed after it."""
  T, B = args['emb_proj'].shape[:2]
  taps = (jnp.zeros_like(args['emb_proj']), jnp.zeros((T, B, args['annotations'].shape[-1]), jnp.float32))

  def loss(args, taps):
    outs = fused_scan(cell, score, interpret, args, length_B, taps)
    return objective(outs, projections), outs

  (grads, (dz_TxBxG, dctx_TxBxV)), outs = jax.grad(loss, argnums=(0, 1), has_aux=True)(args, taps)
  prev_TxBxD = jnp.concatenate([args['carry'][0][None], outs['states'][:-1]])
  grads['W_hh'] = grads['W_hh'] + jnp.einsum('tbd,tbg->dg', prev_TxBxD, dz_TxBxG)
  grads['annotations'] = grads['annotations'] + jnp.einsum('tbs,tbv->bsv', outs['weights'], dctx_TxBxV)
  return outs, grads


def launches(compiled, call_args: tuple, steps: int, wall_s: float) -> dict | None:
  """The kernels one call launches, from a profiler trace; None without a device timeline (a CPU)."""
  with tempfile.TemporaryDirectory() as tmp:
    with jax.profiler.trace(tmp):
      jax.block_until_ready(compiled(*call_args))
    (trace,) = glob.glob(f'{tmp}/**/*.xplane.pb', recursive=True)
    data = jax.profiler.ProfileData.from_file(trace)
    summary = traces.device_kernels(data, 1, wall_s)
    counts = collections.Counter(ev.name for ev in traces.device_events(data))
  if summary is None:
    return None
  return {
    'per_call': summary['kernels_per_step'],
    'in_loops_per_step': in_loops_per_step(counts, steps),
    'busy_s': summary['busy_s'],
    'idle_fraction': summary['idle_fraction'],
    'top_kernels_s': summary['top_kernels_s'],
  }


def in_loops_per_step(counts: collections.Counter, steps: int) -> float:
  """Kernels per scan step: those a call launches at least `steps` times run in a loop (each XLA kernel has a
  name of its own; the forward and the backward loop of a gradient both count), the rest once around it."""
  return sum(c for c in counts.values() if c >= steps) / steps


def differences(ours, reference) -> dict:
  """Per leaf: the largest |ours - reference| and the reference's largest magnitude."""
  out = {}
  for (path, x), y in zip(jax.tree_util.tree_flatten_with_path(ours)[0], jax.tree.leaves(reference), strict=True):
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    out[jax.tree_util.keystr(path, simple=True, separator='/')] = {
      'max_abs_diff': float(np.max(np.abs(x - y), initial=0.0)),
      'max_abs': float(np.max(np.abs(y), initial=0.0)),
    }
  return out


def measure(fn, call_args: tuple, shapes: Shapes, repeats: int, warmup: int, profile: bool) -> tuple[dict, object]:
  """Compile time, the median seconds per scan step and, with `profile`, the kernels; and the call's result."""
  compiled, compile_s = compile_timed(jax.jit(fn), *call_args)
  median_s, all_s = median_seconds(lambda: compiled(*call_args), repeats, warmup)
  out = {'compile_s': compile_s, 'step_s': median_s / shapes.T, 'call_s_all': all_s}
  if profile:
    try:
      out['kernels'] = launches(compiled, call_args, shapes.T, median_s)
    except Exception as e:  # the timings stand without the trace
      out['kernels'] = {'error': repr(e)[:500]}
  return out, compiled(*call_args)


def run_case(name: str, cfg, shapes: Shapes, interpret: bool, repeats: int, profile: bool, result: dict, save, log):
  """Both versions of one case, forward and forward + backward, and their differences, into `result`; `save()`
  after each version."""
  cell, score = name.split('-')
  cfg = dataclasses.replace(cfg, cell=cell, score=f'additive(size={shapes.A})' if score == 'additive' else 'dot')
  args, length_B, projections = inputs(shapes, cell, score)
  versions = {
    'readable': (lambda a, l: readable_scan(cfg, a, l), lambda a, l, p: readable_gradients(cfg, a, l, p)),
    'fused': (
      lambda a, l: fused_scan(cell, score, interpret, a, l),
      lambda a, l, p: fused_gradients(cell, score, interpret, a, l, p),
    ),
  }
  values = {'default': {}, 'highest': {}}
  for version, (forward, gradients) in versions.items():
    try:
      fwd, outs = measure(forward, (args, length_B), shapes, repeats, 1 if interpret else 2, profile)
      result[version] = {'forward': fwd}
      both, (_, grads) = measure(
        gradients, (args, length_B, projections), shapes, repeats, 1 if interpret else 2, profile
      )
      result[version]['forward_backward'], values['default'][version] = both, (outs, grads)
      log(f'{name} {version}: {1e6 * fwd["step_s"]:.1f} us forward, {1e6 * both["step_s"]:.1f} us both, per step')
    except Exception as e:  # e.g. Triton refuses a kernel on this device: recorded, the run goes on
      result.setdefault(version, {})['error'] = f'{type(e).__name__}: {e}'[-2000:]
      log(f'{name} {version}: failed: {result[version]["error"]}')
    save()
  if all('forward_backward' in result[v] for v in versions):
    result['readable_over_fused'] = {
      k: result['readable'][k]['step_s'] / result['fused'][k]['step_s'] for k in ('forward', 'forward_backward')
    }
  for version, (_, gradients) in versions.items():
    try:
      with jax.default_matmul_precision('highest'):  # compiled again: the precision is part of the trace
        values['highest'][version] = jax.jit(gradients)(args, length_B, projections)
    except Exception as e:
      result.setdefault(version, {})['highest_error'] = f'{type(e).__name__}: {e}'[-2000:]
  result['differences'] = {}
  for precision, both in values.items():
    if len(both) == 2:
      (outs, grads), (ref_outs, ref_grads) = both['fused'], both['readable']
      diffs = {'outputs': differences(outs, ref_outs), 'gradients': differences(grads, ref_grads)}
      every = [d['max_abs_diff'] for part in diffs.values() for d in part.values()]
      result['differences'][precision] = {'max_abs_diff': max(every), **diffs}
      log(f'{name}: largest difference {max(every):.3g} at {precision} precision')
  save()


def run(size: str, steps: int | None, repeats: int, names: list[str], dry: bool, profile: bool, out: Path, log=print):
  """Every case at one size; the JSON written to `out` as it grows."""
  if dry:
    size, steps, repeats = 'tiny', 2, min(repeats, 2)
  cfg, shapes = model(size, steps)
  result = {
    'jax': jax.__version__,
    'jaxlib': metadata.version('jaxlib'),
    'backend': jax.default_backend(),
    'device_kind': jax.devices()[0].device_kind,
    'interpret': dry,
    'size': size,
    'shapes': dataclasses.asdict(shapes),
    'repeats': repeats,
    'readable_path': "the decoder's step inline, in deferred_scan.deferred_weight_scan (benchmarks/kernels.py)",
    'cases': {},
  }
  if dry:
    result['note'] = "Pallas's interpreter on the tiny size: a smoke test, its times mean nothing"
  out.parent.mkdir(parents=True, exist_ok=True)
  save = lambda: out.write_text(json.dumps(result, indent=1))
  for name in names:
    result['cases'][name] = {}
    run_case(name, cfg, shapes, dry, repeats, profile, result['cases'][name], save, log)
  return result


def define_flags():
  """The command's flags, defined only when it runs as a command: imported beside benchmarks.bench (the suite
  collects both into one process), absl would refuse a second --steps."""
  flags.DEFINE_enum('size', 'main', ['main', 'bench', 'tiny'], "the model's sizes (`model`)")
  flags.DEFINE_integer('steps', None, "T, the scan's steps (default: the sizes' target length, 32)")
  flags.DEFINE_integer('repeats', 20, 'timed calls per figure (medians)')
  flags.DEFINE_string('out', None, 'the JSON file to write', required=True)
  flags.DEFINE_bool('dry', False, "tiny, 2 steps, in Pallas's interpreter (also whenever there is no GPU)")
  flags.DEFINE_list('cases', ['lstm-additive', 'gru-dot'], f'cell-score cases, from {", ".join(CASES)}')
  flags.DEFINE_bool('profile', True, 'count the kernels of each call in a profiler trace (a GPU)')


def _fail(message: str):
  print(f'error: {message}', file=sys.stderr)
  sys.exit(2)


def check_flags(f) -> None:
  """Every flag, before the backend starts or anything is compiled or timed: one line on stderr and exit status 2
  for cases it does not know, counts below 1 and an --out that cannot be written."""
  unknown = [c for c in f.cases if c not in CASES]
  if unknown or not f.cases:
    what = f'unknown case{"s" * (len(unknown) > 1)} {", ".join(unknown)}' if unknown else 'names no case'
    _fail(f'--cases={",".join(f.cases)}: {what}; the cases are {", ".join(CASES)}')
  if f.repeats < 1:
    _fail(f'--repeats={f.repeats}: no timed call to take a median of; pass a whole number from 1 up, e.g. --repeats=20')
  if f.steps is not None and f.steps < 1:
    _fail(f'--steps={f.steps}: a scan of no step; pass a whole number from 1 up, or leave it out for the sizes\' own')
  problem = errors.out_problem(f.out, 'kernels.json')
  if problem:
    _fail(problem)


def main(argv):
  del argv
  f = flags.FLAGS
  check_flags(f)
  dry = f.dry or jax.default_backend() != 'gpu'
  if dry and not f.dry:
    print(f'no GPU ({jax.default_backend()}): the dry run, tiny and interpreted; its times mean nothing')
  out = Path(f.out)
  run(f.size, f.steps, f.repeats, f.cases, dry, f.profile, out)
  print(f'wrote {out}')


if __name__ == '__main__':
  define_flags()
  app.run(main)
