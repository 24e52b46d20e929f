"""Is attention an explanation? The four papers' tests of attnmt/analysis/explanation.py run on trained runs,
per seed, and written as one report: explanations.json (per-seed lists), explanations.md (a table per test) and
explanations.png.

Every test runs on the first `max_sentences` sentences of a split (whole batches), along each seed's own greedy
output (EOS included), one decision per decoder step:

- moradi: the share of steps whose most probable token survives a counterfactual attention at that step only
  (uniform, permute, zero_max and 'any' of them), overall and, where the target vocabulary has words of the
  function-word list, for function and content words apart.
- serrano_smith: per ranking (attention, random, gradient), the mean fraction of the source positions removed
  when the decision first flips (over the steps that flip) and the share of steps that never flip.
- jain_wallace: the mean Kendall tau between attention and gradient importance and between attention and
  leave-one-out importance, the share of steps where each is significant (p < 0.05), and the adversarial
  attention search on a sub-sample (`adversarial_sentences`, `adversarial_steps`): the mean JSD attained within
  epsilon (0 where no candidate holds the bound) and the share of steps where a candidate holds it.
- wiegreffe_pinter: token accuracy teacher-forced on the reference with the model's own attention and with uniform
  weights at every step, and (two or more seeds) the seed variance of attention: at each step of the base seed's
  output, the median over the other seeds of their attention's JSD from the base seed's, averaged over steps.
  `frozen` runs the frozen-attention diagnostic between two runs of one vocabulary.

A variant whose score does not attend gets one line per test ('not applicable') and no computation.

Verdicts (`contrasts`): the declared measures of the tests run (`MEASURES`), every attending cell against a
reference cell, one family (faithfulness.contrasts: the paired t over seeds, Bonferroni over measures x cells).
"""

from __future__ import annotations

import collections
import json
import os
import time

import jax.numpy as jnp
import numpy as np

from attnmt import data, plots, progress
from attnmt.analysis import explanation, faithfulness, report, stored
from attnmt.errors import ConfigError, InputError
from attnmt.model import interventions, scores
from attnmt.model.seq2seq import PAD
from attnmt.training import evaluation

TESTS = ('moradi', 'serrano_smith', 'jain_wallace', 'wiegreffe_pinter')
MORADI_INTERVENTIONS = 'uniform,permute,zero_max'
ORDERS = ('attention', 'random', 'gradient')
EPSILON = 0.01  # Jain & Wallace's margin (TVD of the output distributions)
ADVERSARIAL_SENTENCES = 8
ADVERSARIAL_STEPS = 500  # theirs; at 100 the search started from uniform logits rarely reached the bound on the
# Bible models (held at 1-8 % of steps against 50-68 % at 500: docs/results/faithfulness.md)
ADVERSARIAL_CANDIDATES = 5
MAX_SENTENCES = 100
ONE_SEED = 'one seed: not measured'

# The measures the verdicts rank, per test, declared before the data: key paths into a result.
MEASURES = {
  'moradi': ('tests/moradi/shares/uniform/tokens',),
  'serrano_smith': ('tests/serrano_smith/orders/attention/fraction',),
  'jain_wallace': ('tests/jain_wallace/adversarial/jsd',),
  'wiegreffe_pinter': ('tests/wiegreffe_pinter/accuracy_uniform',),
}

CITATIONS = {
  'moradi': (
    'Moradi, Kambhatla & Sarkar 2019, "Interrogating the Explanatory Power of Attention in Neural Machine Translation"'
  ),
  'serrano_smith': 'Serrano & Smith 2019, "Is Attention Interpretable?"',
  'jain_wallace': 'Jain & Wallace 2019, "Attention is not Explanation"',
  'wiegreffe_pinter': 'Wiegreffe & Pinter 2019, "Attention is not not Explanation"',
}


def parse_tests(names) -> tuple:
  """The tests named ('moradi,jain_wallace', a list of names, or 'all'), in TESTS' order; an unknown name gets one
  line listing the valid ones."""
  parts = [p.strip() for p in (names.split(',') if isinstance(names, str) else names) if p.strip()]
  if 'all' in parts:
    return TESTS
  unknown = [p for p in parts if p not in TESTS]
  if unknown or not parts:
    raise ConfigError(
      f"explanation test(s) {', '.join(unknown) or '(none named)'}: valid are {', '.join(TESTS)}, or all"
    )
  return tuple(t for t in TESTS if t in parts)


