"""The per-seed summaries of the four papers' tests (attnmt/faithfulness/runner.py's analyze_run calls them): each
runs its paper's test over a seed's chunks (attnmt/faithfulness/chunks.py) and appends that seed's figures to the
test's lists (sums over steps divided once, so pooling over chunks is exact), the declared measures also per
sentence (`per_sentence`, for the verdicts' jackknife over sentences); Wiegreffe & Pinter's seed variance and
trained tests read the whole run.
"""

from __future__ import annotations

import collections

import numpy as np

from attnmt import data
from attnmt.faithfulness import chunks as chunking
from attnmt.faithfulness import jain_wallace, measures, moradi, serrano_smith, wiegreffe_pinter
from attnmt.training import evaluation

ONE_SEED = 'one seed: not measured'


def ratio(a, b) -> float:
  return float(a) / b if b else float('nan')


def plain(tree):
  return {k: plain(v) if isinstance(v, dict) else v for k, v in tree.items()}


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
      cfg,
      params,
      *chunking.device(c, 'src', 'src_len', 'tokens'),
      c['lengths'],
      chosen,
      function_ids or None,
      zero_out=True,
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
      cfg, params, *chunking.device(c, 'src', 'src_len', 'tokens'), c['lengths'], orders, seed
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
  into['no_order_flips'].append(ratio(none['steps'], none['of']))
  into['filtered'].append(filtered)
  per_order = into.setdefault('orders', {})
  for o in orders:
    s = sums[o]
    d = per_order.setdefault(o, collections.defaultdict(list))
    d['fraction'].append(ratio(s['fraction_sum'], s['flipped']))
    d['never_flipped'].append(ratio(s['steps'] - s['flipped'], s['steps']))
    if o in single:
      w = single[o]
      for key, value in (
        ('jsd_diff', ratio(w['jsd_diff_sum'], w['steps'])),
        ('jsd_top_larger', ratio(w['jsd_top_larger'], w['steps'])),
        ('weight_diff', ratio(w['weight_diff_sum'], w['steps'])),
        *((f'flips_{k}', ratio(w[k], w['steps'])) for k in ('both', 'only_top', 'only_other', 'neither')),
      ):
        d.setdefault('single', collections.defaultdict(list))[key].append(value)
  for name, p in paired.items():
    d = into.setdefault('paired', {}).setdefault(name, collections.defaultdict(list))
    for key in ('a_sooner', 'b_sooner', 'same'):
      d[key].append(ratio(p[key], p['of']))
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
    d['mean'].append(ratio(sums[f'{label}/sum'], sums[f'{label}/steps']))
    d['steps'].append(int(sums[f'{label}/steps']))


