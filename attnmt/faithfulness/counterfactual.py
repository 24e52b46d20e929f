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

Verdicts (`contrasts`): declared measures, each cell against a reference cell, all in ONE family
(attnmt.compare.family): the paired t over same-numbered seeds (K - 1 df) with the test set held fixed (every cell is measured on the
same sentences), simultaneous Bonferroni intervals over measures x cells, alpha 0.05 over the whole family.
The measures' units differ, so no equivalence margin is declared: a contrast is ranked or undecided.
"""

from __future__ import annotations

import collections
import functools
import re

import jax
import jax.numpy as jnp
import numpy as np
import scipy.stats

from attnmt import data, plots, progress
from attnmt.analysis import stored
from attnmt.faithfulness import measures, moradi
from attnmt.compare import verdicts, family, pair_tests
from attnmt.errors import ConfigError, InputError
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
      total += float(scipy.stats.spearmanr(x, y).statistic)
      count += 1
  return {'spearman_sum': total, 'tokens': count, 'undefined': undefined}


def attends(cfg: ModelConfig) -> bool:
  """Whether the variant's score attends at all: a counterfactual of `none`'s equal weights is not one."""
  return scores.build(cfg).attends


def _subset(batches: list[dict], max_sentences: int) -> list[dict]:
  """The first whole batches holding at least `max_sentences` sentences (0: every batch)."""
  if not max_sentences:
    return batches
  kept, rows = [], 0
  for b in batches:
    if rows >= max_sentences:
      break
    kept.append(b)
    rows += int(np.sum(np.asarray(b['index']) >= 0))
  return kept


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
  batches = _subset(list(data.batches(run.prepared, split, run.config.data)), max_sentences)
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


COLUMNS = (
  ('jsd', 'JSD (bits)', 1.0, 3),
  ('tvd', 'TVD', 1.0, 3),
  ('argmax_changed', 'argmax changed %', 100.0, 1),
  ('bleu', 'BLEU', 1.0, 2),
  ('bleu_own', 'BLEU vs own', 1.0, 2),
  ('chrf_own', 'chrF vs own', 1.0, 1),
  ('function_kept', 'function words kept %', 100.0, 1),
  ('content_kept', 'content words kept %', 100.0, 1),
)


def _cell(values: list, scale: float, digits: int) -> str:
  s = pair_tests.seed_summary([v * scale for v in values])
  if s['ci'] is None:
    return f"{s['mean']:.{digits}f}"
  return f"{s['mean']:.{digits}f} [{s['ci'][0]:.{digits}f}, {s['ci'][1]:.{digits}f}]"


def markdown(results: list[dict], verdicts: dict | None = None) -> str:
  """The tables of `analyze_run` results: mean over seeds with Student's t 95 % interval (one seed: the value
  alone, said above the table), and with `verdicts` (from `contrasts`) the table of the page's verdicts."""
  seeds = sorted({len(r['seeds']) for r in results})
  lines = [
    f"Seeds per variant: {', '.join(map(str, seeds))}; cells are the mean over seeds and Student's t 95 % interval"
    + (' (one seed: the value alone, no interval)' if 1 in seeds else '')
    + f"; sentences: {', '.join(sorted({str(r['sentences']) for r in results}))}.",
    '',
    '| variant | intervention | ' + ' | '.join(h for _, h, _, _ in COLUMNS) + ' |',
    '|---|---|' + '---|' * len(COLUMNS),
  ]
  for r in results:
    if not r['attends']:
      lines.append(f"| {r['variant']} | (its score does not attend: no counterfactual) |" + ' |' * len(COLUMNS))
      continue
    for name, m in r['interventions'].items():
      lines.append(f"| {r['variant']} | {name} | " + ' | '.join(_cell(m[k], s, d) for k, _, s, d in COLUMNS) + ' |')
  lines += [
    '',
    '| variant | own BLEU | erasure: most attended, output changed % | random token % | attention-gradient Spearman |',
    '|---|---|---|---|---|',
  ]
  for r in results:
    if r['attends']:
      e, a = r['erasure'], r['agreement']
      lines.append(
        f"| {r['variant']} | {_cell(e['bleu_own_output'], 1, 2)} | {_cell(e['changed_max'], 100, 1)} | "
        f"{_cell(e['changed_random'], 100, 1)} | {_cell(a['spearman'], 1, 3)} |"
      )
  if verdicts is not None:
    lines += ['', verdicts_markdown(verdicts).rstrip('\n')]
  return '\n'.join(lines) + '\n'