def attends(run) -> bool:
  """Whether the score of a run (an inspection.LoadedRun) attends at all."""
  return bool(scores.build(run.cfg).attends)


def function_token_ids(tokenizer, words: frozenset) -> frozenset:
  """The target token ids that are words of `words`: a word tokenizer's words, a sentencepiece tokenizer's
  word-initial pieces ('▁de'; such a piece may also begin a longer word)."""
  ids = set()
  for i in range(tokenizer.vocab_size):
    piece = tokenizer.id_to_piece(i)
    if getattr(tokenizer, 'kind', 'word') != 'word':
      if not piece.startswith('▁'):
        continue
      piece = piece[1:]
    if piece.lower() in words:
      ids.add(i)
  return frozenset(ids)


# Sentences in chunks -------------------------------------------------------------------------------------------


def _width(n: int) -> int:
  """Token widths rounded up to a multiple of 8: fewer shapes, fewer compilations."""
  return max(8, -(-int(n) // 8) * 8)


def _records(batches: list[dict], own: dict | None) -> list[dict]:
  """One record per real sentence, in batch order: its source row (the batch's width), the model's own output
  (with EOS, where `own` is given) and the reference (with EOS)."""
  out = []
  for b in batches:
    for r in np.flatnonzero(np.asarray(b['index']) >= 0):
      ref_len = int(b['tgt_len'][r])
      rec = {
        'src': np.asarray(b['src'])[r],
        'src_len': int(b['src_len'][r]),
        'ref': np.asarray(b['tgt_out'])[r, :ref_len],
      }
      if own is not None:
        rec['tokens'] = np.asarray(own[int(b['index'][r])].ids, np.int32)
      out.append(rec)
  return out


def _chunks(records: list[dict], size: int) -> list[dict]:
  """Records in chunks of `size` rows (consecutive records of one source width; short chunks padded with copies
  of their first row of target length 0, which every test masks), token widths rounded up (`_width`)."""
  groups, current = [], []
  for rec in records:
    if current and (len(current) == size or len(rec['src']) != len(current[0]['src'])):
      groups.append(current)
      current = []
    current.append(rec)
  if current:
    groups.append(current)
  chunks = []
  for group in groups:
    rows = group + [group[0]] * (size - len(group))
    real = np.arange(size) < len(group)
    chunk = {
      'real': len(group),
      'src': np.stack([r['src'] for r in rows]).astype(np.int32),
      'src_len': np.array([r['src_len'] for r in rows], np.int32),
    }
    for key, length in (('ref', 'ref_len'), ('tokens', 'lengths')):
      if key not in group[0]:
        continue
      width = _width(max(len(r[key]) for r in group))
      arr = np.full((size, width), PAD, np.int32)
      for k, r in enumerate(rows):
        arr[k, : len(r[key])] = r[key]
      chunk[key] = arr
      chunk[length] = np.where(real, [max(1, len(r[key])) for r in rows], 0).astype(np.int32)
    chunks.append(chunk)
  return chunks


# One run --------------------------------------------------------------------------------------------------------


def _nan_none(x):
  """JSON has no NaN: None in its place, recursively."""
  if isinstance(x, dict):
    return {k: _nan_none(v) for k, v in x.items()}
  if isinstance(x, (list, tuple)):
    return [_nan_none(v) for v in x]
  if isinstance(x, float) and not np.isfinite(x):
    return None
  return x


def _ratio(a, b) -> float:
  return float(a) / b if b else float('nan')


def analyze_run(
  run,
  tests=TESTS,
  split: str = 'test',
  max_sentences: int = MAX_SENTENCES,
  chunk: int = 8,
  seed: int = 0,
  adversarial_sentences: int = ADVERSARIAL_SENTENCES,
  adversarial_steps: int = ADVERSARIAL_STEPS,
  adversarial_candidates: int = ADVERSARIAL_CANDIDATES,
  epsilon: float = EPSILON,
  moradi_interventions: str = MORADI_INTERVENTIONS,
  orders=ORDERS,
  function_words: frozenset | None = None,
) -> dict:
  """The selected tests (`parse_tests`) of the module docstring for one run (an inspection.LoadedRun), per seed, on
  the first `max_sentences` sentences of `split` (whole batches; 0: all), `chunk` sentences at a time (the
  gradients are B x T x S x E). `function_words`: the words of the Moradi split (None: faithfulness's shipped
  list). Returns {'variant', 'pool', 'seeds', 'sentences', 'attends', 'split', 'settings', 'tests': {test: {...
  per-seed lists ...} or {'not_applicable': why}}, 'seconds': {test: seconds}} (NaN as None)."""
  tests = parse_tests(tests)
  if chunk < 1 or max_sentences < 0 or adversarial_sentences < 0 or adversarial_steps < 1:
    raise ConfigError('chunk and adversarial_steps must be >= 1, max_sentences and adversarial_sentences >= 0')
  cfg, tokenizer = run.cfg, run.prepared.tgt_tokenizer
  batches = faithfulness._subset(list(data.batches(run.prepared, split, run.config.data)), max_sentences)
  records = _records(batches, None)
  score = scores.build(cfg)
  out = {
    'variant': run.name,
    'pool': run.pool,
    'seeds': list(run.seeds),
    'sentences': len(records),
    'attends': bool(score.attends),
    'split': split,
    'settings': {},
    'tests': {},
    'seconds': {},
  }
  if not score.attends:
    out['tests'] = {t: {'not_applicable': f'score {score.name} has no attention'} for t in tests}
    if 'wiegreffe_pinter' in tests:  # a model trained with uniform weights: Wiegreffe & Pinter's own baseline
      into, chunks = collections.defaultdict(list), _chunks(records, chunk)
      bar = progress.bar(len(run.seeds) * len(records), f'{run.name} explanations', 'sentence')
      for seed_i in range(len(run.seeds)):
        _wiegreffe_pinter(
          into, cfg, evaluation.seed_params(run.params, seed_i), chunks, records, chunk, seed, [], (), (), bar
        )
      out['tests']['wiegreffe_pinter']['trained_uniform_accuracy'] = into['accuracy_own']
    return out
  chosen = interventions.parse(moradi_interventions, seed) if 'moradi' in tests else []
  words = faithfulness.function_words() if function_words is None else frozenset(function_words)
  function_ids = function_token_ids(tokenizer, words)
  adversarial_sentences = min(adversarial_sentences, len(records))
  out['settings'] = {
    'split': split,
    'max_sentences': max_sentences,
    'chunk': chunk,
    'seed': seed,
    'tokens': 'each seed\'s own greedy output (EOS included); wiegreffe_pinter\'s accuracy: the reference',
  }
  if 'moradi' in tests:
    out['settings']['moradi'] = {
      'interventions': [iv.label for iv in chosen],
      'function_words': (
        f'{len(words)} words, {len(function_ids)} target tokens among them'
        if function_ids
        else 'no target token is a word of the function-word list: overall shares only'
      ),
    }
  if 'serrano_smith' in tests:
    out['settings']['serrano_smith'] = {'orders': list(orders)}
  if 'jain_wallace' in tests:
    out['settings']['jain_wallace'] = {
      'kendall': 'tau-b over the source positions but the final EOS; significant: p < 0.05',
      'adversarial_sentences': adversarial_sentences,
      'adversarial_steps': adversarial_steps,
      'adversarial_candidates': adversarial_candidates,
      'epsilon': epsilon,
      'learning_rate': 0.01,
      'penalty': 500.0,
    }
  if 'wiegreffe_pinter' in tests:
    out['settings']['wiegreffe_pinter'] = {
      'accuracy': 'teacher-forced on the reference',
      'seed_variance': 'base seed: the first; every seed teacher-forced on the base seed\'s own output',
    }
  lists = {t: collections.defaultdict(list) for t in tests}
  seconds = collections.Counter()
  greedy = ('moradi', 'serrano_smith', 'jain_wallace')
  bar = progress.bar(len(run.seeds) * len(tests) * len(records), f'{run.name} explanations', 'sentence')
  base_records = None
  for seed_i in range(len(run.seeds)):
    params = evaluation.seed_params(run.params, seed_i)
    if any(t in tests for t in greedy) or (seed_i == 0 and 'wiegreffe_pinter' in tests and len(run.seeds) > 1):
      start = time.time()
      own = {t.index: t for t in evaluation.translate(cfg, params, batches, tokenizer)}
      seconds['greedy'] += time.time() - start
      recs = _records(batches, own)
      if seed_i == 0:
        base_records = recs
    else:
      recs = records
    chunks = _chunks(recs, chunk)
    for test in tests:
      start = time.time()
      _TESTS[test](
        lists[test],
        cfg,
        params,
        chunks,
        recs,
        chunk,
        seed,
        chosen,
        function_ids,
        orders,
        bar,
        adversarial_sentences,
        adversarial_steps,
        adversarial_candidates,
        epsilon,
      )
      seconds[test] += time.time() - start
  if 'wiegreffe_pinter' in tests:
    start = time.time()
    lists['wiegreffe_pinter']['seed_variance'] = _seed_variance(run, cfg, base_records, chunk)
    seconds['wiegreffe_pinter'] += time.time() - start
  bar.close()
  out['tests'] = {t: _plain(lists[t]) for t in tests}
  out['seconds'] = {k: round(v, 2) for k, v in seconds.items()}
  return _nan_none(out)


def _plain(tree):
  return {k: _plain(v) if isinstance(v, dict) else v for k, v in tree.items()}


def _device(c: dict, *keys):
  return [jnp.asarray(c[k]) for k in keys]


def _moradi(into, cfg, params, chunks, recs, size, seed, chosen, function_ids, orders, bar, *_):
  counts = collections.defaultdict(collections.Counter)
  for c in chunks:
    got = explanation.moradi_one_step(
      cfg, params, *_device(c, 'src', 'src_len', 'tokens'), c['lengths'], chosen, function_ids or None
    )
    for label, n in got['counts'].items():
      counts[label].update(n)
    bar.update(c['real'])
  shares = into.setdefault('shares', {})
  for label, share in explanation.moradi_shares({k: dict(v) for k, v in counts.items()}).items():
    for kind, value in share.items():
      shares.setdefault(label, collections.defaultdict(list))[kind].append(value)
  into['steps'].append(int(next(iter(counts.values()))['tokens']))


def _serrano_smith(into, cfg, params, chunks, recs, size, seed, chosen, function_ids, orders, bar, *_):
  sums = {o: collections.Counter() for o in orders}
  for c in chunks:
    got = explanation.serrano_smith_flip(
      cfg, params, *_device(c, 'src', 'src_len', 'tokens'), c['lengths'], orders, seed
    )
    for o in orders:
      sums[o].update(got[o]['counts'])
    bar.update(c['real'])
  per_order = into.setdefault('orders', {})
  for o in orders:
    s = sums[o]
    d = per_order.setdefault(o, collections.defaultdict(list))
    d['fraction'].append(_ratio(s['fraction_sum'], s['flipped']))
    d['never_flipped'].append(_ratio(s['steps'] - s['flipped'], s['steps']))
  into['steps'].append(int(sums[orders[0]]['steps']))


def _taus(weights, importance, src_len, lengths):
  taus = explanation.kendall_taus(weights, importance, src_len, lengths)
  tau, p = taus['tau'], taus['p']
  defined = np.isfinite(tau)
  return float(tau[defined].sum()), int(defined.sum()), int((p[defined] < 0.05).sum())


def _jain_wallace(into, cfg, params, chunks, recs, size, seed, chosen, function_ids, orders, bar, *adversarial):
  n_adv, steps, candidates, epsilon = adversarial
  sums = collections.Counter()
  for c in chunks:
    src, src_len, tokens = _device(c, 'src', 'src_len', 'tokens')
    weights = np.asarray(explanation._path(cfg, params, src, src_len, tokens)[1])
    grads = np.asarray(explanation.gradient_importance(cfg, params, src, src_len, tokens))
    loo = explanation.leave_one_out(cfg, params, c['src'], c['src_len'], c['tokens'], c['lengths'])
    for name, importance in (('gradient', grads), ('loo', loo)):
      total, defined, significant = _taus(weights, importance, c['src_len'], c['lengths'])
      sums.update({f'{name}_sum': total, f'{name}_defined': defined, f'{name}_significant': significant})
    sums['steps'] += int(c['lengths'].sum())
    bar.update(c['real'])
  into['tau_gradient'].append(_ratio(sums['gradient_sum'], sums['gradient_defined']))
  into['tau_loo'].append(_ratio(sums['loo_sum'], sums['loo_defined']))
  into['significant_gradient'].append(_ratio(sums['gradient_significant'], sums['gradient_defined']))
  into['significant_loo'].append(_ratio(sums['loo_significant'], sums['loo_defined']))
  into['undefined'].append(_ratio(sums['steps'] - sums['gradient_defined'], sums['steps']))
  into['steps'].append(sums['steps'])
  adv = into.setdefault('adversarial', collections.defaultdict(list))
  total = collections.Counter()
  if n_adv:
    for c in _chunks(recs[:n_adv], min(size, n_adv)):
      got = explanation.adversarial_attention(
        cfg, params, *_device(c, 'src', 'src_len', 'tokens'), c['lengths'], epsilon, steps, candidates, seed=seed
      )
      mask = got['mask']
      total.update(
        jsd=float(np.nansum(np.where(mask, got['jsd'], 0.0))),
        held=int(got['held'].sum()),
        jsd_held=float(np.sum(np.where(got['held'], got['jsd'], 0.0))),
        steps=int(mask.sum()),
      )
  adv['jsd'].append(_ratio(total['jsd'], total['steps']))
  adv['jsd_held'].append(_ratio(total['jsd_held'], total['held']))
  adv['held'].append(_ratio(total['held'], total['steps']))
  adv['steps'].append(int(total['steps']))


def _wiegreffe_pinter(into, cfg, params, chunks, recs, size, seed, chosen, function_ids, orders, bar, *_):
  sums = collections.Counter()
  for c in chunks:
    got = explanation.uniform_baseline(cfg, params, *_device(c, 'src', 'src_len', 'ref'), c['ref_len'])
    sums.update(got['counts'])
    bar.update(c['real'])
  into['accuracy_own'].append(_ratio(sums['own'], sums['tokens']))
  into['accuracy_uniform'].append(_ratio(sums['uniform'], sums['tokens']))
  into['agreement'].append(_ratio(sums['agreement'], sums['tokens']))
  into['steps'].append(int(sums['tokens']))


def _seed_variance(run, cfg, base_records, size) -> dict:
  """Wiegreffe & Pinter's seed variance for the run: the first seed's own output, every seed teacher-forced along
  it; the mean over steps of the median JSD of the other seeds' attention from the first seed's, and of the mean
  TVD of their output distributions."""
  if len(run.seeds) < 2:
    return {'not_measured': ONE_SEED}
  params = [evaluation.seed_params(run.params, i) for i in range(len(run.seeds))]
  sums = collections.Counter()
  for c in _chunks(base_records, size):
    src, src_len, tokens = _device(c, 'src', 'src_len', 'tokens')
    paths = [explanation._path(cfg, p, src, src_len, tokens) for p in params]
    weights = np.stack([np.asarray(w) for _, w in paths])
    logits = np.stack([np.asarray(lg) for lg, _ in paths])
    mask = explanation._mask(c['tokens'], c['lengths'])
    got = explanation.seed_variance(weights, mask, logits)
    sums.update(jsd=float(np.nansum(got['jsd_median'])), tvd=float(np.nansum(got['tvd_mean'])), steps=int(mask.sum()))
  return {
    'base_seed': run.seeds[0],
    'jsd_median': _ratio(sums['jsd'], sums['steps']),
    'output_tvd': _ratio(sums['tvd'], sums['steps']),
    'steps': int(sums['steps']),
  }


_TESTS = {
  'moradi': _moradi,
  'serrano_smith': _serrano_smith,
  'jain_wallace': _jain_wallace,
  'wiegreffe_pinter': _wiegreffe_pinter,
}


# Two runs: Wiegreffe & Pinter's frozen attention ----------------------------------------------------------------


def same_vocabulary(run_a, run_b, split: str = 'test') -> bool:
  """Whether two runs read the same source and target vocabularies and the same `split` sentences."""

  def pieces(tok):
    return [tok.id_to_piece(i) for i in range(tok.vocab_size)]

  a, b = run_a.prepared, run_b.prepared
  return (
    pieces(a.src_tokenizer) == pieces(b.src_tokenizer)
    and pieces(a.tgt_tokenizer) == pieces(b.tgt_tokenizer)
    and data.raw_texts(a, split) == data.raw_texts(b, split)
  )


def frozen(run_a, run_b, split: str = 'test', max_sentences: int = MAX_SENTENCES, chunk: int = 8) -> dict:
  """Wiegreffe & Pinter's frozen-attention diagnostic (explanation.frozen_attention): run B's decoder reads run
  A's attention (A's first seed, teacher-forced along B's output) at every step, along each B seed's own greedy
  output; per B seed, the share of steps where B so guided still chooses its own token ('agrees'), and the same
  with uniform weights ('agrees_uniform'). With its own attention B agrees at every step (1 by construction).
  A must attend; the runs must share their vocabularies and sentences (`same_vocabulary`)."""
  if not scores.build(run_a.cfg).attends:
    raise InputError(f'{run_a.name}: its score has no attention to freeze into another decoder')
  if not same_vocabulary(run_a, run_b, split):
    raise InputError(f'{run_a.name} and {run_b.name} read different vocabularies or sentences: no frozen attention')
  batches = faithfulness._subset(list(data.batches(run_b.prepared, split, run_b.config.data)), max_sentences)
  params_a = evaluation.seed_params(run_a.params, 0)
  out = {
    'a': run_a.name,
    'b': run_b.name,
    'a_seed': run_a.seeds[0],
    'seeds': list(run_b.seeds),
    'sentences': 0,
    'agrees': [],
    'agrees_uniform': [],
  }
  for seed_i in range(len(run_b.seeds)):
    params_b = evaluation.seed_params(run_b.params, seed_i)
    own = {t.index: t for t in evaluation.translate(run_b.cfg, params_b, batches, run_b.prepared.tgt_tokenizer)}
    recs = _records(batches, own)
    out['sentences'] = len(recs)
    sums = collections.Counter()
    for c in _chunks(recs, chunk):
      got = explanation.frozen_attention(
        run_a.cfg, params_a, run_b.cfg, params_b, *_device(c, 'src', 'src_len', 'tokens'), c['lengths']
      )
      sums.update(got['counts'])
    out['agrees'].append(_ratio(sums['agrees'], sums['tokens']))
    out['agrees_uniform'].append(_ratio(sums['agrees_uniform'], sums['tokens']))
  return _nan_none(out)


# Verdicts -------------------------------------------------------------------------------------------------------


def measures(tests) -> list:
  """The declared measures (`MEASURES`) of the tests run."""
  return [m for t in parse_tests(tests) for m in MEASURES[t]]


def contrasts(results: list[dict], reference: str, tests=TESTS) -> dict:
  """One family over the declared measures of `tests` x the attending cells against `reference`
  (faithfulness.contrasts: the paired t over seeds, the sentences held fixed, Bonferroni)."""
  return faithfulness.contrasts(results, measures(tests), reference)


# Writing ---------------------------------------------------------------------------------------------------------


def _values(node, path: str):
  for key in path.split('/'):
    if not isinstance(node, dict) or key not in node:
      return None
    node = node[key]
  return node


def _cell(values, scale: float = 1.0, digits: int = 3) -> str:
  """mean ± sd over the seeds with a value (one: the value alone); '—' where none has one."""
  if values is None:
    return '—'
  v = np.array([x for x in values if x is not None and np.isfinite(x)], float) * scale
  if not v.size:
    return 'n/a'
  if v.size == 1:
    return f'{v[0]:.{digits}f}'
  return f'{v.mean():.{digits}f} ± {v.std(ddof=1):.{digits}f}'


DEFINITIONS = {
  'moradi': (
    'At each decoder step of the model\'s own greedy output, the step\'s attention is replaced by a counterfactual '
    '(at that step only, from the same decoder state); a step is preserved when its most probable token does not '
    'change. Cells: the preserved share of steps (%); function and content words by the step\'s token.',
    'Differences from the paper: \'permute\' keeps one order per sentence and may leave the largest weight in '
    'place (theirs redraws until it moves); the function-word split is by target token (a sentencepiece piece '
    'that begins a word counts as that word).',
  ),
  'serrano_smith': (
    'At each decoder step, the attention weights are zeroed one at a time in a ranking\'s order (the rest '
    'renormalised) until the most probable token changes. Cells: the mean fraction of the source positions '
    'removed at the first flip (over the steps that flip), and the share of steps that never flip (%).',
    'Differences from the paper: each decoder step is one decision (theirs: a document classifier\'s label); the '
    'gradient ranking is d p(decision) / d weight, the rest of the step held.',
  ),
  'jain_wallace': (
    'Kendall\'s tau-b at each decoder step between the attention weights and an importance measure (the '
    'gradient x input of the source embeddings with the attention held, and the output distribution\'s TVD when '
    'a source token is deleted), and the adversarial search: the largest JSD (nats, <= ln 2) from the model\'s '
    'attention of an attention at that step whose output distribution stays within epsilon (TVD) of the model\'s.',
    'Differences from the paper: one decision per decoder step, the output the next-token distribution; the '
    'adversarial search runs on a sub-sample with fewer optimisation steps (settings below the table); the JSD '
    'counts 0 where no candidate holds the bound (the model\'s own attention does).',
  ),
  'wiegreffe_pinter': (
    'Token accuracy teacher-forced on the reference with the model\'s own attention and with uniform weights at '
    'every step (the state follows them), how often the uniform step chooses the own step\'s token, and the seed '
    'variance: per step of the first seed\'s output, the median JSD (nats) of the other seeds\' attention from '
    'the first seed\'s, averaged over steps.',
    'Differences from the paper: the uniform baseline is the same model with uniform weights, not retrained (a '
    'variant of score none is the retrained one); the frozen-attention diagnostic guides a trained '
    'encoder-decoder, not a retrained MLP; their adversarially trained model is not run.',
  ),
}


def _columns(results: list[dict], test: str) -> list[tuple]:
  """(header, key path under the test, scale, digits) of a test's table, from the attending results."""
  done = [r['tests'][test] for r in results if test in r.get('tests', {}) and 'not_applicable' not in r['tests'][test]]
  cols = []
  if test == 'moradi':
    labels = list(dict.fromkeys(label for d in done for label in d['shares']))
    for kind, title in (('tokens', ''), ('function', ' function'), ('content', ' content')):
      for label in labels:
        if any(kind in d['shares'].get(label, {}) for d in done):
          cols.append((f'{label}{title} %', f'shares/{label}/{kind}', 100.0, 1))
  elif test == 'serrano_smith':
    for o in dict.fromkeys(o for d in done for o in d['orders']):
      cols += [
        (f'{o}: fraction removed', f'orders/{o}/fraction', 1.0, 3),
        (f'{o}: never flips %', f'orders/{o}/never_flipped', 100.0, 1),
      ]
  elif test == 'jain_wallace':
    cols = [
      ('τ(attention, gradient)', 'tau_gradient', 1.0, 3),
      ('τ(attention, leave-one-out)', 'tau_loo', 1.0, 3),
      ('gradient: p < 0.05 %', 'significant_gradient', 100.0, 1),
      ('leave-one-out: p < 0.05 %', 'significant_loo', 100.0, 1),
      ('adversarial JSD', 'adversarial/jsd', 1.0, 4),
      ('adversarial JSD where held', 'adversarial/jsd_held', 1.0, 4),
      ('held within ε %', 'adversarial/held', 100.0, 1),
    ]
  else:
    cols = [
      ('accuracy, own attention %', 'accuracy_own', 100.0, 1),
      ('accuracy, uniform %', 'accuracy_uniform', 100.0, 1),
      ('uniform chooses own token %', 'agreement', 100.0, 1),
    ]
  return cols


def markdown(results: list[dict], frozen_results=(), verdicts: dict | None = None) -> str:
  """explanations.md: one table per test (rows the variants, cells mean ± sd over seeds), each headed by its paper,
  its definition and the differences from the paper; the frozen-attention table; the verdicts where given."""
  tests = list(dict.fromkeys(t for r in results for t in r.get('tests', {})))
  sentences = sorted({r['sentences'] for r in results})
  lines = [
    '# Is attention an explanation?',
    '',
    f"Sentences: {'/'.join(map(str, sentences))} (the first of the split); cells are the mean ± sd over seeds (one "
    'seed: the value alone; n/a: not defined for any seed).',
  ]
  for test in tests:
    definition, differences = DEFINITIONS[test]
    cols = _columns(results, test)
    lines += ['', f'## {CITATIONS[test]}', '', definition, '', differences, '']
    extra = ['seed JSD (median vs first seed)', 'seed output TVD'] if test == 'wiegreffe_pinter' else []
    headers = [h for h, _, _, _ in cols] + extra
    lines += ['| variant | seeds | ' + ' | '.join(headers) + ' |', '|---|---|' + '---|' * len(headers)]
    for r in results:
      got = r.get('tests', {}).get(test)
      if got is None:
        continue
      if 'not_applicable' in got:
        trained = got.get('trained_uniform_accuracy')  # Wiegreffe & Pinter's baseline: trained with uniform weights
        first = (
          f'{_cell(trained, 100.0, 1)} (trained with uniform weights)'
          if trained
          else f"not applicable: {got['not_applicable']}"
        )
        lines.append(f"| {r['variant']} | {len(r['seeds'])} | {first} |" + ' |' * (len(headers) - 1))
        continue
      cells = [_cell(_values(got, path), scale, digits) for _, path, scale, digits in cols]
      if extra:
        sv = got['seed_variance']
        if 'not_measured' in sv:
          cells += [sv['not_measured'], '—']
        else:
          cells += [_cell([sv['jsd_median']], 1.0, 4), _cell([sv['output_tvd']], 1.0, 4)]
      lines.append(f"| {r['variant']} | {len(r['seeds'])} | " + ' | '.join(cells) + ' |')
    settings = [r['settings'][test] for r in results if test in r.get('settings', {})]
    if settings:
      lines += ['', 'Settings: ' + json.dumps(settings[0], ensure_ascii=False)]
  if frozen_results:
    lines += [
      '',
      f"## {CITATIONS['wiegreffe_pinter']}: frozen attention",
      '',
      'Run B\'s decoder reads run A\'s attention (A\'s first seed) at every step along each B seed\'s own greedy '
      'output; cells: the share of steps where B still chooses its own token (%), with A\'s attention and with '
      'uniform weights (with its own attention: 100 by construction).',
      '',
      '| A (attention given) | B (decoder) | B seeds | A\'s attention % | uniform % |',
      '|---|---|---|---|---|',
    ]
    for f in frozen_results:
      lines.append(
        f"| {f['a']} | {f['b']} | {len(f['seeds'])} | {_cell(f['agrees'], 100.0, 1)} | "
        f"{_cell(f['agrees_uniform'], 100.0, 1)} |"
      )
  if verdicts is not None:
    lines += ['', faithfulness.verdicts_markdown(verdicts).rstrip('\n')]
  else:
    lines += ['', 'No reference cell: no verdicts (the per-seed lists are in explanations.json).']
  return '\n'.join(lines) + '\n'


def plot(results: list[dict], path: str) -> str:
  """Per attending variant: Moradi's preserved share per counterfactual (top) and Jain & Wallace's adversarial JSD
  (bottom), mean over seeds with the sd over seeds; a panel whose test was not run says so."""
  rows = [r for r in results if stored.attends(r)]
  panels = (
    ('moradi', 'Moradi et al.: steps whose token survives the counterfactual (%)', 100.0),
    ('jain_wallace', 'Jain & Wallace: adversarial JSD from the attention within epsilon (nats)', 1.0),
  )
  bars = []
  for test, title, scale in panels:
    labels, means, errs = [], [], []
    for r in rows:
      got = r.get('tests', {}).get(test)
      if not got or 'not_applicable' in got:
        continue
      picked = (
        {k: v['tokens'] for k, v in got['shares'].items()} if test == 'moradi' else {'': got['adversarial']['jsd']}
      )
      for name, values in picked.items():
        v = np.array([x for x in values if x is not None], float) * scale
        labels.append(f"{r['variant']} · {name}" if name else r['variant'])
        means.append(float(v.mean()) if v.size else float('nan'))
        errs.append(float(v.std(ddof=1)) if v.size > 1 else 0.0)
    bars.append((title, labels, means, errs))
  heights = [max(1, len(b[1])) for b in bars]
  fig = plots.mpl().figure.Figure(figsize=(10, 1.5 + 0.3 * sum(heights)))
  for ax, (title, labels, means, errs) in zip(fig.subplots(2, 1, gridspec_kw={'height_ratios': heights}), bars):
    ax.set_title(title, fontsize=9)
    if not labels:
      ax.text(0.5, 0.5, 'not measured', ha='center', va='center', transform=ax.transAxes)
      ax.set_axis_off()
      continue
    y = np.arange(len(labels))
    ax.barh(y, means, xerr=errs, capsize=3, color='0.6')
    ax.set_yticks(y, labels, fontsize=7)
    ax.invert_yaxis()
  fig.suptitle('Is attention an explanation? Mean over seeds, bars: sd over seeds', fontsize=10)
  fig.tight_layout()
  return plots.save(fig, path)


def write(results: list[dict], out_dir: str, frozen_results=(), verdicts: dict | None = None) -> list[str]:
  """explanations.json ({'runs': results, 'frozen': ..., 'verdicts': ...}), explanations.md and explanations.png
  under `out_dir`; returns their paths."""
  os.makedirs(out_dir, exist_ok=True)
  doc = {'runs': results, 'frozen': list(frozen_results), 'verdicts': verdicts}
  paths = [os.path.join(out_dir, f'explanations.{ext}') for ext in ('json', 'md', 'png')]
  report.write_text(paths[0], json.dumps(_nan_none(doc), indent=1, ensure_ascii=False) + '\n')
  report.write_text(paths[1], markdown(results, frozen_results, verdicts))
  plot(results, paths[2])
  return paths
