"""Does the output follow the attention? attnmt's own measures of a trained model under counterfactual attention
(attnmt/model/interventions.py), erasure and attention-versus-gradient agreement, per seed.

- Teacher-forced, on the reference: the Jensen-Shannon divergence (bits, in [0, 1]) and the total variation
  distance between the next-token distributions with and without the intervention, and the share of
  target positions whose most probable token changes.
- Decoded (greedy): BLEU and chrF of the counterfactual output against the reference and against the model's
  own output, and the share of the own output's function words and content words the counterfactual output
  still produces (Moradi, Kambhatla & Sarkar 2019: clipped counts, words split by
  attnmt/faithfulness/data/function_words_es.txt).
- Erasure (attnmt's own leave-one-out, after the erasure idea of Serrano & Smith 2019; their test is
  attnmt/faithfulness/serrano_smith.py): under teacher forcing on the model's own greedy output, the source token
  with the largest weight at a target position is deleted from the input, and the position's most probable
  token is compared with the one before; the same for a random source token. The source's final EOS is
  never erased; a source of EOS alone is skipped (counted).
- Agreement: at each output position, the rank correlation (Spearman) over the valid source positions
  between the attention weights and the gradient x input attribution |sum_e x_ie d log p(y_t) / d x_ie|
  of the source embeddings, the gradient by `jax.grad` through the same step. Positions with fewer than 3
  source tokens, or with constant weights or attributions, have no correlation (counted as undefined).

Every measure is a sum and a count per batch, so pooling over batches is exact; seeds pool by
`pair_tests.seed_summary` (mean, sd and Student's t interval over seeds; one seed: no interval, said so).

The page of these measures (faithfulness.md, faithfulness.png) is attnmt/faithfulness/page.py's
`counterfactual_markdown` and `counterfactual_plot`; its verdicts attnmt/faithfulness/contrasts.py's.
"""

from __future__ import annotations

import collections
import functools
import re

import jax
import jax.numpy as jnp
import numpy as np

from attnmt import data, progress
from attnmt.analysis import stored
from attnmt.faithfulness import chunks, measures, moradi
from attnmt.errors import InputError
from attnmt.model import scores
from attnmt.model.config import ModelConfig
from attnmt.model.interventions import Intervention
from attnmt.model.seq2seq import Seq2Seq
from attnmt.training import evaluation

_WORD = re.compile(r'\w+', re.UNICODE)


@functools.partial(jax.jit, static_argnames=('cfg', 'intervention'))
def teacher_forced_shift(cfg: ModelConfig, params, batch: dict, intervention: Intervention) -> dict:
  """`divergence` sums of one batch (src, src_len, tgt_in, tgt_len) with and without the intervention."""
  args = ({'params': params}, batch['src'], batch['src_len'], batch['tgt_in'])
  plain = Seq2Seq(cfg).apply(*args)[0]
  counter = Seq2Seq(cfg, intervention).apply(*args)[0]
  mask = jnp.arange(batch['tgt_in'].shape[1])[None, :] < batch['tgt_len'][:, None]
  return measures.divergence(plain, counter, mask)


def preserved_words(original: list[str], counterfactual: list[str], words: frozenset | None = None) -> dict:
  """Of the words of each original output, how many the counterfactual output still has (counts clipped:
  a word twice in the original and once in the counterfactual counts once), split into function and
  content words. Returns the summed counts {'function': (kept, total), 'content': (kept, total)}."""
  words = moradi.function_words() if words is None else words
  kept = {'function': [0, 0], 'content': [0, 0]}
  for a, b in zip(original, counterfactual):
    have = collections.Counter(_WORD.findall(b.lower()))
    for word, n in collections.Counter(_WORD.findall(a.lower())).items():
      kind = 'function' if word in words else 'content'
      kept[kind][0] += min(n, have[word])
      kept[kind][1] += n
  return {k: tuple(v) for k, v in kept.items()}


@functools.partial(jax.jit, static_argnames=('cfg',))
def _forced(cfg, params, src, src_len, tgt_in):
  return Seq2Seq(cfg).apply({'params': params}, src, src_len, tgt_in)