# The measures the page ranks, declared before the data: key paths into a result's per-seed lists.
MEASURES = ('interventions/uniform/jsd', 'interventions/zero_max/argmax_changed', 'erasure/changed_max')
_OTHER_MEASURES = {
  'erasure/changed_max': ('erasure: most attended, output changed %', 100.0, 1),
  'erasure/changed_random': ('erasure: random token, output changed %', 100.0, 1),
  'erasure/bleu_own_output': ('own BLEU', 1.0, 2),
  'agreement/spearman': ('attention-gradient Spearman', 1.0, 3),
}


def measure_format(path: str) -> tuple[str, float, int]:
  """A measure's label, the scale its values are shown in (shares as %) and the digits shown."""
  part = path.split('/')
  if len(part) == 3 and part[0] == 'interventions':
    for key, label, scale, digits in COLUMNS:
      if key == part[2]:
        return f'{part[1]}: {label}', scale, digits
  return _OTHER_MEASURES.get(path, (path, 1.0, 3))


def measure_values(result: dict, path: str) -> list:
  """A result's per-seed list at `path` ('interventions/uniform/jsd', 'erasure/changed_max', ...)."""
  node = result
  for key in path.split('/'):
    if not isinstance(node, dict) or key not in node:
      raise InputError(
        f"{result['variant']}: no measure '{path}' (no '{key}'); measures are key paths into the results, "
        "e.g. 'interventions/uniform/jsd', 'interventions/zero_max/argmax_changed', 'erasure/changed_max'"
      )
    node = node[key]
  if not isinstance(node, list) or len(node) != len(result['seeds']):
    raise InputError(f"{result['variant']}: '{path}' is not a list of one value per seed")
  return node


def reference_name(names: list[str], reference: str) -> str:
  """The cell `reference` names: a variant's full name, or the score its name starts with when one cell alone
  has it ('additive' for 'additive/bahdanau/global')."""
  if reference in names:
    return reference
  found = [n for n in names if n.split('/')[0] == reference]
  if len(found) != 1:
    raise ConfigError(
      f"reference '{reference}' is not {'one' if not found else 'exactly one'} of the measured cells "
      f"({', '.join(names)}); give a cell's full name"
    )
  return found[0]


def contrasts(
  results: list[dict], measures=MEASURES, reference: str = 'additive', alpha: float = family.ALPHA, delta=None
) -> dict:
  """The page's verdicts: for each declared measure (a key path, `measure_values`), every cell whose score
  attends against `reference`, all measures x cells in one family with family-wise error <= alpha. Each
  measure is one verdicts.compare_scores call spending alpha / number of measures (Bonferroni: each contrast
  tested at alpha / m, its interval the simultaneous one, adjusted p = min(1, p m)), by the paired t over the
  cells' same-numbered seeds (K - 1 df; unpaired, min(K) - 1 df, where their seeds differ) with the test set held fixed: every cell is measured on the same sentences, so they add no variance to a
  difference between cells. No equivalence margin is declared (the measures' units differ): `delta` None is 0,
  so a contrast is 'greater' (its interval excludes 0, the sign says which way) or 'undecided', never
  'equivalent'. Returns {'reference', 'measures', 'alpha', 'family_size', 'level', 'method', 'rows'}, a row
  per contrast: compare_scores' pair (a the cell, b the reference, difference a - b in the shown scale) with
  'measure' and 'label'."""
  cells = [r for r in results if stored.attends(r)]
  names = [r['variant'] for r in cells]
  if len(names) < 2:
    raise InputError(f'verdicts need a reference and at least one other cell whose score attends; got {names}')
  ref = reference_name(names, reference)
  measures = list(measures)
  if not measures or len(set(measures)) != len(measures):
    raise ConfigError(f'declare each measure of the family once, at least one; got {measures}')
  delta = 0.0 if delta is None else float(delta)
  level = alpha / len(measures)
  rows = []
  for path in measures:
    label, scale, _ = measure_format(path)
    observed = [[v * scale for v in measure_values(r, path)] for r in cells]
    seeds = [r['seeds'] for r in cells]  # same-numbered seeds pair (pair_tests.pair_test)
    compared = verdicts.compare_scores(
      names, observed, ref, contrasts=ref, delta=delta, alpha=alpha, level=level, seeds=seeds
    )
    rows += [{'measure': path, 'label': label, **pair} for pair in compared['pairs']]
  sentences = sorted({r['sentences'] for r in cells})
  return {
    'reference': ref,
    'measures': measures,
    'cells': len(names) - 1,
    'alpha': alpha,
    'delta': delta,
    'family_size': len(rows),
    'level': alpha / len(rows),
    'method': (
      f"the paired t over same-numbered seeds (K - 1 df; unpaired where the seeds differ), two-sided, the test set held fixed (every cell measured on the same "
      f"{'/'.join(map(str, sentences))} sentences); one family of {len(measures)} measure(s) x {len(names) - 1} "
      f'cell(s) against {ref} = {len(rows)} contrasts, simultaneous Bonferroni intervals (each at level '
      f'{alpha:g} / {len(rows)}), family-wise error <= {alpha:g} over all of them'
    ),
    'rows': rows,
  }


