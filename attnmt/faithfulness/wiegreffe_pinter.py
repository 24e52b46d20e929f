"""Wiegreffe & Pinter 2019, "Attention is not not Explanation": the uniform-weights baseline
(`uniform_baseline`), the variance of attention over seeds (`seed_variance`) and the diagnostic with another
model's attention frozen into a decoder (`frozen_attention`). Their adversarially trained model (Sec. 4) is not
built yet: it needs a training run whose loss rewards distance from a base model's attention.
Conventions: attnmt/faithfulness/measures.py.
"""

from __future__ import annotations


import jax
import jax.numpy as jnp
import numpy as np

from attnmt.errors import InputError
from attnmt.model import interventions
from attnmt.model.config import ModelConfig

from attnmt.faithfulness.measures import (
  most_probable,
  jsd,
  tvd,
  step_mask,
  greedy_path,
)


def uniform_baseline(
  cfg: ModelConfig,
  params,
  src_BxS,
  src_len_B,
  reference_BxT,
  ref_len_B,
  trained_uniform: tuple[ModelConfig, dict] | None = None,
) -> dict:
  """Wiegreffe & Pinter 2019, "Attention is not not Explanation" (Sec. 3.1, Table 2): is attention needed at all?
  Their baseline is a model trained with its attention frozen to uniform weights, compared with the attention
  model on the task's score (F1). Here the score is token accuracy on the reference, teacher-forced: at each step
  t < ref_len, whether the most probable token is the reference's. Reported for the model with its own attention
  ('own'), the same model with uniform weights at every step ('uniform': the state follows them; no retraining)
  and, where `trained_uniform` = (cfg, params) of a model trained with uniform weights is given (score 'none'
  gives equal weights), that model ('trained_uniform', their baseline proper). 'agreement': whether 'uniform'
  chooses the token 'own' chooses. Returns {'mask', 'correct': {name: B x T}, 'agreement': B x T, 'counts':
  {name: correct tokens, 'agreement': ..., 'tokens': ...}}. BLEU of uniform-attention decoding is
  attnmt.training.evaluation.translate with intervention 'uniform'."""
  uniform = interventions.build('uniform')
  ref = jnp.asarray(reference_BxT)
  mask = step_mask(reference_BxT, ref_len_B)
  chosen = {
    'own': most_probable(greedy_path(cfg, params, src_BxS, src_len_B, ref)[0]),
    'uniform': most_probable(greedy_path(cfg, params, src_BxS, src_len_B, ref, intervention=uniform)[0]),
  }
  if trained_uniform is not None:
    cfg_u, params_u = trained_uniform
    chosen['trained_uniform'] = most_probable(greedy_path(cfg_u, params_u, src_BxS, src_len_B, ref)[0])
  correct = {name: (np.asarray(c) == np.asarray(ref)) & mask for name, c in chosen.items()}
  agreement = (np.asarray(chosen['uniform']) == np.asarray(chosen['own'])) & mask
  counts = {name: int(c.sum()) for name, c in correct.items()}
  counts.update(agreement=int(agreement.sum()), tokens=int(mask.sum()))
  return {'mask': mask, 'correct': correct, 'agreement': agreement, 'counts': counts}


def seed_variance(weights_NxBxTxS, mask_BxT, logits_NxBxTxV=None, base: int = 0) -> dict:
  """Wiegreffe & Pinter 2019, "Attention is not not Explanation" (Sec. 3.2, Figure 3): how much attention varies
  between models trained from different seeds, the yardstick for an adversary's JSD. For each decision, the JSD
  of every other seed's attention from the base model's (`base`), its median over those seeds, against the base
  model's largest weight; with `logits_NxBxTxV`, the mean over those seeds of the output distributions' TVD from
  the base model's (their output difference). Here each decision is a step t where `mask_BxT` holds, every seed
  teacher-forced with the same target prefix (the weights of decoding.forced_attention for each seed on one set
  of outputs), and the JSD runs over all source positions (they drop their start and end markers).
  Returns {'jsd_median': B x T, 'max_attention': B x T, 'tvd_mean': B x T (with logits)}, NaN where masked."""
  w = np.asarray(weights_NxBxTxS, np.float64)
  if w.shape[0] < 2:
    raise InputError(f'seed_variance needs the attention of 2 or more seeds; got {w.shape[0]}')
  mask = np.asarray(mask_BxT, bool)
  others = np.delete(w, base, axis=0)
  out = {
    'jsd_median': np.where(mask, np.median(np.asarray(jsd(others, w[base][None])), 0), np.nan),
    'max_attention': np.where(mask, w[base].max(-1), np.nan),
  }
  if logits_NxBxTxV is not None:
    probs = np.asarray(jax.nn.softmax(jnp.asarray(logits_NxBxTxV, jnp.float32), -1), np.float64)
    rest = np.delete(probs, base, axis=0)
    out['tvd_mean'] = np.where(mask, np.asarray(tvd(rest, probs[base][None])).mean(0), np.nan)
  return out


def frozen_attention(
  cfg_a: ModelConfig, params_a, cfg_b: ModelConfig, params_b, src_BxS, src_len_B, tokens_BxT, tgt_len_B
) -> dict:
  """Wiegreffe & Pinter 2019, "Attention is not not Explanation" (Sec. 3.3, "Diagnosing attention distributions by
  guiding simpler models"): do model A's attention weights carry information a decoder can use? Model B's
  decoder reads A's weights at every step (the state follows them) along B's own output `tokens_BxT`; A's weights
  are A's attention teacher-forced along the same tokens. Reported: whether B, so guided, chooses its own token
  ('agrees'), and the same with uniform weights ('agrees_uniform', their uniform row). Differences: their B is a
  non-contextual MLP trained with A's weights frozen in; here B is a trained encoder-decoder (any model over the
  same source vocabulary; its sizes may differ from A's) and nothing is retrained. With A = B, 'agrees' is all
  True. Returns {'mask', 'agrees': B x T, 'agrees_uniform': B x T, 'counts': {'agrees', 'agrees_uniform',
  'tokens'}}."""
  tokens = jnp.asarray(tokens_BxT)
  _, weights_a = greedy_path(cfg_a, params_a, src_BxS, src_len_B, tokens)
  guided = most_probable(greedy_path(cfg_b, params_b, src_BxS, src_len_B, tokens, given_BxTxS=weights_a)[0])
  uniform = interventions.build('uniform')
  flat = most_probable(greedy_path(cfg_b, params_b, src_BxS, src_len_B, tokens, intervention=uniform)[0])
  mask = step_mask(tokens_BxT, tgt_len_B)
  agrees = (np.asarray(guided) == np.asarray(tokens)) & mask
  agrees_uniform = (np.asarray(flat) == np.asarray(tokens)) & mask
  counts = {'agrees': int(agrees.sum()), 'agrees_uniform': int(agrees_uniform.sum()), 'tokens': int(mask.sum())}
  return {'mask': mask, 'agrees': agrees, 'agrees_uniform': agrees_uniform, 'counts': counts}
