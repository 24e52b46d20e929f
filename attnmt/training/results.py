"""What a trained run reports: every seed's metrics on a split, the refusal to report a run that never trained,
results.json of the best checkpoint on the test split, the HParams session's settings and metrics, and the
run's name in tables and plots."""

from __future__ import annotations

import json
import os

import jax
import numpy as np

from attnmt import data
from attnmt.model import scores
from attnmt.model.config import COMPONENTS, ModelConfig
from attnmt.training import checkpoints, evaluation, guards, parallel, settings


def evaluate(
  cfg: ModelConfig,
  config,
  params,
  prepared,
  split: str,
  num_seeds: int,
  max_sentences: int = 0,
  beam_size: int = 0,
  mesh: jax.sharding.Mesh | None = None,
) -> dict:
  """Loss, perplexity, attention statistics (evaluation.teacher_forced_metrics), BLEU and chrF of every seed
  on `split`, as lists over seeds (data-parallel on `mesh`)."""
  t, d = config.train, config.data
  _, references = data.raw_texts(prepared, split)
  # built once, for every seed; rows padded so that each width compiles the decoder and the loss once
  batches = list(data.batches(prepared, split, d, max_examples=max_sentences, fixed_rows=True))
  out = {}
  translations = evaluation.translate_seeds(  # every seed in one program on an accelerator
    cfg,
    params,
    num_seeds,
    batches,
    prepared.tgt_tokenizer,
    beam_size,
    t.beam_alpha,
    t.max_decode_factor,
    mesh=mesh,
    beta=t.beam_coverage_penalty,
  )
  for i, trans in enumerate(translations):
    metrics = evaluation.teacher_forced_metrics(cfg, evaluation.seed_params(params, i), batches, mesh=mesh)
    metrics.update(evaluation.bleu_chrf([x.text for x in trans], [references[x.index] for x in trans]))
    for k, v in metrics.items():
      out.setdefault(k, []).append(v)
  out['bleu_signature'] = out['bleu_signature'][0]
  out['attention_skipped_long'] = out['attention_skipped_long'][0]  # the same sentences for every seed
  out['skipped_long'] = data.removed_by_length(prepared, split, d)  # left out by data.eval_max_*_length
  return out


# The final metrics the HParams dashboard shows, means over seeds (a metric a summary lacks is left out).
HPARAMS_METRICS = ('test_bleu', 'test_chrf', 'test_chrfpp', 'test_perplexity', 'tokens_per_s_per_seed')


def hparams(config) -> dict:
  """Every declared setting of the model, data and train sections by its dotted key (settings.SECTIONS), the
  values this run used."""
  return {f'{name}.{row.key}': config[name][row.key] for name, rows in settings.SECTIONS.items() for row in rows}


def hparams_metrics(summary: dict) -> dict:
  return {k: float(np.mean(summary[k])) for k in HPARAMS_METRICS if k in summary}


_all_finite = jax.jit(guards.all_finite)  # one program for the whole tree, not two per parameter


def check_trained(meta: dict, steps: int, num_seeds: int, params) -> None:
  """Refuses to report a run that never trained: every update skipped as non-finite (train.nonfinite=skip),
  or final parameters that are not finite. Raised before results.json, so no table counts it a success."""
  updates = steps * num_seeds
  if updates and meta.get('skipped_updates', 0) >= updates:
    raise guards.NonFiniteError(
      f'every one of the {updates} updates ({num_seeds} seed(s) x {steps} steps) was non-finite and skipped '
      '(train.nonfinite=skip): the model never trained; lower train.learning_rate'
    )
  if not bool(_all_finite(params)):
    raise guards.NonFiniteError('the final parameters are not finite; no results were written')


def final_results(cfg, config, workdir, prepared, seeds, meta, mesh=None) -> dict:
  """Test-split metrics of the best checkpoint per seed, plus size and speed; written to results.json."""
  params, _, best_step = checkpoints.restore_params(workdir, 'best', mesh=mesh)
  ev = evaluate(cfg, config, params, prepared, 'test', len(seeds), 0, 0, mesh)
  n_params = int(sum(x.size for x in jax.tree.leaves(params)) // len(seeds))
  summary = {
    'variant': variant_name(config),
    'pool': config.get('pool') or variant_name(config),  # the variant whose seeds these are (stored.pooled_name)
    'attends': scores.build(cfg).attends,  # False: a baseline without attention (drawn dashed, compared against)
    'seeds': seeds,
    'best_step': best_step,
    'test_bleu': ev['bleu'],
    'test_chrf': ev['chrf'],
    'test_chrfpp': ev['chrfpp'],
    'test_perplexity': ev['perplexity'],
    'bleu_signature': ev['bleu_signature'],
    'parameters': n_params,
    'train_seconds': meta['train_seconds'],
    'tokens_per_s_per_seed': meta['train_tokens'] / max(meta['train_seconds'], 1e-9) / len(seeds),
    'skipped_updates': meta.get('skipped_updates', 0),
    'test_skipped_long': ev['skipped_long'],
    'test_attention_skipped_long': ev['attention_skipped_long'],
  }
  if parallel.is_main_process():  # written whole: the shards of a sweep read it while others train
    path = os.path.join(workdir, 'results.json')
    with open(f'{path}.tmp-{os.getpid()}', 'w') as f:
      json.dump(summary, f, indent=1)
    os.replace(f'{path}.tmp-{os.getpid()}', path)
  return summary


def variant_name(config) -> str:
  """The run's label in tables and plots: a sweep's name for it (`config.variant`: it shows the options that
  differ between the sweep's variants), else score/decoder form/window by name (config.json holds the options)."""
  if config.get('variant'):
    return config.variant
  m = config.model
  return '/'.join(COMPONENTS[kind].label(str(m[kind]), shown=()) for kind in ('score', 'query_timing', 'window'))