def _p(p) -> str:
  if p is None:
    return '—'
  return '< 0.0001' if p < 1e-4 else f'{p:.4f}'


def verdicts_markdown(verdicts: dict) -> str:
  """The verdicts of `contrasts` as a table, after one sentence stating the family."""
  v = verdicts
  lines = [
    f"Verdicts: one family of {len(v['measures'])} measures × {v['cells']} cells against `{v['reference']}` = "
    f"{v['family_size']} contrasts, alpha {v['alpha']:g} over all of them: the paired t over same-numbered seeds (K − 1 df) with the test "
    "set held fixed (the sentences are the same for every cell), two-sided, Bonferroni (adjusted p = min(1, "
    f"{v['family_size']} p)), simultaneous intervals (each of coverage 1 − {v['alpha']:g}/{v['family_size']}), "
    'so a contrast is ranked exactly when its interval excludes 0; no equivalence margin is declared (the '
    "measures' units differ): each contrast is ranked or undecided.",
    '',
    '| measure | cell − reference | difference | simultaneous interval | p | adjusted p | verdict |',
    '|---|---|---|---|---|---|---|',
  ]
  for r in v['rows']:
    _, _, digits = measure_format(r['measure'])
    interval = '—' if r['interval'] is None else f"[{r['interval'][0]:+.{digits}f}, {r['interval'][1]:+.{digits}f}]"
    lines.append(
      f"| {r['label']} | {r['a']} − {r['b']} | {r['difference']:+.{digits}f} | {interval} | {_p(r['p_value'])} | "
      f"{_p(r['p_adjusted'])} | {r['verdict']} |"
    )
  return '\n'.join(lines) + '\n'


def plot(results: list[dict], path: str) -> str:
  """Per variant and intervention: the Jensen-Shannon divergence of the next-token distributions (left) and
  the share of the model's own content words the counterfactual output keeps (right), mean over seeds with
  Student's t 95 % intervals (analyze_run's results)."""
  rows = [r for r in results if stored.attends(r)]
  names = sorted({n for r in rows for n in r['interventions']}, key=lambda n: list(rows[0]['interventions']).index(n))
  fig = plots.mpl().figure.Figure(figsize=(11, 0.5 + 0.45 * max(1, len(rows)) * max(1, len(names))))
  for side, (ax, (key, title, scale)) in enumerate(
    zip(
      fig.subplots(1, 2),
      (('jsd', 'JSD of next-token distributions (bits)', 1.0), ('content_kept', 'content words kept (%)', 100.0)),
    )
  ):
    labels, means, errs = [], [], []
    for r in rows:
      for n in names:
        s = pair_tests.seed_summary([v * scale for v in r['interventions'][n][key]])
        labels.append(f"{r['variant']} · {n}")
        means.append(s['mean'])
        errs.append(0.0 if s['ci'] is None else s['ci'][1] - s['mean'])
    y = np.arange(len(labels))
    ax.barh(y, means, xerr=errs, capsize=3, color='0.6')
    ax.set_yticks(y, labels if side == 0 else [], fontsize=7)
    ax.invert_yaxis()
    ax.set_title(title, fontsize=9)
  seeds = sorted({len(r['seeds']) for r in rows})
  bars = "95% Student's t intervals over seeds" + ('; one seed: no interval' if 1 in seeds else '')
  fig.suptitle(f"Counterfactual attention, mean over {'/'.join(map(str, seeds))} seed(s); {bars}", fontsize=10)
  fig.tight_layout()
  return plots.save(fig, path)
