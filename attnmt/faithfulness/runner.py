"""Is attention an explanation? The four papers' tests (attnmt/faithfulness/moradi.py, serrano_smith.py,
jain_wallace.py, wiegreffe_pinter.py) run on trained runs, per seed; attnmt/faithfulness/page.py writes them as
explanations.json, explanations.md and explanations.png.

Every test runs on the first `max_sentences` sentences of a split (whole batches), along each seed's own greedy
output (EOS included), one decision per decoder step:

- moradi: the share of steps whose most probable token survives a counterfactual attention at that step only
  (their Uniform, RandomPermute, ZeroOutMax, LastEncoderState, OnlyMax, KeepMaxUniformOthers and ZeroOut, and 'any'
  of the first three, as their code pools them), overall and, where the target vocabulary has words of the
  function-word list, for function and content words apart.
- serrano_smith: per ranking (attention, random, gradient, gradient x attention), the mean fraction of the source
  positions removed when the decision first flips (over the steps that flip) and the share of steps that never
  flip; per ranking but random, the single-weight test (the top weight zeroed against a random other: the mean JSD
  difference, the share where the top's is larger, the 2 x 2 shares of decision flips); attention against each
  gradient ranking step by step (which flips sooner); the share of steps at which no order flips.
- jain_wallace: the mean Kendall tau between attention and gradient importance and between attention and
  leave-one-out importance, the share of steps where each is significant (p < 0.05); the permutation test (the
  median output TVD over 100 permutations, overall and by the step's largest weight, and the share of permutations
  that change the decision); the adversarial attention search on the first `adversarial_sentences`: the mean JSD
  attained (0 where no candidate holds the bound) and the share of steps where a candidate holds it, chosen as
  theirs within 0.05 over the words and ('strict_') within epsilon over every position.
- wiegreffe_pinter: token accuracy teacher-forced on the reference with the model's own attention and with uniform
  weights at every step, and (two or more seeds) the seed variance of attention: at each step of the base seed's
  output, the median over the other seeds of their attention's JSD from the base seed's, averaged over steps and by
  the base seed's largest weight. `frozen` runs the frozen-attention diagnostic between two runs of one vocabulary.

A variant whose score does not attend gets one line per test ('not applicable') and no computation.

Verdicts (`contrasts`): the declared measures of the tests run (`MEASURES`), every attending cell against a
reference cell, one family (counterfactual.contrasts: the paired t over seeds, Bonferroni over measures x cells).
"""

from __future__ import annotations

import collections
import time

import jax.numpy as jnp
import numpy as np

from attnmt import data, progress
from attnmt.faithfulness import counterfactual, jain_wallace, measures, moradi, serrano_smith, wiegreffe_pinter
from attnmt.errors import ConfigError, InputError
from attnmt.model import interventions, scores
from attnmt.model.seq2seq import EOS, PAD
from attnmt.training import evaluation

TESTS = ('moradi', 'serrano_smith', 'jain_wallace', 'wiegreffe_pinter')
MORADI_INTERVENTIONS = 'uniform,permute_moved,zero_max,last,only_max,keep_max_uniform_others'  # with zero_out: their 7
ORDERS = serrano_smith.ORDERS  # attention, random, gradient, gradient x attention: all four of their rankings
EPSILON = 0.01  # Jain & Wallace's margin (TVD of the output distributions)
ADVERSARIAL_SENTENCES = 32  # about 300 decoder steps per seed: every cell has hundreds
ADVERSARIAL_STEPS = 500  # theirs; at 100 the search started from uniform logits rarely reached the bound on the
# Bible models (held at 1-8 % of steps against 50-68 % at 500: docs/results/faithfulness.md)
ADVERSARIAL_CANDIDATES = 5
TRAINED_STEPS = 1000  # Wiegreffe & Pinter's trained tests (diagnostic and adversary): optimisation steps each
TRAIN_SENTENCES = 1000  # ... on the first this many training sentences (unshuffled)
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