def erasure(cfg: ModelConfig, params, src_BxS, src_len_B, tokens_BxT, lengths_B, seed: int = 0) -> dict:
  """Leave-one-out erasure per target position of the model's own output `tokens_BxT` (lengths_B with EOS):
  counts of positions whose most probable token changes when the most-attended source token is deleted,
  when a random one is, and the positions tested ('skipped': positions of a source of EOS alone)."""
  src, src_len = np.asarray(src_BxS), np.asarray(src_len_B)
  tokens, lengths = np.asarray(tokens_BxT), np.asarray(lengths_B)
  tgt_in = np.asarray(measures.teacher_inputs(tokens))
  logits, weights = (np.asarray(x) for x in _forced(cfg, params, src, src_len, tgt_in))
  before = logits.argmax(-1)
  rng = np.random.default_rng(seed)
  counts = {'changed_max': 0, 'changed_random': 0, 'positions': 0, 'skipped': 0}
  erasable = src_len - 1  # every position but the final EOS
  for t in range(tokens.shape[1]):
    live = (t < lengths) & (erasable >= 1)
    counts['skipped'] += int(np.sum((t < lengths) & (erasable < 1)))
    if not live.any():
      continue
    w = np.where(np.arange(src.shape[1])[None, :] < erasable[:, None], weights[:, t], -np.inf)
    most = np.where(live, w.argmax(-1), 0)
    rand = np.where(live, (rng.random(len(src)) * np.maximum(erasable, 1)).astype(int), 0)
    for key, pos in (('changed_max', most), ('changed_random', rand)):
      erased, erased_len = measures.erase(src, np.where(live, src_len, 2), pos)
      after = np.asarray(_forced(cfg, params, erased, np.maximum(erased_len, 1), tgt_in)[0])[:, t].argmax(-1)
      counts[key] += int(np.sum(live & (after != before[:, t])))
    counts['positions'] += int(live.sum())
  return counts


@functools.partial(jax.jit, static_argnames=('cfg',))
def attributions(cfg: ModelConfig, params, src_BxS, src_len_B, tokens_BxT):
  """Gradient x input of the source embeddings for every output token: |sum_e x_ie d log p(y_t) / d x_ie|
  (B x T x S; measures.gradient_x_input, through the whole step, attention included), and the attention weights
  (B x T x S), under teacher forcing on `tokens_BxT`."""
  tgt_in = measures.teacher_inputs(tokens_BxT)

  def log_probs(offset):
    logits, weights = Seq2Seq(cfg).apply({'params': params}, src_BxS, src_len_B, tgt_in, src_offset_BxSxE=offset)
    logp = jnp.take_along_axis(jax.nn.log_softmax(logits, -1), tokens_BxT[..., None], -1)[..., 0]
    return logp, weights

  return measures.gradient_x_input(log_probs, params['encoder']['embed'][src_BxS], has_aux=True)


def agreement(attribution_BxTxS, weights_BxTxS, src_len_B, lengths_B) -> dict:
  """Spearman's rank correlation per output token between attention and attribution over the valid source
  positions: their sum and count, and the tokens where it is undefined (< 3 positions, or a constant side)."""
  a, w = np.asarray(attribution_BxTxS), np.asarray(weights_BxTxS)
  total, count, undefined = 0.0, 0, 0
  for b, (n, m) in enumerate(zip(np.asarray(src_len_B), np.asarray(lengths_B))):
    for t in range(int(m)):
      x, y = w[b, t, :n], a[b, t, :n]
      if n < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        undefined += 1
        continue
      total += float(measures.scipy_stats().spearmanr(x, y).statistic)
      count += 1
  return {'spearman_sum': total, 'tokens': count, 'undefined': undefined}


def attends(cfg: ModelConfig) -> bool:
  """Whether the variant's score attends at all: a counterfactual of `none`'s equal weights is not one."""
  return scores.build(cfg).attends


