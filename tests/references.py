"""Reference implementations that only the tests use: the plain forms that production code replaced with faster
or batched ones, kept to test those against (one query's attention, the unfused cross-entropy, sacrebleu's
paired bootstrap as the comparison used it before the seed-level test, a Pharaoh line parser)."""

from __future__ import annotations

import contextlib
import os
from typing import Optional, Sequence

import jax
import jax.numpy as jnp
import sacrebleu
from sacrebleu.significance import PairedTest

from attnmt.model.attention import attention_weights
from attnmt.model.config import ModelConfig

Params = dict


def context_vector(weights_S: jax.Array, annotations_SxH: jax.Array) -> jax.Array:
  """c = sum_i a_i h_i (Bahdanau Eq. 5) for one sentence."""
  return jnp.einsum('s,sh->h', weights_S.astype(annotations_SxH.dtype), annotations_SxH)


def attend(
  cfg: ModelConfig,
  p: Params,
  query_Q: jax.Array,
  keys_SxK: jax.Array,
  annotations_SxH: jax.Array,
  length: jax.Array,
  t: jax.Array,
) -> tuple[jax.Array, jax.Array]:
  """Context vector and attention weights for one query: score, window and normaliser, context.

  `length` is the source length (positions >= length are padding); `t` is the 0-based target position
  used as the centre of the `local_m` window. Returns (context_H, weights_S) with weights in float32.
  """
  weights_S = attention_weights(cfg, p, query_Q[None], keys_SxK[None], jnp.asarray(length)[None], t)[0]
  return context_vector(weights_S, annotations_SxH), weights_S


def masked_cross_entropy(
  logits_BxTxV: jax.Array, labels_BxT: jax.Array, length_B: jax.Array, label_smoothing: float = 0.0
) -> tuple[jax.Array, jax.Array]:
  """Summed token cross-entropy over the first `length` positions of each row, and the token count.

  With label smoothing eps the target is (1 - eps) on the label plus eps spread uniformly over the
  vocabulary (Szegedy et al. 2016).
  """
  # -log p(y) = logsumexp(logits) - logits[y]. The label's logit is picked by a comparison with an
  # iota rather than a gather, so its gradient fuses with the softmax's instead of scattering.
  logits_BxTxV = logits_BxTxV.astype(jnp.float32)
  lse_BxT = jax.nn.logsumexp(logits_BxTxV, axis=-1)
  is_label_BxTxV = jnp.arange(logits_BxTxV.shape[-1]) == labels_BxT[..., None]
  nll_BxT = lse_BxT - jnp.sum(jnp.where(is_label_BxTxV, logits_BxTxV, 0.0), axis=-1)
  if label_smoothing:  # mean_v log p(v) = mean_v logits_v - logsumexp(logits)
    mean_logp_BxT = jnp.mean(logits_BxTxV, axis=-1) - lse_BxT
    nll_BxT = (1.0 - label_smoothing) * nll_BxT - label_smoothing * mean_logp_BxT
  mask_BxT = jnp.arange(labels_BxT.shape[1])[None, :] < length_B[:, None]
  return jnp.sum(jnp.where(mask_BxT, nll_BxT, 0.0)), jnp.sum(mask_BxT)


def parse_pharaoh(line: str) -> tuple[set, set]:
  """'0-1 2p3' -> (sure, possible) sets of (source, target) pairs; sure links are also possible."""
  sure, possible = set(), set()
  for item in line.split():
    sep = '-' if '-' in item else 'p'
    s, t = (int(x) for x in item.split(sep))
    (sure if sep == '-' else possible).add((s, t))
  return sure, possible | sure


@contextlib.contextmanager
def _environment(name: str, value: str):
  old = os.environ.get(name)
  os.environ[name] = value
  try:
    yield
  finally:
    if old is None:
      del os.environ[name]
    else:
      os.environ[name] = old


def paired_bootstrap(
  systems: dict[str, Sequence[str]],
  references: Sequence[str],
  baseline: Optional[str] = None,
  n_samples: int = 1000,
  seed: int = 12345,
) -> dict:
  """sacrebleu's paired bootstrap resampling (Koehn 2004) of corpus BLEU for every system.

  Returns {'systems': {name: {'bleu', 'mean', 'ci', 'p_value'}}, 'signature': str}: each system's
  BLEU, the mean of its resampled BLEUs and the half-width of their 95% interval, and the p-value of its
  difference from `baseline` (None for the baseline itself, and for every system when baseline is None).
  All systems are resampled with the same sentence indices. The seed reaches sacrebleu through SACREBLEU_SEED (set
  while it runs); it must be positive, sacrebleu treats 0 as no seed. sacrebleu's p-value is
  1 / (n + 1) when the two BLEUs are exactly equal (every resampled difference 0, none above 0),
  so an observed difference of 0 gets p = 1.
  """
  if seed <= 0:
    raise ValueError(f'paired_bootstrap needs a positive seed, got {seed}')
  names = list(systems)
  if baseline is not None:
    if baseline not in systems:
      raise ValueError(f'baseline {baseline!r} is not among the systems {names}')
    names = [baseline] + [n for n in names if n != baseline]
  if not references:
    raise ValueError('paired_bootstrap needs at least one sentence')
  for name in names:
    if len(systems[name]) != len(references):
      raise ValueError(f'{name} has {len(systems[name])} hypotheses for {len(references)} references')
  with _environment('SACREBLEU_SEED', str(seed)):
    test = PairedTest(
      [(n, list(systems[n])) for n in names],
      {'BLEU': sacrebleu.BLEU()},
      [list(references)],
      test_type='bs',
      n_samples=n_samples,
    )
    signatures, scores = test()
  ((metric, signature),) = signatures.items()
  out = {'systems': {}, 'signature': str(signature)}
  pivot = scores[metric][0].score
  for name, r in zip(scores['System'], scores[metric]):
    p = r.p_value if baseline is not None and name != baseline else None
    if p is not None and r.score == pivot:
      p = 1.0
    out['systems'][name] = {
      'bleu': float(r.score),
      'mean': float(r.mean),
      'ci': float(r.ci),
      'p_value': None if p is None else float(p),
    }
  return out