def nan_none(x):
  """JSON has no NaN: None in its place, recursively."""
  if isinstance(x, dict):
    return {k: nan_none(v) for k, v in x.items()}
  if isinstance(x, (list, tuple)):
    return [nan_none(v) for v in x]
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
  trained_steps: int = TRAINED_STEPS,
  train_sentences: int = TRAIN_SENTENCES,
) -> dict:
  """The selected tests (`parse_tests`) of the module docstring for one run (an inspection.LoadedRun), per seed, on
  the first `max_sentences` sentences of `split` (whole batches; 0: all), `chunk` sentences at a time (the
  gradients are B x T x S x E). `function_words`: the words of the Moradi split (None: faithfulness's shipped
  list). Wiegreffe & Pinter's trained tests (the non-contextual diagnostic and the adversarially trained model,
  `_trained`) run `trained_steps` optimisation steps on the first `train_sentences` training sentences, from the
  first seed; trained_steps 0 leaves them out. Returns {'variant', 'pool', 'seeds', 'sentences', 'attends', 'split', 'settings', 'tests': {test: {...
  per-seed lists ...} or {'not_applicable': why}}, 'seconds': {test: seconds}} (NaN as None)."""
  tests = parse_tests(tests)
  if (
    chunk < 1
    or min(max_sentences, adversarial_sentences, trained_steps) < 0
    or min(adversarial_steps, train_sentences) < 1
  ):
    raise ConfigError(
      'chunk, adversarial_steps and train_sentences must be >= 1, max_sentences, adversarial_sentences and '
      'trained_steps >= 0'
    )
  cfg, tokenizer = run.cfg, run.prepared.tgt_tokenizer
  batches = counterfactual._subset(list(data.batches(run.prepared, split, run.config.data)), max_sentences)
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
  words = moradi.function_words() if function_words is None else frozenset(function_words)
  listed, marks = moradi.function_token_ids(tokenizer, words)
  function_ids = listed | marks if listed else frozenset()  # no listed word: the list misses this target language
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
      'interventions': [iv.label for iv in chosen] + ['zero_out'],
      'function_words': (
        f'{len(words)} words, {len(listed)} target tokens among them; with end of sentence and '
        f'{len(marks - {EOS})} punctuation tokens, {len(function_ids)} function tokens (Moradi et '
        "al.'s classes)"
        if function_ids
        else 'the function-word list has no word of this target language: overall shares only'
      ),
    }
  if 'serrano_smith' in tests:
    out['settings']['serrano_smith'] = {
      'orders': list(orders),
      'random_draws': serrano_smith.RANDOM_DRAWS,
      'steps': 'sources of 2 or more positions (their ATTN_SEQ_LEN > 1); the rest counted in filtered',
    }
  if 'jain_wallace' in tests:
    out['settings']['jain_wallace'] = {
      'kendall': 'tau-b over the source positions but the final EOS; significant: p < 0.05',
      'permutations': jain_wallace.PERMUTATIONS,
      'select': 0.05,
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
      'trained': {'steps': trained_steps, 'train_sentences': train_sentences, 'seed': 'the first'},
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
    if trained_steps:
      lists['wiegreffe_pinter'].update(_trained(run, records, trained_steps, train_sentences, seed))
    seconds['wiegreffe_pinter'] += time.time() - start
  bar.close()
  out['tests'] = {t: _plain(lists[t]) for t in tests}
  out['seconds'] = {k: round(v, 2) for k, v in seconds.items()}
  return nan_none(out)


def _plain(tree):
  return {k: _plain(v) if isinstance(v, dict) else v for k, v in tree.items()}


def _device(c: dict, *keys):
  return [jnp.asarray(c[k]) for k in keys]


def _per_sentence(into: dict, key: str, parts: list[tuple]) -> None:
  """One seed's per-sentence sums and counts of the declared measure `key` (its key path under the test), from
  `parts`: (sum per row, count per row, real rows) per chunk; contrasts.jackknife_rows reads them back."""
  d = into.setdefault('per_sentence', {}).setdefault(key, {'sum': [], 'count': []})
  d['sum'].append([float(x) for s, _, real in parts for x in np.asarray(s)[:real]])
  d['count'].append([int(x) for _, n, real in parts for x in np.asarray(n)[:real]])


def _moradi(into, cfg, params, chunks, recs, size, seed, chosen, function_ids, orders, bar, *_):
  counts, rows = collections.defaultdict(collections.Counter), []
  for c in chunks:
    got = moradi.moradi_one_step(
      cfg, params, *_device(c, 'src', 'src_len', 'tokens'), c['lengths'], chosen, function_ids or None, zero_out=True
    )
    for label, n in got['counts'].items():
      counts[label].update(n)
    if 'uniform' in got['same']:
      rows.append((got['same']['uniform'].sum(1), got['mask'].sum(1), c['real']))
    bar.update(c['real'])
  shares = into.setdefault('shares', {})
  for label, share in moradi.moradi_shares({k: dict(v) for k, v in counts.items()}).items():
    for kind, value in share.items():
      shares.setdefault(label, collections.defaultdict(list))[kind].append(value)
  into['steps'].append(int(next(iter(counts.values()))['tokens']))
  if rows:
    _per_sentence(into, 'shares/uniform/tokens', rows)


def _serrano_smith(into, cfg, params, chunks, recs, size, seed, chosen, function_ids, orders, bar, *_):
  sums = {o: collections.Counter() for o in orders}
  single = {o: collections.Counter() for o in orders if o != 'random'}
  paired, none, filtered, rows = collections.defaultdict(collections.Counter), collections.Counter(), 0, []
  for c in chunks:
    got = serrano_smith.serrano_smith_flip(
      cfg, params, *_device(c, 'src', 'src_len', 'tokens'), c['lengths'], orders, seed
    )
    for o in orders:
      sums[o].update(got[o]['counts'])
      if o in single:
        single[o].update(got[o]['single']['counts'])
    for name, counts in got['paired'].items():
      paired[name].update(counts)
    none.update(got['no_order_flips'])
    filtered += got['filtered']
    if 'attention' in orders:
      att = got['attention']
      rows.append((np.nansum(att['fraction'], 1), att['flipped'].sum(1), c['real']))
    bar.update(c['real'])
  into['no_order_flips'].append(_ratio(none['steps'], none['of']))
  into['filtered'].append(filtered)
  per_order = into.setdefault('orders', {})
  for o in orders:
    s = sums[o]
    d = per_order.setdefault(o, collections.defaultdict(list))
    d['fraction'].append(_ratio(s['fraction_sum'], s['flipped']))
    d['never_flipped'].append(_ratio(s['steps'] - s['flipped'], s['steps']))
    if o in single:
      w = single[o]
      for key, value in (
        ('jsd_diff', _ratio(w['jsd_diff_sum'], w['steps'])),
        ('jsd_top_larger', _ratio(w['jsd_top_larger'], w['steps'])),
        ('weight_diff', _ratio(w['weight_diff_sum'], w['steps'])),
        *((f'flips_{k}', _ratio(w[k], w['steps'])) for k in ('both', 'only_top', 'only_other', 'neither')),
      ):
        d.setdefault('single', collections.defaultdict(list))[key].append(value)
  for name, p in paired.items():
    d = into.setdefault('paired', {}).setdefault(name, collections.defaultdict(list))
    for key in ('a_sooner', 'b_sooner', 'same'):
      d[key].append(_ratio(p[key], p['of']))
    d['of'].append(int(p['of']))
  into['steps'].append(int(sums[orders[0]]['steps']) // (serrano_smith.RANDOM_DRAWS if orders[0] == 'random' else 1))
  if rows:
    _per_sentence(into, 'orders/attention/fraction', rows)


def _taus(weights, importance, src_len, lengths):
  taus = jain_wallace.kendall_taus(weights, importance, src_len, lengths)
  tau, p = taus['tau'], taus['p']
  defined = np.isfinite(tau)
  return float(tau[defined].sum()), int(defined.sum()), int((p[defined] < 0.05).sum())


MAX_ATTENTION_BINS = (0.0, 0.25, 0.5, 0.75, 1.0)  # the x axis of Jain & Wallace's and Wiegreffe & Pinter's violins


def bin_label(i: int) -> str:
  lo, hi = MAX_ATTENTION_BINS[i], MAX_ATTENTION_BINS[i + 1]
  return f'{lo:.2f}-{hi:.2f}'


def _by_max_attention(values, max_attention, mask) -> dict:
  """Sums and counts of `values` over the steps of `mask`, by the bin of the step's largest weight."""
  out = collections.Counter()
  bins = np.clip(np.searchsorted(MAX_ATTENTION_BINS, np.nan_to_num(max_attention), 'right') - 1, 0, 3)
  for i in range(len(MAX_ATTENTION_BINS) - 1):
    at = mask & (bins == i) & np.isfinite(values)
    out[f'{bin_label(i)}/sum'] += float(np.sum(np.where(at, values, 0.0)))
    out[f'{bin_label(i)}/steps'] += int(at.sum())
  return out


def _binned_means(sums: collections.Counter, into: dict) -> None:
  for i in range(len(MAX_ATTENTION_BINS) - 1):
    label = bin_label(i)
    d = into.setdefault(label, collections.defaultdict(list))
    d['mean'].append(_ratio(sums[f'{label}/sum'], sums[f'{label}/steps']))
    d['steps'].append(int(sums[f'{label}/steps']))


def _jain_wallace(into, cfg, params, chunks, recs, size, seed, chosen, function_ids, orders, bar, *adversarial):
  n_adv, steps, candidates, epsilon = adversarial
  sums, permuted, by_max = collections.Counter(), collections.Counter(), collections.Counter()
  for c in chunks:
    src, src_len, tokens = _device(c, 'src', 'src_len', 'tokens')
    weights = np.asarray(measures.greedy_path(cfg, params, src, src_len, tokens)[1])
    grads = np.asarray(jain_wallace.gradient_importance(cfg, params, src, src_len, tokens))
    loo = jain_wallace.leave_one_out(cfg, params, c['src'], c['src_len'], c['tokens'], c['lengths'])
    for name, importance in (('gradient', grads), ('loo', loo)):
      total, defined, significant = _taus(weights, importance, c['src_len'], c['lengths'])
      sums.update({f'{name}_sum': total, f'{name}_defined': defined, f'{name}_significant': significant})
    sums['steps'] += int(c['lengths'].sum())
    got = jain_wallace.permutation_test(cfg, params, src, src_len, tokens, c['lengths'], seed=seed)
    mask = got['mask']
    permuted.update(
      difference=float(np.nansum(got['median_difference'])),
      flipped=float(np.nansum(got['flipped_share'])),
      steps=int(mask.sum()),
    )
    by_max.update(_by_max_attention(got['median_difference'], got['max_attention'], mask))
    bar.update(c['real'])
  into['tau_gradient'].append(_ratio(sums['gradient_sum'], sums['gradient_defined']))
  into['tau_loo'].append(_ratio(sums['loo_sum'], sums['loo_defined']))
  into['significant_gradient'].append(_ratio(sums['gradient_significant'], sums['gradient_defined']))
  into['significant_loo'].append(_ratio(sums['loo_significant'], sums['loo_defined']))
  into['undefined'].append(_ratio(sums['steps'] - sums['gradient_defined'], sums['steps']))
  into['steps'].append(sums['steps'])
  perm = into.setdefault('permutation', collections.defaultdict(list))
  perm['median_difference'].append(_ratio(permuted['difference'], permuted['steps']))
  perm['flipped'].append(_ratio(permuted['flipped'], permuted['steps']))
  perm['steps'].append(int(permuted['steps']))
  _binned_means(by_max, perm.setdefault('by_max_attention', {}))
  adv = into.setdefault('adversarial', collections.defaultdict(list))
  total, rows = collections.Counter(), []
  if n_adv:
    for c in _chunks(recs[:n_adv], min(size, n_adv)):
      got = jain_wallace.adversarial_attention(
        cfg, params, *_device(c, 'src', 'src_len', 'tokens'), c['lengths'], epsilon, steps, candidates, seed=seed
      )
      mask = got['mask']
      for prefix, pick in (('', got), ('strict_', got['strict'])):
        total.update(
          {
            f'{prefix}jsd': float(np.nansum(np.where(mask, pick['jsd'], 0.0))),
            f'{prefix}held': int(pick['held'].sum()),
            f'{prefix}jsd_held': float(np.sum(np.where(pick['held'], pick['jsd'], 0.0))),
          }
        )
      total['steps'] += int(mask.sum())
      rows.append((np.where(mask, got['jsd'], 0.0).sum(1), mask.sum(1), c['real']))
  for prefix in ('', 'strict_'):
    adv[f'{prefix}jsd'].append(_ratio(total[f'{prefix}jsd'], total['steps']))
    adv[f'{prefix}jsd_held'].append(_ratio(total[f'{prefix}jsd_held'], total[f'{prefix}held']))
    adv[f'{prefix}held'].append(_ratio(total[f'{prefix}held'], total['steps']))
  adv['steps'].append(int(total['steps']))
  if rows:
    _per_sentence(into, 'adversarial/jsd', rows)


def _wiegreffe_pinter(into, cfg, params, chunks, recs, size, seed, chosen, function_ids, orders, bar, *_):
  sums, rows = collections.Counter(), []
  for c in chunks:
    got = wiegreffe_pinter.uniform_baseline(cfg, params, *_device(c, 'src', 'src_len', 'ref'), c['ref_len'])
    sums.update(got['counts'])
    rows.append((got['correct']['uniform'].sum(1), got['mask'].sum(1), c['real']))
    bar.update(c['real'])
  into['accuracy_own'].append(_ratio(sums['own'], sums['tokens']))
  into['accuracy_uniform'].append(_ratio(sums['uniform'], sums['tokens']))
  into['agreement'].append(_ratio(sums['agreement'], sums['tokens']))
  into['steps'].append(int(sums['tokens']))
  _per_sentence(into, 'accuracy_uniform', rows)


def _seed_variance(run, cfg, base_records, size) -> dict:
  """Wiegreffe & Pinter's seed variance for the run: the first seed's own output, every seed teacher-forced along
  it; the mean over steps of the median JSD of the other seeds' attention from the first seed's, and of the mean
  TVD of their output distributions."""
  if len(run.seeds) < 2:
    return {'not_measured': ONE_SEED}
  params = [evaluation.seed_params(run.params, i) for i in range(len(run.seeds))]
  sums, by_max = collections.Counter(), collections.Counter()
  for c in _chunks(base_records, size):
    src, src_len, tokens = _device(c, 'src', 'src_len', 'tokens')
    paths = [measures.greedy_path(cfg, p, src, src_len, tokens) for p in params]
    weights = np.stack([np.asarray(w) for _, w in paths])
    logits = np.stack([np.asarray(lg) for lg, _ in paths])
    mask = measures.step_mask(c['tokens'], c['lengths'])
    got = wiegreffe_pinter.seed_variance(weights, mask, logits)
    sums.update(jsd=float(np.nansum(got['jsd_median'])), tvd=float(np.nansum(got['tvd_mean'])), steps=int(mask.sum()))
    by_max.update(_by_max_attention(got['jsd_median'], got['max_attention'], mask))
  out = {
    'base_seed': run.seeds[0],
    'seeds': len(run.seeds),
    'jsd_median': _ratio(sums['jsd'], sums['steps']),
    'output_tvd': _ratio(sums['tvd'], sums['steps']),
    'steps': int(sums['steps']),
    'by_max_attention': {
      bin_label(i): {
        'mean': _ratio(by_max[f'{bin_label(i)}/sum'], by_max[f'{bin_label(i)}/steps']),
        'steps': int(by_max[f'{bin_label(i)}/steps']),
      }
      for i in range(len(MAX_ATTENTION_BINS) - 1)
    },
  }
  return out


def _trained(run, test_records: list[dict], steps: int, train_sentences: int, seed: int) -> dict:
  """Wiegreffe & Pinter's two trained tests from the run's first seed, teacher-forced on the references: the
  non-contextual diagnostic (wiegreffe_pinter.noncontextual_diagnostic) and the adversarially trained model
  (wiegreffe_pinter.adversarial_training), trained on the first `train_sentences` training sentences (in the
  corpus's order) and scored on the test records (the diagnostic's own draws from `seed`)."""
  batches, rows = [], 0
  for b in data.batches(run.prepared, 'train', run.config.data, num_epochs=1, shuffle=False):
    if rows >= train_sentences:
      break
    batches.append(b)
    rows += int(np.sum(np.asarray(b['index']) >= 0))
  train, test = _chunks(_records(batches, None)[:train_sentences], 32), _chunks(test_records, 32)
  params = evaluation.seed_params(run.params, 0)
  diagnostic = wiegreffe_pinter.noncontextual_diagnostic(run.cfg, params, train, test, steps=steps, seed=seed)
  # their adversary starts from the base model's own initial draw (both trained with seed 10): the first seed's
  adversary = wiegreffe_pinter.adversarial_training(run.cfg, params, train, test, steps=steps, seed=run.seeds[0])
  return {'diagnostic': diagnostic, 'adversary': adversary}


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
  """Wiegreffe & Pinter's frozen-attention diagnostic (wiegreffe_pinter.frozen_attention): run B's decoder reads run
  A's attention (A's first seed, teacher-forced along B's output) at every step, along each B seed's own greedy
  output; per B seed, the share of steps where B so guided still chooses its own token ('agrees'), and the same
  with uniform weights ('agrees_uniform'). With its own attention B agrees at every step (1 by construction).
  A must attend; the runs must share their vocabularies and sentences (`same_vocabulary`)."""
  if not scores.build(run_a.cfg).attends:
    raise InputError(f'{run_a.name}: its score has no attention to freeze into another decoder')
  if not same_vocabulary(run_a, run_b, split):
    raise InputError(f'{run_a.name} and {run_b.name} read different vocabularies or sentences: no frozen attention')
  batches = counterfactual._subset(list(data.batches(run_b.prepared, split, run_b.config.data)), max_sentences)
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
      got = wiegreffe_pinter.frozen_attention(
        run_a.cfg, params_a, run_b.cfg, params_b, *_device(c, 'src', 'src_len', 'tokens'), c['lengths']
      )
      sums.update(got['counts'])
    out['agrees'].append(_ratio(sums['agrees'], sums['tokens']))
    out['agrees_uniform'].append(_ratio(sums['agrees_uniform'], sums['tokens']))
  return nan_none(out)


# Verdicts -------------------------------------------------------------------------------------------------------