def _own_tokens(batch: dict, own: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """The batch's real rows (index >= 0) and the model's own output for them: tokens (with EOS) padded to one
  width, and their lengths."""
  rows = np.flatnonzero(np.asarray(batch['index']) >= 0)
  ids = [own[int(batch['index'][r])].ids for r in rows]
  width = max(1, max(len(x) for x in ids))
  tokens = np.zeros((len(rows), width), np.int32)
  for k, x in enumerate(ids):
    tokens[k, : len(x)] = x
  return rows, tokens, np.array([max(1, len(x)) for x in ids])


def analyze_run(run, interventions: list, split: str = 'test', max_sentences: int = 0, chunk: int = 8, seed: int = 0):
  """Every measure of the module docstring for one run (an inspection.LoadedRun), per seed, on the first
  `max_sentences` sentences of `split` (whole batches; 0: all). Returns {'variant', 'pool', 'seeds', 'sentences',
  'attends', 'interventions': {name: {measure: per-seed list}}, 'erasure': ..., 'agreement': ...}; a variant
  whose score does not attend gets 'attends': False and no measures (its weights are 1 / length whatever
  happens). Erasure and agreement run `chunk` sentences at a time (the gradients are B x T x S x E)."""
  cfg, tokenizer = run.cfg, run.prepared.tgt_tokenizer
  sources, references = data.raw_texts(run.prepared, split)
  batches = chunks.first_batches(list(data.batches(run.prepared, split, run.config.data)), max_sentences)
  indices = sorted(int(i) for b in batches for i in np.asarray(b['index']) if i >= 0)
  refs = [references[i] for i in indices]
  out = {
    'variant': run.name,
    'pool': run.pool,
    'seeds': list(run.seeds),
    'sentences': len(indices),
    'attends': attends(cfg),
  }
  if not out['attends']:
    return out
  measures = {iv.label: collections.defaultdict(list) for iv in interventions}
  erased, agree = collections.defaultdict(list), collections.defaultdict(list)
  bar = progress.bar(len(run.seeds) * (len(interventions) + 2) * len(indices), f'{run.name} faithfulness', 'sentence')
  for seed_i in range(len(run.seeds)):
    params = evaluation.seed_params(run.params, seed_i)
    own = {t.index: t for t in evaluation.translate(cfg, params, batches, tokenizer)}
    own_text = [own[i].text for i in indices]
    for iv in interventions:
      sums = collections.Counter()
      for b in batches:
        sums.update({k: float(v) for k, v in teacher_forced_shift(cfg, params, _device(b), iv).items()})
      counter = {t.index: t.text for t in evaluation.translate(cfg, params, batches, tokenizer, intervention=iv)}
      cf = [counter[i] for i in indices]
      kept = preserved_words(own_text, cf)
      m = measures[iv.label]
      m['jsd'].append(sums['jsd'] / sums['positions'])
      m['tvd'].append(sums['tvd'] / sums['positions'])
      m['argmax_changed'].append(sums['argmax_changed'] / sums['positions'])
      vs_ref, vs_own = evaluation.bleu_chrf(cf, refs), evaluation.bleu_chrf(cf, own_text)
      m['bleu'].append(vs_ref['bleu'])
      m['bleu_own'].append(vs_own['bleu'])
      m['chrf_own'].append(vs_own['chrf'])
      m['function_kept'].append(kept['function'][0] / max(kept['function'][1], 1))
      m['content_kept'].append(kept['content'][0] / max(kept['content'][1], 1))
      bar.update(len(indices))
    m_own = evaluation.bleu_chrf(own_text, refs)
    counts, corr = collections.Counter(), collections.Counter()
    for b in batches:
      rows, tokens, lengths = _own_tokens(b, own)
      for lo in range(0, len(rows), chunk):
        r = rows[lo : lo + chunk]
        src, src_len = np.asarray(b['src'])[r], np.asarray(b['src_len'])[r]
        counts.update(erasure(cfg, params, src, src_len, tokens[lo : lo + chunk], lengths[lo : lo + chunk], seed))
        a, w = attributions(cfg, params, jnp.asarray(src), jnp.asarray(src_len), jnp.asarray(tokens[lo : lo + chunk]))
        corr.update(agreement(a, w, src_len, lengths[lo : lo + chunk]))
      bar.update(2 * len(rows))
    erased['bleu_own_output'].append(m_own['bleu'])
    erased['changed_max'].append(counts['changed_max'] / max(counts['positions'], 1))
    erased['changed_random'].append(counts['changed_random'] / max(counts['positions'], 1))
    erased['skipped'].append(counts['skipped'])
    agree['spearman'].append(corr['spearman_sum'] / max(corr['tokens'], 1))
    agree['undefined'].append(corr['undefined'])
  bar.close()
  out['interventions'] = {k: dict(v) for k, v in measures.items()}
  out['erasure'], out['agreement'] = dict(erased), dict(agree)
  return out


def pool_seeds(results: list[dict]) -> list[dict]:
  """`analyze_run` results of single-seed runs of one variant (a sweep over train.seeds) pooled into one
  result per variant (stored.pooled_name): every per-seed list concatenated in the order the runs come, seeds
  likewise. Runs must agree on the sentences measured and on whether the score attends; a seed found twice is
  an error. A result whose pooled name is its own is kept as it is."""
  pooled: dict[str, dict] = {}
  for r in results:
    name = stored.pooled_name(r)
    if name not in pooled:
      pooled[name] = {**r, 'variant': name, 'seeds': list(r['seeds'])}
      for part in ('interventions', 'erasure', 'agreement'):
        if part in r:
          pooled[name][part] = _copy_lists(r[part])
      continue
    into = pooled[name]
    if (into['sentences'], stored.attends(into)) != (r['sentences'], stored.attends(r)):
      raise InputError(
        f"{r['variant']}: measured on other sentences, or its score attends differently; not one variant"
      )
    stored.add_seeds(name, into['seeds'], r['seeds'])
    for part in ('interventions', 'erasure', 'agreement'):
      if part in r:
        _extend_lists(into[part], r[part])
  return list(pooled.values())


def _copy_lists(tree):
  return {k: _copy_lists(v) if isinstance(v, dict) else list(v) for k, v in tree.items()}


def _extend_lists(into: dict, tree: dict) -> None:
  if set(into) != set(tree):
    raise InputError(f'runs measured different things ({sorted(set(into) ^ set(tree))}); measure them alike to pool')
  for k, v in tree.items():
    if isinstance(v, dict):
      _extend_lists(into[k], v)
    else:
      into[k].extend(v)


def _device(batch: dict) -> dict:
  return {k: jnp.asarray(batch[k]) for k in ('src', 'src_len', 'tgt_in', 'tgt_len')}