def _jain_wallace(into, cfg, params, chunks, recs, size, seed, chosen, function_ids, orders, bar, *adversarial):
  n_adv, steps, candidates, epsilon = adversarial
  sums, permuted, by_max = collections.Counter(), collections.Counter(), collections.Counter()
  for c in chunks:
    src, src_len, tokens = chunking.device(c, 'src', 'src_len', 'tokens')
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
  into['tau_gradient'].append(ratio(sums['gradient_sum'], sums['gradient_defined']))
  into['tau_loo'].append(ratio(sums['loo_sum'], sums['loo_defined']))
  into['significant_gradient'].append(ratio(sums['gradient_significant'], sums['gradient_defined']))
  into['significant_loo'].append(ratio(sums['loo_significant'], sums['loo_defined']))
  into['undefined'].append(ratio(sums['steps'] - sums['gradient_defined'], sums['steps']))
  into['steps'].append(sums['steps'])
  perm = into.setdefault('permutation', collections.defaultdict(list))
  perm['median_difference'].append(ratio(permuted['difference'], permuted['steps']))
  perm['flipped'].append(ratio(permuted['flipped'], permuted['steps']))
  perm['steps'].append(int(permuted['steps']))
  _binned_means(by_max, perm.setdefault('by_max_attention', {}))
  adv = into.setdefault('adversarial', collections.defaultdict(list))
  total, rows = collections.Counter(), []
  if n_adv:
    for c in chunking.chunks(recs[:n_adv], min(size, n_adv)):
      got = jain_wallace.adversarial_attention(
        cfg,
        params,
        *chunking.device(c, 'src', 'src_len', 'tokens'),
        c['lengths'],
        epsilon,
        steps,
        candidates,
        seed=seed,
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
    adv[f'{prefix}jsd'].append(ratio(total[f'{prefix}jsd'], total['steps']))
    adv[f'{prefix}jsd_held'].append(ratio(total[f'{prefix}jsd_held'], total[f'{prefix}held']))
    adv[f'{prefix}held'].append(ratio(total[f'{prefix}held'], total['steps']))
  adv['steps'].append(int(total['steps']))
  if rows:
    _per_sentence(into, 'adversarial/jsd', rows)


def _wiegreffe_pinter(into, cfg, params, chunks, recs, size, seed, chosen, function_ids, orders, bar, *_):
  sums, rows = collections.Counter(), []
  for c in chunks:
    got = wiegreffe_pinter.uniform_baseline(cfg, params, *chunking.device(c, 'src', 'src_len', 'ref'), c['ref_len'])
    sums.update(got['counts'])
    rows.append((got['correct']['uniform'].sum(1), got['mask'].sum(1), c['real']))
    bar.update(c['real'])
  into['accuracy_own'].append(ratio(sums['own'], sums['tokens']))
  into['accuracy_uniform'].append(ratio(sums['uniform'], sums['tokens']))
  into['agreement'].append(ratio(sums['agreement'], sums['tokens']))
  into['steps'].append(int(sums['tokens']))
  _per_sentence(into, 'accuracy_uniform', rows)


def seed_variance(run, cfg, base_records, size) -> dict:
  """Wiegreffe & Pinter's seed variance for the run: the first seed's own output, every seed teacher-forced along
  it; the mean over steps of the median JSD of the other seeds' attention from the first seed's, and of the mean
  TVD of their output distributions."""
  if len(run.seeds) < 2:
    return {'not_measured': ONE_SEED}
  params = [evaluation.seed_params(run.params, i) for i in range(len(run.seeds))]
  sums, by_max = collections.Counter(), collections.Counter()
  for c in chunking.chunks(base_records, size):
    src, src_len, tokens = chunking.device(c, 'src', 'src_len', 'tokens')
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
    'jsd_median': ratio(sums['jsd'], sums['steps']),
    'output_tvd': ratio(sums['tvd'], sums['steps']),
    'steps': int(sums['steps']),
    'by_max_attention': {
      bin_label(i): {
        'mean': ratio(by_max[f'{bin_label(i)}/sum'], by_max[f'{bin_label(i)}/steps']),
        'steps': int(by_max[f'{bin_label(i)}/steps']),
      }
      for i in range(len(MAX_ATTENTION_BINS) - 1)
    },
  }
  return out


def trained(run, test_records: list[dict], steps: int, train_sentences: int, seed: int) -> dict:
  """Wiegreffe & Pinter's two trained tests from the run's first seed, teacher-forced on the references: the
  non-contextual diagnostic (wiegreffe_pinter.noncontextual_diagnostic) and the adversarially trained model
  (wiegreffe_pinter.adversarial_training), trained on the first `train_sentences` training sentences (in the
  corpus's order) and scored on the test records (the diagnostic's own draws from `seed`)."""
  epoch = data.batches(run.prepared, 'train', run.config.data, num_epochs=1, shuffle=False)
  batches = chunking.first_batches(epoch, train_sentences)  # read lazily: the first whole batches only
  train, test = (
    chunking.chunks(chunking.records(batches, None)[:train_sentences], 32),
    chunking.chunks(test_records, 32),
  )
  params = evaluation.seed_params(run.params, 0)
  diagnostic = wiegreffe_pinter.noncontextual_diagnostic(run.cfg, params, train, test, steps=steps, seed=seed)
  # their adversary starts from the base model's own initial draw (both trained with seed 10): the first seed's
  rate = float(run.config.train.learning_rate)
  adversary = wiegreffe_pinter.adversarial_training(
    run.cfg, params, train, test, steps=steps, learning_rate=rate, seed=run.seeds[0]
  )
  return {'diagnostic': diagnostic, 'adversary': adversary}


SUMMARIES = {  # a test's per-seed summary: (into, cfg, params, chunks, records, size, seed, ...)
  'moradi': _moradi,
  'serrano_smith': _serrano_smith,
  'jain_wallace': _jain_wallace,
  'wiegreffe_pinter': _wiegreffe_pinter,
}
