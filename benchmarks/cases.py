"""The benchmark's cases: training step, greedy and beam decoding, vmapped seeds, every score function.

Each case returns a flat dict of figures (seconds, tokens or sentences per second, model GFLOP,
GFLOP/s and the fraction of the matmul peak). The peak is probed between the timed calls
(`timing.timed_with_peak`): `fraction_of_peak` is the median over calls of each call's rate against
the peak of its own moment; `fraction_of_start_peak` divides by the peak measured at the start of
the run instead. `Sizes` holds the bench config's sizes (docs/design.md, "Bench config": batch 64,
source and target length 32, no padding); tests pass tiny sizes.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib

import jax
import jax.numpy as jnp
import numpy as np

from attnmt.model import decoding, registry, scores
from attnmt.training import train_step
from attnmt.training import seeds as seed_axis
from attnmt.model.config import ModelConfig
from attnmt.model.seq2seq import BOS, EOS
from benchmarks import flops
from benchmarks.timing import PeakProbe, Timed, compile_timed, median_seconds, paired_fractions, timed_with_peak

# docs/design.md, "Bench config": the model every speed figure refers to, written out in full so that
# no change of a library default moves it.
BENCH_MODEL = ModelConfig(
  source_vocab_size=8000,
  target_vocab_size=8000,
  embed_size=256,
  cell='lstm',
  encoder_hidden_size=256,
  encoder_layers=1,
  bidirectional=True,
  decoder_hidden_size=512,
  decoder_layers=1,
  dropout=0.0,
  score='additive(size=512, coverage=none)',
  window='global',
  query_timing='bahdanau(deep_output_size=512)',
  init_state='bridge',
  dtype='float32',
)


@dataclasses.dataclass(frozen=True)
class Sizes:
  batch: int = 64
  src_len: int = 32
  tgt_len: int = 32
  beam: int = 5
  steps: int = 10  # timed calls per figure (medians)
  warmup: int = 2


def config_model(name: str) -> tuple[ModelConfig, Sizes]:
  """The model of experiments/configs/`name`.py (vocabularies of data.vocab_size) at its batch size: 32 tokens
  per side for the main job (its bucketed training batches average 40: tools/batch_shapes.py); the fixed
  lengths of a config that fixes them."""
  config = importlib.import_module(f'experiments.configs.{name}').get_config()
  d = config.data
  cfg = ModelConfig.from_dict(
    {**config.model.to_dict(), 'source_vocab_size': d.vocab_size, 'target_vocab_size': d.vocab_size}
  )
  return cfg, Sizes(batch=d.batch_size, src_len=d.fixed_source_length or 32, tgt_len=d.fixed_target_length or 32)


def random_batch(cfg: ModelConfig, sizes: Sizes, seed: int = 0) -> dict:
  """A batch of random tokens with every sentence at full length (no padding)."""
  rng = np.random.default_rng(seed)
  b, s, t = sizes.batch, sizes.src_len, sizes.tgt_len
  tgt_out = rng.integers(4, cfg.target_vocab_size, size=(b, t)).astype(np.int32)
  tgt_in = np.concatenate([np.full((b, 1), BOS, np.int32), tgt_out[:, :-1]], axis=1)
  return dict(
    src=jnp.asarray(rng.integers(4, cfg.source_vocab_size, size=(b, s)), jnp.int32),
    src_len=jnp.full((b,), s, jnp.int32),
    tgt_in=jnp.asarray(tgt_in),
    tgt_out=jnp.asarray(tgt_out),
    tgt_len=jnp.full((b,), t, jnp.int32),
  )


def _rates(gflop: float, timed: Timed, start_peak_gflops: float) -> dict:
  achieved = gflop / timed.median_s
  return {
    'gflop': gflop,
    'gflops': achieved,
    **paired_fractions(gflop, timed),
    'fraction_of_start_peak': achieved / start_peak_gflops,
    'peaks_gflops_all': timed.peaks_gflops,
    'timed_window': list(timed.window),  # whether processes timed at once overlapped
  }


def train_program(cfg: ModelConfig, sizes: Sizes):
  """What every training-step figure times: the jitted, state-donating `train_step` (Adam with
  clipping), a fresh state and a random batch of the given sizes. Returns (jitted, state, batch)."""
  opt = train_step.make_optimizer(1e-3)
  jitted = jax.jit(functools.partial(train_step.train_step, cfg, opt), donate_argnums=0)
  return jitted, train_step.init_train_state(cfg, opt, 0), random_batch(cfg, sizes)


def train_case(
  cfg: ModelConfig, sizes: Sizes, probe: PeakProbe, start_peak_gflops: float, breakdown: bool = True
) -> dict:
  """One jitted, state-donating `train_step`: compile time, median step, tokens/s, fraction of peak.

  With `breakdown`, also the forward pass alone and forward + backward without the optimiser, so
  the time of the backward pass can be read off as (grad - forward).
  """
  jitted, state, batch = train_program(cfg, sizes)
  step, compile_s = compile_timed(jitted, state, batch)
  holder = {'state': state}

  def run_once():
    holder['state'], metrics = step(holder['state'], batch)
    return metrics

  timed = timed_with_peak(run_once, sizes.steps, sizes.warmup, probe)
  gflop = flops.train_step_flops(cfg, sizes.batch, sizes.src_len, sizes.tgt_len) / 1e9
  out = {
    'compile_s': compile_s,
    'step_s': timed.median_s,
    'step_s_all': timed.seconds,
    'target_tokens_per_s': sizes.batch * sizes.tgt_len / timed.median_s,
    **_rates(gflop, timed, start_peak_gflops),
  }
  if breakdown:  # against the case's median peak: these parts are not probed call by call
    peak_gflops = out['peak_gflops']
    params = holder['state'].params
    fwd = jax.jit(lambda p, b: train_step.loss_fn(cfg, p, b, jax.random.key(0), True)[0])
    grad = jax.jit(jax.grad(lambda p, b: train_step.loss_fn(cfg, p, b, jax.random.key(0), True)[0]))
    out['forward_s'] = median_seconds(lambda: fwd(params, batch), sizes.steps, sizes.warmup)[0]
    out['forward_backward_s'] = median_seconds(lambda: grad(params, batch), sizes.steps, sizes.warmup)[0]
    fwd_gflop = flops.forward_flops(cfg, sizes.batch, sizes.src_len, sizes.tgt_len) / 1e9
    out['forward_fraction_of_peak'] = fwd_gflop / out['forward_s'] / peak_gflops
    out['backward_fraction_of_peak'] = (
      2 * fwd_gflop / max(out['forward_backward_s'] - out['forward_s'], 1e-9) / peak_gflops
    )
  return out


def never_ending_params(params):
  """Benchmark-only model bias: EOS can never win, so decoding runs all `max_len` steps every time."""
  dec = dict(params['decoder'])
  dec['b_out'] = dec['b_out'].at[EOS].set(-1e9)
  return {**params, 'decoder': dec}


def decode_case(cfg: ModelConfig, sizes: Sizes, probe: PeakProbe, start_peak_gflops: float, beam: int = 1) -> dict:
  """Greedy (beam = 1) or beam search of a batch to exactly `tgt_len` tokens: sentences/s, fraction of peak."""
  params = never_ending_params(train_step.init_train_state(cfg, train_step.make_optimizer(1e-3), 0).params)
  batch = random_batch(cfg, sizes)
  src, src_len = batch['src'], batch['src_len']
  if beam == 1:
    run, compile_s = compile_timed(decoding.greedy, cfg, params, src, src_len, max_len=sizes.tgt_len)
  else:
    run, compile_s = compile_timed(
      decoding.beam_search, cfg, params, src, src_len, beam_size=beam, max_len=sizes.tgt_len
    )
  timed = timed_with_peak(lambda: run(params, src, src_len), sizes.steps, sizes.warmup, probe)
  out_len = np.asarray(run(params, src, src_len).lengths)
  assert np.all(out_len == sizes.tgt_len), 'decoding stopped early; the EOS bias did not hold'
  gflop = flops.decode_flops(cfg, sizes.batch, sizes.src_len, sizes.tgt_len, beam) / 1e9
  return {
    'beam': beam,
    'compile_s': compile_s,
    'call_s': timed.median_s,
    'call_s_all': timed.seconds,
    'sentences_per_s': sizes.batch / timed.median_s,
    **_rates(gflop, timed, start_peak_gflops),
  }


def seeds_case(cfg: ModelConfig, sizes: Sizes, probe: PeakProbe, start_peak_gflops: float, num_seeds: int) -> dict:
  """K seeds trained by one vmapped program, each on its own batch: tokens/s per seed. The program is the
  one training runs (seed_axis.seed_functions: the guarded step, vmapped over seeds, jitted, state donated)."""
  opt = train_step.make_optimizer(1e-3)
  init, jitted = seed_axis.seed_functions(cfg, opt)
  states = init(list(range(num_seeds)))
  batches = jax.tree.map(lambda *xs: jnp.stack(xs), *[random_batch(cfg, sizes, seed=k) for k in range(num_seeds)])
  step, compile_s = compile_timed(jitted, states, batches)
  holder = {'states': states}

  def run_once():
    holder['states'], metrics = step(holder['states'], batches)
    return metrics

  timed = timed_with_peak(run_once, sizes.steps, sizes.warmup, probe)
  gflop = num_seeds * flops.train_step_flops(cfg, sizes.batch, sizes.src_len, sizes.tgt_len) / 1e9
  return {
    'seeds': num_seeds,
    'device_peak_bytes': device_peak_bytes(),
    'compile_s': compile_s,
    'step_s': timed.median_s,
    'step_s_all': timed.seconds,
    'tokens_per_s_per_seed': sizes.batch * sizes.tgt_len / timed.median_s,
    **_rates(gflop, timed, start_peak_gflops),
  }


def decode_seeds_case(
  cfg: ModelConfig, sizes: Sizes, probe: PeakProbe, start_peak_gflops: float, num_seeds: int
) -> dict:
  """Greedy decoding of one batch by K seeds' parameters: one program vmapped over the seeds against the
  K calls one after another that evaluation makes (`training/evaluation.py` decodes seed by seed). Both
  decode every seed to exactly `tgt_len` tokens. `tokens_equal` is the share of tokens the two ways agree on
  (a vmapped product may round differently, and a greedy choice near a tie then differs)."""
  opt = train_step.make_optimizer(1e-3)
  params = [never_ending_params(train_step.init_train_state(cfg, opt, k).params) for k in range(num_seeds)]
  stacked = jax.tree.map(lambda *xs: jnp.stack(xs), *params)
  batch = random_batch(cfg, sizes)
  src, src_len = batch['src'], batch['src_len']
  one, compile_one_s = compile_timed(decoding.greedy, cfg, params[0], src, src_len, max_len=sizes.tgt_len)
  vmapped = jax.jit(jax.vmap(lambda p: decoding.greedy(cfg, p, src, src_len, max_len=sizes.tgt_len).tokens))
  together, compile_vmapped_s = compile_timed(vmapped, stacked)

  def in_turn():
    return [one(p, src, src_len).tokens for p in params]

  sequential = timed_with_peak(in_turn, sizes.steps, sizes.warmup, probe)
  batched = timed_with_peak(lambda: together(stacked), sizes.steps, sizes.warmup, probe)
  equal = np.mean(np.stack([np.asarray(t) for t in in_turn()]) == np.asarray(together(stacked)))
  gflop = num_seeds * flops.decode_flops(cfg, sizes.batch, sizes.src_len, sizes.tgt_len, 1) / 1e9
  return {
    'seeds': num_seeds,
    'compile_s': compile_vmapped_s,
    'compile_one_s': compile_one_s,
    'sequential_s': sequential.median_s,
    'call_s': batched.median_s,
    'call_s_all': batched.seconds,
    'speedup': sequential.median_s / batched.median_s,
    'tokens_equal': float(equal),
    'sentences_per_s': num_seeds * sizes.batch / batched.median_s,
    **_rates(gflop, batched, start_peak_gflops),
  }


def device_peak_bytes() -> int | None:
  """The most memory the first device has held so far in this process (an accelerator's allocator keeps the
  count; None on a CPU, whose devices keep none). With K ascending, each seeds row reads its own K's peak."""
  stats = jax.devices()[0].memory_stats()
  return None if not stats else stats.get('peak_bytes_in_use')


def score_variants(cfg: ModelConfig) -> dict[str, ModelConfig]:
  """Every score but the bench config's own, and the `luong` query timing, at the bench sizes: each score by its
  name, with the options it shares with the bench config's score (the tanh scores' size A); the others at
  their defaults (location: 128 positions)."""
  own_name, (_, own) = registry.parse(scores.REGISTRY.setting, cfg.score)[0], scores.REGISTRY.options(cfg.score)
  variants = {}
  for s in scores.names():
    if s != own_name:
      shared = [row.key for row in scores.REGISTRY.classes[s].settings if row.key in own]
      text = s + (f"({', '.join(f'{k}={own[k]}' for k in shared)})" if shared else '')
      variants[s] = dataclasses.replace(cfg, score=text)
  variants['luong'] = dataclasses.replace(cfg, query_timing='luong')
  return variants
