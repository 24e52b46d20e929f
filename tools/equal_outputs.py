"""Equal outputs before and after a refactor: for a grid of model variants (both decoder forms, input feeding,
every built-in score, the three windows, both cells, two layers, coverage, sparsemax, monotonic, bfloat16,
init_state last), the initial parameters, teacher-forced logits and weights, the loss and its gradients (with
and without dropout), and greedy and beam-search outputs, saved to one .npz and compared bit for bit.

    python tools/equal_outputs.py save /tmp/before.npz        # on the code before the change
    python tools/equal_outputs.py compare /tmp/before.npz     # after it: every array equal, or what differs

About 8 minutes on 2 CPU cores for all 24 variants (468 s; compiling dominates); --first=N takes the first N.
"""

import functools
import os
import sys
import zipfile

import numpy as np
import jax
import jax.numpy as jnp

from attnmt.model import registry
from attnmt.model.config import COMPONENTS, ModelConfig
from attnmt.model.seq2seq import Seq2Seq, init_params
from attnmt.model import decoding
from attnmt.training import train_step
from attnmt import errors

SMALL = dict(
  dropout=0.0,
  source_vocab_size=20,
  target_vocab_size=23,
  embed_size=8,
  encoder_hidden_size=6,
  decoder_hidden_size=12,
)
# The small sizes of the components' options, by the setting that selects the component: each is written into a
# selection whose class declares that option and does not set it (`sized`).
OPTIONS = {
  'score': {'size': 5, 'positions': 10},
  'window': {'size': 2, 'predictor_size': 5},
  'query_timing': {'deep_output_size': 7},
}


def sized(kw: dict) -> dict:
  """ModelConfig fields with each component selection given the small sizes of the options it declares."""
  out = dict(kw)
  for kind, sizes in OPTIONS.items():
    reg, text = COMPONENTS[kind], out.get(kind, getattr(ModelConfig, kind))
    name, written = registry.parse(reg.setting, text)
    declared = {row.key for row in reg.resolve(text).settings}
    options = [*written, *((k, v) for k, v in sizes.items() if k in declared and k not in dict(written))]
    out[kind] = name + (f"({', '.join(f'{k}={v}' for k, v in options)})" if options else '')
  return out


VARIANTS = []
for qt in ('bahdanau', 'luong', 'luong(input_feeding=false)'):
  for score, window in (
    ('additive', 'global'),
    ('general', 'local_p'),
    ('dot', 'local_m'),
    ('location', 'global'),
    ('concat', 'global'),
    ('none', 'global'),
  ):
    VARIANTS.append(dict(query_timing=qt, score=score, window=window))
VARIANTS += [
  dict(query_timing='bahdanau', cell='gru', decoder_layers=2, init_state='zero', dropout=0.3),
  dict(query_timing='luong', cell='gru', decoder_layers=2, dropout=0.3),
  dict(query_timing='luong', normalizer='monotonic', score='general'),
  dict(query_timing='bahdanau', score='additive(coverage=sum)', normalizer='sparsemax'),
  dict(query_timing='luong', dtype='bfloat16', score='concat', window='local_p'),
  dict(query_timing='bahdanau', init_state='last', decoder_hidden_size=12, encoder_hidden_size=6),
]


# Jitted, with the model as static data: a variant compiles once per process (a compare right after a save in
# one process reuses the programs), and each program is one compilation instead of op-by-op dispatch.
@functools.partial(jax.jit, static_argnums=0)
def _forward(cfg, params, src, src_len, tgt_in):
  return Seq2Seq(cfg).apply({'params': params}, src, src_len, tgt_in)


@functools.partial(jax.jit, static_argnums=(0, 3))
def _loss_and_gradient(cfg, params, batch, train):
  return jax.value_and_grad(lambda p: train_step.summed_loss(cfg, p, batch, jax.random.key(5), train, 0.1)[0])(params)


def run(v):
  kw = sized({**SMALL, **v})
  if kw.get('score') == 'dot':
    kw['decoder_hidden_size'] = 12
  cfg = ModelConfig.from_dict(kw)
  params = init_params(cfg, jax.random.key(3))
  rng = np.random.default_rng(0)
  src = jnp.asarray(rng.integers(4, 20, (3, 9)), jnp.int32)
  src_len = jnp.array([9, 5, 7], jnp.int32)
  src = jnp.where(jnp.arange(9)[None] < src_len[:, None], src, 0)
  tgt_in = jnp.asarray(rng.integers(4, 23, (3, 6)), jnp.int32)
  tgt_out = jnp.asarray(rng.integers(4, 23, (3, 6)), jnp.int32)
  batch = dict(src=src, src_len=src_len, tgt_in=tgt_in, tgt_out=tgt_out, tgt_len=jnp.array([6, 4, 5], jnp.int32))
  out = {}
  logits, w = _forward(cfg, params, src, src_len, tgt_in)
  out['logits'], out['weights'] = logits, w
  for train in (False, True):
    loss, g = _loss_and_gradient(cfg, params, batch, train)
    out[f'loss{train}'] = loss
    for path, x in jax.tree_util.tree_flatten_with_path(g)[0]:
      out[f'grad{train}/' + jax.tree_util.keystr(path)] = x
  for path, x in jax.tree_util.tree_flatten_with_path(params)[0]:
    out['param/' + jax.tree_util.keystr(path)] = x
  d = decoding.greedy(cfg, params, src, src_len, 8)
  for k, x in d._asdict().items():
    if x is not None:
      out['greedy/' + k] = x
  d = decoding.beam_search(cfg, params, src, src_len, 3, 8)
  for k, x in d._asdict().items():
    if x is not None:
      out['beam/' + k] = x
  return {
    k: np.asarray(jnp.asarray(x, jnp.float32) if getattr(x, 'dtype', None) == jnp.bfloat16 else x)
    for k, x in out.items()
  }


USAGE = 'python tools/equal_outputs.py save|compare FILE.npz [--first=N]'


def _fail(message: str):
  print(f'error: {message}', file=sys.stderr)
  sys.exit(2)


def parse_arguments(argv) -> tuple[str, str, int]:
  """(mode, path, first) of the command line, each checked before any variant runs: one line on stderr and exit
  status 2 for a wrong mode or count, an unknown option, --first outside 1..len(VARIANTS), a save that np.savez
  would write under another name or cannot write, and a compare whose file does not load as .npz."""
  positional = [a for a in argv[1:] if not a.startswith('-')]
  options = [a for a in argv[1:] if a.startswith('-')]
  if len(positional) != 2 or positional[0] not in ('save', 'compare'):
    _fail(f'expected save or compare and one FILE.npz, got {" ".join(argv[1:]) or "nothing"}; usage: {USAGE}')
  mode, path = positional
  first = len(VARIANTS)
  for option in options:
    name, sep, value = option.partition('=')
    if name != '--first' or not sep:
      _fail(f'unknown option {option}; the one option is --first=N (the first N variants); usage: {USAGE}')
    if not (value.strip().isascii() and value.strip().isdigit() and 1 <= int(value) <= len(VARIANTS)):
      _fail(f'{option}: {value!r} is not a variant count; pass a whole number from 1 to {len(VARIANTS)}')
    first = int(value)
  if mode == 'save':
    check_writable(path)
  else:
    try:
      ref = np.load(path)
    except OSError as e:
      _fail(f'compare {path}: cannot read it ({e.strerror or e}); pass the .npz file a save wrote')
    except (ValueError, EOFError, zipfile.BadZipFile):  # numpy takes what is neither .npy nor .npz for a pickle
      _fail(f'compare {path}: not an .npz file; pass the .npz file a save wrote')
    if not isinstance(ref, np.lib.npyio.NpzFile):
      _fail(f'compare {path}: one array (.npy), not the .npz of a save; pass the .npz file a save wrote')
    ref.close()
  return mode, path, first


def check_writable(path: str) -> None:
  """Refuses, in one line, a save whose FILE np.savez would not write as named (a name without .npz gets one) or
  could not write at all (errors.out_problem): the variants take minutes."""
  if not path.endswith('.npz'):
    _fail(f'save {path}: np.savez would write {path}.npz instead; name a file ending in .npz')
  problem = errors.out_problem(path, 'before.npz', label='save ')
  if problem:
    _fail(problem)


def main(argv):
  mode, path, first = parse_arguments(argv)
  results = {}
  for i, v in enumerate(VARIANTS[:first]):
    for k, x in run(v).items():
      results[f'{i}|{k}'] = x
  if mode == 'save':
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    np.savez(path, **results)
    print(f'saved {len(results)} arrays of {first} variants to {path}')
    return 0
  ref = np.load(path)
  bad = 0
  if set(ref.files) != set(results):
    print('arrays differ in name:', sorted(set(ref.files) ^ set(results))[:20])
    bad += 1
  for k in ref.files:
    if k in results and not np.array_equal(ref[k], results[k]):
      bad += 1
      diff = np.abs(ref[k].astype(float) - results[k].astype(float)).max()
      print('DIFF', k, VARIANTS[int(k.split('|')[0])], diff)
  print(f'compared {len(ref.files)} arrays of {first} variants: {bad} differ')
  return 1 if bad else 0


if __name__ == '__main__':
  sys.exit(main(sys.argv))
