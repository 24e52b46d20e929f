"""attnmt.training.measures against NumPy, scipy and hand-worked values; significance and the analysis table."""

import os
import warnings

import numpy as np
import pytest
import sacrebleu
import scipy.stats

from attnmt.errors import InputError
from attnmt.analysis import formatting, pair_table, run_analysis, run_verdicts, scoring, sweep_tables
from attnmt import data
from attnmt.training import evaluation, measures, translation_scores
from attnmt.analysis import tables


def test_average_ranks_match_scipy_rankdata_with_ties():
  rng = np.random.default_rng(0)
  for _ in range(20):
    x = rng.integers(0, 5, size=rng.integers(1, 15))
    np.testing.assert_allclose(measures.average_ranks(x), scipy.stats.rankdata(x, method='average'))


def test_spearman_matches_scipy_on_random_data_with_ties():
  rng = np.random.default_rng(1)
  for _ in range(50):
    n = int(rng.integers(3, 30))
    x, y = rng.integers(0, 6, size=n), rng.integers(0, 4, size=n)
    want = scipy.stats.spearmanr(x, y).statistic
    got = measures.spearman(x, y)
    if np.isnan(want):
      assert np.isnan(got)
    else:
      np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_spearman_hand_worked():
  # No ties: rho = 1 - 6 sum d^2 / (n (n^2 - 1)) = 1 - 6 * 4 / 120.
  assert measures.spearman([1, 2, 3, 4, 5], [2, 1, 4, 3, 5]) == pytest.approx(0.8)
  # Ties: y ranks (1.5, 1.5, 3, 4); Pearson of the ranks = 4.5 / sqrt(5 * 4.5) = sqrt(0.9).
  assert measures.spearman([1, 2, 3, 4], [7, 7, 8, 9]) == pytest.approx(np.sqrt(0.9))
  assert np.isnan(measures.spearman([1, 2, 3], [4, 4, 4]))  # a constant ranking: undefined
  assert np.isnan(measures.spearman([1], [2]))


def test_monotonicity_of_diagonal_anti_diagonal_and_uniform_attention():
  eye = np.eye(6)
  assert measures.attention_monotonicity([eye])['monotonicity'] == 1.0
  assert measures.attention_monotonicity([eye[::-1]])['monotonicity'] == -1.0
  uniform = measures.attention_monotonicity([np.full((5, 4), 0.25), np.full((3, 7), 1 / 7)])
  assert uniform == {'monotonicity': 0.0, 'sentences': 2, 'undefined': 2, 'skipped': 0}
  # Peaks at source positions 0, 2, 1, 3: spearman 0.8; averaged with a diagonal sentence; two short
  # sentences (2 output tokens, no source token) are skipped and counted.
  peaks = np.eye(4)[[0, 2, 1, 3]]
  got = measures.attention_monotonicity([peaks, np.eye(3), np.eye(2), np.zeros((4, 0))])
  assert got['monotonicity'] == pytest.approx(0.9)
  assert (got['sentences'], got['undefined'], got['skipped']) == (2, 0, 2)
  assert measures.attention_monotonicity([])['monotonicity'] is None
  # Rows with no weight (hard monotonic attention that attends nothing) have no peak and are left out:
  # the peaks 0, 1, 3 of rows 0, 2, 3 are monotone; a sentence with two rows of weight left is skipped.
  hard = np.eye(4)[[0, 0, 1, 3]]
  hard[1] = 0.0
  assert measures.attention_monotonicity([hard])['monotonicity'] == 1.0
  assert measures.attention_monotonicity([hard[:3]])['skipped'] == 1


def test_attention_measures_leave_out_the_eos_row_and_the_source_eos_column():
  # 4 output tokens + EOS over 4 source tokens + EOS. The content is diagonal, but every row puts most
  # of its weight on the source EOS and the EOS row looks at position 0: kept, either would break 1.0.
  a = np.zeros((5, 5))
  a[np.arange(4), np.arange(4)] = 0.4
  a[:4, 4] = 0.6
  a[4, 0] = 1.0
  x = evaluation.SplitTranslation(0, [5, 6, 7, 8, data.EOS_ID], 'a b c d', a)
  got = run_analysis.attention_measures([x])
  assert got['monotonicity'] == 1.0 and got['tokens'] == 4
  h = -(0.4 * np.log(0.4) + 0.6 * np.log(0.6))
  assert got['entropy'] == pytest.approx(h) and got['normalized'] == pytest.approx(h / np.log(5))
  # The maximum over the 4 output tokens; coverage over all 5 steps: columns receive 1.4, 0.4 (three times)
  # and 2.4, so the deviations are 0.4, 0.6 (three times) and 1.4.
  assert got['max_weight'] == pytest.approx(0.6) and got['positions'] == 5
  assert got['coverage_deviation'] == pytest.approx((0.4 + 3 * 0.6 + 1.4) / 5)
  # Without a final EOS (the decoding budget ran out) every row is an output token.
  unfinished = evaluation.SplitTranslation(0, [5, 6, 7, 8, 9], 'a b c d e', a)
  assert run_analysis.attention_measures([unfinished])['tokens'] == 5


def test_entropy_of_uniform_one_hot_and_padded_attention():
  with warnings.catch_warnings():
    warnings.simplefilter('error')  # zero weights: no log(0) warning, no NaN
    uniform = measures.attention_entropy([np.full((3, 8), 1 / 8)])
    assert uniform['entropy'] == pytest.approx(np.log(8)) and uniform['normalized'] == pytest.approx(1.0)
    one_hot = measures.attention_entropy([np.eye(4)])
    assert one_hot == {'entropy': 0.0, 'normalized': 0.0, 'tokens': 4}
    # Columns past the source length are padding, whatever they hold.
    padded = np.array([[1 / 3, 1 / 3, 1 / 3, 0.7, 0.2]])
    assert measures.attention_entropy([padded], [3])['entropy'] == pytest.approx(np.log(3))
  # Hand-worked (1/2, 1/4, 1/4): 1.5 log 2; local-p's unnormalised rows are renormalised first.
  assert measures.attention_entropy([np.array([[0.5, 0.25, 0.25]])])['entropy'] == pytest.approx(1.5 * np.log(2))
  assert measures.attention_entropy([np.array([[0.2, 0.2, 0.0, 0.0]])])['entropy'] == pytest.approx(np.log(2))
  # The mean is over output tokens of all sentences: (3 log 8 + 0 * 4) / 7.
  both = measures.attention_entropy([np.full((3, 8), 1 / 8), np.eye(4)])
  assert both['entropy'] == pytest.approx(3 * np.log(8) / 7) and both['tokens'] == 7


def test_max_weight_and_coverage_deviation_hand_worked_with_padding():
  # One sentence of 3 output steps over 3 valid source positions and a padding column (whatever it holds).
  a = np.array([[0.7, 0.2, 0.1, 0.5], [0.1, 0.8, 0.1, 0.5], [0.0, 0.1, 0.9, 0.5]])
  assert measures.attention_max_weight([a], [3]) == {'max_weight': pytest.approx(0.8), 'tokens': 3}
  # Column sums 0.8, 1.1, 1.1: deviations 0.2, 0.1, 0.1.
  assert measures.coverage_deviation([a], [3]) == {'coverage_deviation': pytest.approx(0.4 / 3), 'positions': 3}
  np.testing.assert_allclose(measures.coverage_deviations(a[:, :3]), [0.2, 0.1, 0.1])
  # Uniform attention of 2 steps over 4 positions: every column receives 0.5. Pooled over the 7 positions.
  uniform = np.full((2, 4), 0.25)
  assert measures.coverage_deviation([a, uniform], [3, 4])['coverage_deviation'] == pytest.approx(2.4 / 7)
  assert measures.attention_max_weight([a, uniform], [3, 4])['max_weight'] == pytest.approx((2.4 + 0.5) / 5)
  # A row without weight (a local window past a short source) is no output token of max weight, but
  # the columns still count for coverage; local-p's rows below 1 are taken as they are.
  gaussian = np.array([[0.3, 0.1], [0.0, 0.0]])
  assert measures.attention_max_weight([gaussian]) == {'max_weight': pytest.approx(0.3), 'tokens': 1}
  assert measures.coverage_deviation([gaussian])['coverage_deviation'] == pytest.approx((0.7 + 0.9) / 2)
  # A one-to-one alignment, as many steps as positions: no deviation, every maximum 1.
  assert measures.coverage_deviation([np.eye(5)[[2, 0, 1, 4, 3]]])['coverage_deviation'] == 0.0
  assert measures.attention_max_weight([np.eye(5)])['max_weight'] == 1.0
  assert measures.coverage_deviation([]) == {'coverage_deviation': None, 'positions': 0}
  assert measures.attention_max_weight([]) == {'max_weight': None, 'tokens': 0}


def _dirichlet_sentences(rng, count):
  """Random attention matrices: T output steps (EOS last) x S valid source positions (EOS last)."""
  out = []
  for _ in range(count):
    t, s = int(rng.integers(1, 9)), int(rng.integers(1, 7))
    out.append(rng.dirichlet(np.full(s, 0.3), size=t))
  return out


def test_attention_statistics_pooled_sentence_by_sentence_equal_numpy_over_the_corpus():
  rng = np.random.default_rng(3)
  sentences = _dirichlet_sentences(rng, 30)
  stats = measures.AttentionStatistics()
  for a in sentences[:17]:  # two 'batches', added one sentence at a time
    stats.add(a)
  for a in sentences[17:]:
    stats.add(a)
  got = stats.result()
  # NumPy over the whole corpus, written out: entropy and maximum over the rows without the EOS row,
  # coverage over every row and column, Spearman (scipy) of position and peak without EOS row and column.
  rows = [a[:-1] for a in sentences]
  probs = [p for r in rows for p in r]  # every output token's weights (the rows sum to 1)
  entropy = np.array([-sum(x * np.log(x) for x in p if x > 0) for p in probs])
  maxima = np.array([p.max() for p in probs])
  coverage = np.concatenate([np.abs(a.sum(axis=0) - 1.0) for a in sentences])
  rhos = []
  for r in rows:
    if len(r) >= 3 and r.shape[1] > 1:
      with warnings.catch_warnings():
        warnings.simplefilter('ignore')  # a constant input: scipy warns and returns NaN
        rho = scipy.stats.spearmanr(np.arange(len(r)), np.argmax(r[:, :-1], axis=1)).statistic
      rhos.append(0.0 if np.isnan(rho) else rho)
  skipped = sum(1 for r in rows if len(r) < 3 or r.shape[1] < 2)
  assert got['tokens'] == len(probs) and got['positions'] == len(coverage)
  assert got['entropy'] == pytest.approx(entropy.mean(), rel=1e-12)
  assert got['max_weight'] == pytest.approx(maxima.mean(), rel=1e-12)
  assert got['coverage_deviation'] == pytest.approx(coverage.mean(), rel=1e-12)
  assert got['monotonicity'] == pytest.approx(np.mean(rhos), rel=1e-12)
  assert (got['sentences'], got['skipped']) == (len(rhos), skipped)
  # ... and the list functions on the same conventions agree.
  assert got['entropy'] == pytest.approx(measures.attention_entropy(rows)['entropy'], rel=1e-12)
  assert got['max_weight'] == pytest.approx(measures.attention_max_weight(rows)['max_weight'], rel=1e-12)
  assert got['coverage_deviation'] == pytest.approx(measures.coverage_deviation(sentences)['coverage_deviation'])
  assert got['monotonicity'] == pytest.approx(
    measures.attention_monotonicity([r[:, :-1] for r in rows])['monotonicity']
  )


def test_attention_statistics_of_uniform_attention_are_its_closed_forms():
  # Score `none`: every valid position weighs 1/S. T steps (EOS included) over S positions (EOS included).
  stats = measures.AttentionStatistics()
  shapes = [(6, 4), (5, 8), (9, 3)]
  for t, s in shapes:
    stats.add(np.full((t, s), 1.0 / s))
  got = stats.result()
  tokens = sum(t - 1 for t, _ in shapes)
  assert got['entropy'] == pytest.approx(sum((t - 1) * np.log(s) for t, s in shapes) / tokens)
  assert got['normalized'] == pytest.approx(1.0)
  assert got['max_weight'] == pytest.approx(sum((t - 1) / s for t, s in shapes) / tokens)
  positions = sum(s for _, s in shapes)
  assert got['coverage_deviation'] == pytest.approx(sum(s * abs(t / s - 1) for t, s in shapes) / positions)
  assert (got['monotonicity'], got['sentences'], got['undefined']) == (0.0, 3, 3)
  # A greedy output the length budget cut off has no EOS row: every row counts.
  cut = measures.AttentionStatistics()
  cut.add(np.full((4, 2), 0.5), ends_with_eos=False)
  assert cut.result()['tokens'] == 4 and measures.AttentionStatistics().result()['entropy'] is None


def test_repetition_rate_on_hand_made_strings():
  assert measures.has_repeated_ngram('a b c d a b c d a b c d'.split())
  assert not measures.has_repeated_ngram('a b c d a b c d'.split())  # twice only
  assert measures.has_repeated_ngram('x x x x x x'.split())  # overlapping: at 0, 1 and 2
  assert not measures.has_repeated_ngram('x x x x x'.split())
  assert not measures.has_repeated_ngram([])
  texts = ['y no se a sus y no se a sus y no se a sus', 'the cat sat', 'x x x x x x', 'a b c d a b c d']
  assert measures.repetition_rate(texts) == 0.5
  assert measures.repetition_rate([]) == 0.0


def _corpus(n=60, seed=0):
  """Sources of 5, 15 or 65 words, references of 8-12 words, and three systems: `none` (unrelated
  words), `dot` (none with one sentence changed) and `additive` (the references, a word dropped)."""
  rng = np.random.default_rng(seed)
  vocab = [f'w{i}' for i in range(40)]
  words = lambda k: ' '.join(rng.choice(vocab, size=k))
  sources = [words(int(rng.choice([5, 15, 65]))) for _ in range(n)]
  references = [words(int(rng.integers(8, 13))) for _ in range(n)]
  none = [words(int(rng.integers(8, 13))) for _ in range(n)]
  dot = list(none)
  dot[0] = references[0]
  additive = [' '.join(r.split()[1:]) for r in references]
  return (
    sources,
    references,
    {'none/bahdanau/global': none, 'dot/bahdanau/global': dot, 'additive/bahdanau/global': additive},
  )


def _attention(a):
  return {
    **measures.attention_monotonicity([a]),
    **measures.attention_entropy([a]),
    **measures.attention_max_weight([a]),
    **measures.coverage_deviation([a]),
  }


def _results(sources, references, systems):
  """What analyze_run would return for these translations (only the keys the tables read), and the texts
  add_significance takes. `systems` maps a variant to one list of hypotheses per seed."""
  results, texts = [], []
  for name, seeds in systems.items():
    scores = [evaluation.bleu_chrf(h, references) for h in seeds]
    by_seed = [evaluation.bleu_by_length(h, references, sources) for h in seeds]
    results.append(
      {
        'variant': name,
        'seeds': list(range(len(seeds))),
        'attends': not name.startswith('none/'),  # as analyze_run sets it from the score
        'greedy_bleu': [x['bleu'] for x in scores],
        'greedy_chrf': [x['chrf'] for x in scores],
        'greedy_chrfpp': [x['chrfpp'] for x in scores],
        'greedy_repetition': [measures.repetition_rate(h) for h in seeds],
        'greedy_bleu_by_length': scoring.pool_by_length(by_seed),
        'attention': _attention(np.full((4, 4), 0.25) if name.startswith('none/') else np.eye(4)),
      }
    )
    texts.append({'hypotheses': {'greedy': seeds}, 'references': references, 'sources': sources})
  return results, texts


def _one_seed(systems):
  return {name: [hyps] for name, hyps in systems.items()}


NONE, DOT, ADDITIVE = 'none/bahdanau/global', 'dot/bahdanau/global', 'additive/bahdanau/global'
NOT_RANKED = 'not ranked with 1 seed'


def _leave_one_out(hypotheses, refs, keep=None, cache=None):
  """The delete-one jackknife over sentences from scratch: sacrebleu's corpus BLEU of `hypotheses` with each
  sentence of `keep` (default: all) left out in turn. `cache` (a dict) saves recomputing equal outputs."""
  keep = list(range(len(refs))) if keep is None else [int(i) for i in keep]
  key = (tuple(hypotheses), tuple(keep))
  if cache is not None and key in cache:
    return cache[key]
  out = np.array(
    [
      sacrebleu.corpus_bleu([hypotheses[j] for j in keep if j != i], [[refs[j] for j in keep if j != i]]).score
      for i in keep
    ]
  )
  if cache is not None:
    cache[key] = out
  return out


def _jackknife_variance(values):
  """Efron's jackknife variance from N leave-one-out values: (N - 1) / N times the sum of squared deviations."""
  values = np.asarray(values, float)
  return (len(values) - 1) / len(values) * float(np.sum((values - values.mean()) ** 2))


def _answer(interval, delta, within=None):
  """The page's rule, written out: greater when the interval excludes 0, equivalent when the equivalence
  interval (TOST's 1 - 2 level one, `within`; the interval itself if not given) lies inside (-delta, delta)."""
  lo, hi = interval
  if lo > 0 or hi < 0:
    return 'greater'
  lo, hi = interval if within is None else within
  return 'equivalent' if -delta < lo and hi < delta else 'undecided'


def _verdict_groups(line):
  """{'beat it': 'variant score (adjusted p ...), ...', ...} of one line of tables.attention_verdict."""
  return dict(part.split(': ', 1) for part in line.rstrip('.').split('; ')[1:])


def test_one_seed_is_tested_on_the_sentences_alone_and_ranks_nothing():
  """One seed per variant: every contrast of the family (every pair) is judged against the test sentences alone,
  a normal test on the jackknife's standard error of the difference (recomputed here with sacrebleu, each sentence
  left out in turn), its interval the simultaneous one; nothing is ranked."""
  sources, refs, systems = _corpus()
  results, texts = _results(sources, refs, _one_seed(systems))
  run_verdicts.add_significance(results, texts)
  for r in results:
    s = r['significance']
    # A baseline (none does not attend) and two shared length buckets: 0.2 of alpha for the bucket contrasts
    # against it, the rest for the family of every pair.
    assert (s['baseline'], s['alpha'], s['contrasts'], s['family_size'], s['delta']) == (NONE, 0.05, 'all', 3, 0.5)
    assert s['length_level'] == pytest.approx(0.01) and s['level'] == pytest.approx(0.04) and s['ranked'] is False
  by_name = {r['variant']: r['significance'] for r in results}
  pairs = {(p['a'], p['b']): p for s in by_name.values() for p in s['pairs']}
  # Each pair once, the higher mean first, listed under that run (none scores lowest: it leads none).
  assert sorted(pairs) == sorted([(DOT, NONE), (ADDITIVE, NONE), (ADDITIVE, DOT)]) and by_name[NONE]['pairs'] == []
  assert all(p['a'] == name for name, s in by_name.items() for p in s['pairs'])
  cache = {}
  loo = {name: _leave_one_out(hyps, refs, cache=cache) for name, hyps in systems.items()}
  bleu = {name: sacrebleu.corpus_bleu(hyps, [refs]).score for name, hyps in systems.items()}
  level = 0.04 / 3  # each contrast's share of the family's level (Bonferroni)
  z = scipy.stats.norm.ppf(1 - level / 2)
  for (a, b), p in pairs.items():
    d, se = bleu[a] - bleu[b], np.sqrt(_jackknife_variance(loo[a] - loo[b]))
    assert p['difference'] == pytest.approx(d) and p['se'] == pytest.approx(se) and p['df'] == float('inf')
    assert p['level'] == pytest.approx(level) and p['seeds'] == [1, 1]
    assert p['p_value'] == pytest.approx(2 * scipy.stats.norm.sf(abs(d) / se), rel=1e-6)
    assert p['interval'] == pytest.approx([d - z * se, d + z * se])
    assert p['p_adjusted'] == pytest.approx(min(1.0, p['p_value'] * 3 * 0.05 / 0.04))
    assert p['p_equivalent_adjusted'] is None and p['test_variance'] is None
    assert p['decision'] == 'unranked' and p['ranked'] is False and p['seeds_to_decide'] is None
    assert p['verdict'] == f'{a} vs {b}: {NOT_RANKED}'
  # The sentences alone tell additive from none but not dot (none with one sentence changed): neither is ranked.
  assert pairs[(ADDITIVE, NONE)]['interval'][0] > 0
  assert pairs[(DOT, NONE)]['interval'][0] < 0 < pairs[(DOT, NONE)]['interval'][1]
  words = np.array([len(s.split()) for s in sources])
  assert words[0] == 65  # dot's changed sentence: dot is none on every sentence of 1-20
  for r in results:
    s, name = r['significance'], r['variant']
    corpus = s['corpus']
    assert corpus['per_seed'] == pytest.approx(r['greedy_bleu']) and corpus['mean'] == pytest.approx(bleu[name])
    assert corpus['sentences'] == 60 and corpus['sd'] is None and corpus['ci'] is None  # one seed: no spread
    half = scipy.stats.norm.ppf(0.975) * np.sqrt(_jackknife_variance(loo[name]))
    assert corpus['interval'] == pytest.approx([bleu[name] - half, bleu[name] + half])
    assert [b['bucket'] for b in s['by_length']] == ['1-20', '>60']  # 1-10 has fewer than 20 sentences
    for bucket, row in zip(s['by_length'], r['greedy_bleu_by_length']):
      assert bucket['bleu'] == pytest.approx(row['bleu']) and bucket['sentences'] == row['sentences']
      if name == NONE:  # the baseline is not tested against itself
        assert bucket['p_value'] is None and bucket['decision'] is None
        continue
      # Against none on the bucket's sentences: 2 buckets x 2 variants tested, at 0.01 of the page's alpha.
      keep = np.nonzero(words <= 20 if bucket['bucket'] == '1-20' else words > 60)[0]
      d = bucket['bleu'] - sacrebleu.corpus_bleu([systems[NONE][i] for i in keep], [[refs[i] for i in keep]]).score
      diff = _leave_one_out(systems[name], refs, keep, cache) - _leave_one_out(systems[NONE], refs, keep, cache)
      se = np.sqrt(_jackknife_variance(diff))
      want = (1.0 if d == 0 else 0.0) if se == 0 else 2 * scipy.stats.norm.sf(abs(d) / se)
      assert bucket['p_value'] == pytest.approx(want, rel=1e-6)
      assert bucket['p_adjusted'] == pytest.approx(min(1.0, want * 4 * 0.05 / 0.01))
      assert bucket['decision'] == 'unranked' and bucket['contrast_interval'] is None
  dot_short = by_name[DOT]['by_length'][0]
  assert dot_short['bleu'] == by_name[NONE]['by_length'][0]['bleu'] and dot_short['p_value'] == 1.0  # the same outputs


def test_a_run_that_translated_other_sentences_is_compared_with_nothing():
  """Runs are compared only with runs that translated the same sentences: one alone gets its own interval, no
  baseline and no contrasts; the others still form their family."""
  sources, refs, systems = _corpus()
  _, other_refs, _ = _corpus(seed=1)
  results, texts = _results(sources, refs, _one_seed({NONE: systems[NONE], DOT: systems[DOT]}))
  extra, extra_texts = _results(sources, other_refs, _one_seed({ADDITIVE: systems[ADDITIVE]}))
  run_verdicts.add_significance(results + extra, texts + extra_texts)
  alone = extra[0]['significance']
  assert alone['baseline'] is None and alone['pairs'] == [] and alone['length_level'] == 0.0
  assert alone['corpus']['mean'] == pytest.approx(sacrebleu.corpus_bleu(systems[ADDITIVE], [other_refs]).score)
  assert all(b['p_value'] is None and b['decision'] is None for b in alone['by_length'])
  (pair,) = results[1]['significance']['pairs']
  assert (pair['a'], pair['b']) == (DOT, NONE) and results[1]['significance']['family_size'] == 1


def _seeds(systems, k=3):
  """k seeds per variant: seed j's output with sentences 2j + 1 and 2j + 2 taken from the next variant's (none's
  from dot's, which are none's own there, so none's seeds agree; dot's from additive's; additive's from none's)."""
  names = list(systems)
  out = {}
  for v, name in enumerate(names):
    other = systems[names[(v + 1) % len(names)]]
    out[name] = [
      [other[i] if i in (2 * j + 1, 2 * j + 2) else h for i, h in enumerate(systems[name])] for j in range(k)
    ]
  return out


def test_analysis_table_and_verdicts_with_one_seed():
  sources, references, systems = _corpus()
  results, texts = _results(sources, references, _one_seed(systems))
  run_verdicts.add_significance(results, texts)
  table = tables.analysis_table(results)
  assert table.count(formatting.ONE_SEED) == 1  # what one seed means is said once, in the legend
  lines = table.split('\n\n')[0].splitlines()
  head = [c.strip() for c in lines[0].strip('|').split('|')]
  assert head == [
    'variant',
    'seeds',
    'greedy BLEU per seed',
    'greedy BLEU',
    '95% interval',
    'p vs none/bahdanau/global',
    'chrF',
    'chrF++',
    'BLEU, sources 1-20 words',
    'BLEU, sources >60 words',
    'monotonicity',
    'entropy (norm.)',
    'max weight',
    'coverage dev.',
    'repetition %',
  ]
  rows = {line.split('|')[1].strip(): [c.strip() for c in line.strip('|').split('|')] for line in lines[2:]}
  additive = rows[ADDITIVE]
  by_name = {r['variant']: r for r in results}
  dot_pair = next(p for p in by_name[DOT]['significance']['pairs'] if p['b'] == NONE)
  # p vs none: the contrast's unadjusted p (pinned to the jackknife above)
  assert rows[NONE][5] == 'baseline' and additive[5] == '< 0.001' and rows[DOT][5] == f"{dot_pair['p_value']:.3f}"
  assert additive[3] == f"{by_name[ADDITIVE]['greedy_bleu'][0]:.2f}" and ' ± ' not in additive[3]
  assert additive[4].startswith('[') and not any(c.endswith('*') for r in rows.values() for c in r)  # one seed: no *
  assert rows[DOT][10] == '1.00' and rows[DOT][11] == '0.00 (0.00)'
  assert rows[NONE][10] == '0.00 (1/1 const.)' and rows[NONE][11] == '1.39 (1.00)'
  assert rows[DOT][12:14] == ['1.00', '0.00']  # one-hot rows, each position attended once
  assert rows[NONE][12:14] == ['0.25', '0.00']  # 4 rows of 1/4 over 4 positions
  assert '± 0.00' not in table and 'the variants are not ranked' in table
  pair_row = next(line for line in table.splitlines() if line.startswith(f'| {ADDITIVE} − {NONE} | +'))
  cells = [c.strip() for c in pair_row.strip('|').split('|')]
  assert cells[4:] == [
    '< 0.001',
    '–',
    f'{ADDITIVE} vs {NONE}: ' + NOT_RANKED,
    '–',
    '–',
  ]  # no equivalence test, no plan, no ASO
  assert 'interval and p from the test sentences alone (one seed: the seeds cannot be tested)' in table
  assert 'The family is every pair of the variants (3 contrast(s))' in table
  assert '(0.04 for the corpus contrasts, 0.01 for the longest-sentence contrasts against the baseline)' in table
  assert 'Holm' not in table and 'bootstrap' not in table and 'Seeds to decide the' not in table
  verdict = tables.attention_verdict(results)
  assert 'Sources of >60 words: none/bahdanau/global reaches BLEU' in verdict and 'nothing is ranked' in verdict
  for line in verdict.strip().splitlines()[1:]:  # one seed ranks nothing: scores and sentence-level p only
    assert line.endswith('; not ranked with 1 seed.') and 'beat it' not in line and 'equivalent' not in line, line
    assert f'{ADDITIVE} ' in line and f'{DOT} ' in line and '(adjusted p ' in line


def test_three_seeds_rank_by_simultaneous_intervals():
  """Three seeds, numbered 0-2 in every variant: each contrast is the paired t over the per-seed differences with
  the test set's variance of those differences added (scipy's t, K - 1 = 2 degrees of freedom), its interval the
  simultaneous one at level 0.04 / 3; 'A > B' exactly when that interval excludes 0, which is exactly when the
  adjusted p = p * 3 * 0.05 / 0.04 is below 0.05; 'A ≈ B' by TOST at 0.04 / 3 per side. The same translations
  give the same dicts again (no random seed)."""
  sources, refs, systems = _corpus()
  per_seed = _seeds(systems)
  results, texts = _results(sources, refs, per_seed)
  run_verdicts.add_significance(results, texts)
  bleu = {name: [sacrebleu.corpus_bleu(h, [refs]).score for h in hyps] for name, hyps in per_seed.items()}
  assert all(r['significance']['ranked'] and r['significance']['family_size'] == 3 for r in results)
  pairs = {(p['a'], p['b']): p for r in results for p in r['significance']['pairs']}
  assert sorted(pairs) == sorted([(DOT, NONE), (ADDITIVE, NONE), (ADDITIVE, DOT)])
  t = scipy.stats.t
  level = 0.04 / 3
  for (a, b), p in pairs.items():
    per_seed_d = np.array(bleu[a]) - np.array(bleu[b])  # seed k of a against seed k of b
    d, se, df = per_seed_d.mean(), p['se'], p['df']
    assert p['difference'] == pytest.approx(d) and p['seeds'] == [3, 3] and p['level'] == pytest.approx(level)
    assert p['design'] == 'paired'
    # The test set's variance only adds: se^2 is the seeds' plus it, df the seeds' (K - 1), at most sentences - 1.
    assert p['test_variance'] >= 0 and se**2 == pytest.approx(np.var(per_seed_d, ddof=1) / 3 + p['test_variance'])
    assert df == 2
    assert p['p_value'] == pytest.approx(2 * t.sf(abs(d) / se, df))
    seeds_only = scipy.stats.ttest_rel(bleu[a], bleu[b]).pvalue  # the test set held fixed
    assert p['p_value'] >= seeds_only * (1 - 1e-9)
    half = t.ppf(1 - level / 2, df) * se
    assert p['interval'] == pytest.approx([d - half, d + half])
    assert p['p_adjusted'] == pytest.approx(min(1.0, p['p_value'] * 3 * 0.05 / 0.04))
    p_equivalent = max(t.sf((d + 0.5) / se, df), t.cdf((d - 0.5) / se, df))  # Schuirmann's two one-sided tests
    assert p['p_equivalent_adjusted'] == pytest.approx(min(1.0, p_equivalent * 3 * 0.05 / 0.04))
    assert p['decision'] == _answer(p['interval'], 0.5, p['equivalence_interval']) and p['ranked'] == (
      p['decision'] == 'greater'
    )
    assert (p['decision'] == 'greater') == (p['p_adjusted'] < 0.05)
    assert (p['decision'] == 'equivalent') == (p['p_equivalent_adjusted'] < 0.05)
  # The test set's share of dot − none from scratch: the jackknife variance over sentences of the difference of
  # the seeds' mean leave-one-out BLEU, less each variant's own sentence noise (its seeds' leave-one-out BLEU
  # about their mean, over K - 1).
  cache = {}
  loo = {name: np.array([_leave_one_out(h, refs, cache=cache) for h in per_seed[name]]) for name in (DOT, NONE)}
  # Paired: of the per-seed differences' leave-one-out rows, less their own noise about their mean, over K - 1.
  diff = loo[DOT] - loo[NONE]
  own = np.mean([_jackknife_variance(row) for row in diff - diff.mean(0)]) / 2
  shared = max(_jackknife_variance(diff.mean(0)) - own, 0.0)
  assert pairs[(DOT, NONE)]['test_variance'] == pytest.approx(shared)
  assert pairs[(ADDITIVE, NONE)]['verdict'] == f'{ADDITIVE} > {NONE}' and pairs[(ADDITIVE, NONE)]['ranked']
  assert pairs[(ADDITIVE, DOT)]['verdict'] == f'{ADDITIVE} > {DOT}'
  # dot is none with three sentences changed per seed: three seeds cannot decide it; the plan says how many would.
  undecided = pairs[(DOT, NONE)]
  assert undecided['decision'] == 'undecided' and undecided['verdict'] == f'{DOT} vs {NONE}: undecided with 3 seeds'
  plan = undecided['seeds_to_decide']
  # planned at the page's seed sd: every variant's seed variance pooled, 3 x 2 = 6 degrees of freedom
  page = np.sqrt(np.mean([np.var(bleu[v], ddof=1) for v in (NONE, DOT, ADDITIVE)]))
  assert plan['level'] == pytest.approx(level) and plan['delta'] == 0.5 and plan['sd'] == pytest.approx(page)
  assert plan['sd_upper'] == pytest.approx(page * np.sqrt(6 / scipy.stats.chi2.ppf(0.05, 6)))
  assert 3 < plan['observed'] <= plan['observed_upper'] <= 50
  assert all(p['seeds_to_decide'] is None for p in pairs.values() if p['decision'] != 'undecided')

  table = tables.analysis_table(results)
  print(table)
  rows = {
    line.split('|')[1].strip(): [c.strip() for c in line.strip('|').split('|')]
    for line in table.split('\n\n')[0].splitlines()[2:]
  }
  additive = rows[ADDITIVE]
  assert additive[1] == '3' and additive[2] == ' / '.join(f'{b:.2f}' for b in bleu[ADDITIVE])
  assert additive[3] == f'{np.mean(bleu[ADDITIVE]):.2f} ± {np.std(bleu[ADDITIVE], ddof=1):.2f}'
  # The longest buckets against none: 4 contrasts (2 buckets x 2 variants) at 0.01 of alpha; * where decided.
  base = {b['bucket']: b for b in results[0]['significance']['by_length']}
  for r in results[1:]:
    for column, entry in zip((8, 9), r['significance']['by_length']):
      lo, hi = entry['contrast_interval']
      assert (lo + hi) / 2 == pytest.approx(entry['bleu'] - base[entry['bucket']]['bleu'])
      assert entry['p_adjusted'] == pytest.approx(min(1.0, entry['p_value'] * 4 * 0.05 / 0.01))
      assert entry['decision'] == _answer(entry['contrast_interval'], 0.5, entry['equivalence_interval'])
      assert (entry['decision'] == 'greater') == (entry['p_adjusted'] < 0.05)
      assert rows[r['variant']][column].endswith(' *') == (entry['decision'] == 'greater')
  assert additive[8].endswith(' *') and additive[9].endswith(' *')  # far above none on both
  verdict = tables.attention_verdict(results)  # with seeds, the longest sentences rank against none
  assert (
    'a t over seeds (paired where the seeds match)' in verdict
    and 'not ranked' not in verdict
    and "0.01 of the page's alpha" in verdict
  )
  for line in verdict.strip().splitlines()[1:]:
    groups = _verdict_groups(line)
    assert groups['beat it'].startswith(f'{ADDITIVE} ') and groups['undecided'].startswith(f'{DOT} '), line
  pairs_text = pair_table.pairwise_text(results)
  assert pairs_text.startswith(
    '| pair | difference | simultaneous interval | p | adjusted p (≠ 0) | adjusted p (within ±δ) | verdict | '
    'seeds to decide |'
  )
  assert 'Greedy test BLEU, 3 seed(s) per variant' in pairs_text and '(Bonferroni: 0.04 over 3)' in pairs_text
  assert not any(old in pairs_text for old in ('Holm', 'bootstrap', 'not distinguishable'))
  row = next(line for line in pairs_text.splitlines() if line.startswith(f'| {DOT} − {NONE} |'))
  cells = [c.strip() for c in row.strip('|').split('|')]
  assert cells[6] == undecided['verdict'] and cells[7] == (
    str(plan['observed'])
    if plan['observed'] == plan['observed_upper']
    else f"{plan['observed']}–{plan['observed_upper']}"
  )
  assert 'Seeds to decide the 1 undecided contrast(s)' in pairs_text
  k = plan['observed']
  fresh = range(3, 3 + k)  # seeds 0-2 were looked at: the plan trains new ones
  assert f'--config.train.seeds={",".join(map(str, fresh)) if k <= 12 else f"$(seq -s, 3 {2 + k})"}' in pairs_text
  # No random seed: the same translations give the same statistics, to the last bit.
  again, again_texts = _results(sources, refs, per_seed)
  run_verdicts.add_significance(again, again_texts)
  assert [r['significance'] for r in again] == [r['significance'] for r in results]


def test_a_declared_family_and_margin_change_the_verdicts_not_the_tests():
  """--contrasts=none: each variant against none only (2 contrasts, each at 0.04 / 2); the tests are those of
  the family of every pair, the intervals narrower. --delta=100: an interval inside ±100 is 'equivalent', one
  above 0 and inside it 'A > B (by less than 100)', on the corpus and on the length buckets alike."""
  sources, refs, systems = _corpus()
  per_seed = _seeds(systems)
  results, texts = _results(sources, refs, per_seed)
  run_verdicts.add_significance(results, texts)
  every = {(p['a'], p['b']): p for r in results for p in r['significance']['pairs']}
  declared, declared_texts = _results(sources, refs, per_seed)
  run_verdicts.add_significance(declared, declared_texts, contrasts=NONE, delta=100.0)
  s = declared[0]['significance']
  assert (s['contrasts'], s['family_size'], s['delta'], s['level']) == (NONE, 2, 100.0, pytest.approx(0.04))
  against = {(p['a'], p['b']): p for r in declared for p in r['significance']['pairs']}
  assert sorted(against) == sorted([(DOT, NONE), (ADDITIVE, NONE)])  # additive − dot is not in this family
  for key, p in against.items():
    q = every[key]
    assert (p['p_value'], p['se'], p['df']) == (q['p_value'], q['se'], q['df'])  # the same test
    half = scipy.stats.t.ppf(1 - 0.02 / 2, p['df']) * p['se']
    assert p['level'] == pytest.approx(0.02)
    assert p['interval'] == pytest.approx([p['difference'] - half, p['difference'] + half])
    assert p['interval'][1] - p['interval'][0] < q['interval'][1] - q['interval'][0]
    assert p['p_adjusted'] == pytest.approx(min(1.0, p['p_value'] * 2 * 0.05 / 0.04))
    assert p['decision'] == _answer(p['interval'], 100.0, p['equivalence_interval'])
  dot = against[(DOT, NONE)]  # undecided within ±0.5, inside ±100
  assert dot['decision'] == 'equivalent' and dot['verdict'] == f'{DOT} ≈ {NONE} (equivalent within ±100)'
  assert dot['p_equivalent_adjusted'] < 0.05 and dot['seeds_to_decide'] is None and not dot['ranked']
  assert against[(ADDITIVE, NONE)]['verdict'] == f'{ADDITIVE} > {NONE} (by less than 100)'
  note = pair_table.pairs_note(declared)
  assert 'The family is the declared contrasts none/bahdanau/global (2 contrast(s))' in note
  assert 'within ±100 BLEU' in note and '(Bonferroni: 0.04 over 2)' in note
  # The bucket contrasts take the margin too; the attention verdict groups them by their answers.
  labels = {'greater': 'beat it', 'equivalent': 'equivalent to it', 'undecided': 'undecided'}
  verdict = tables.attention_verdict(declared).strip().splitlines()[1:]
  for line, bucket in zip(verdict, ('1-20', '>60')):
    groups = _verdict_groups(line)
    for r in declared[1:]:
      entry = next(b for b in r['significance']['by_length'] if b['bucket'] == bucket)
      assert entry['decision'] == _answer(entry['contrast_interval'], 100.0, entry['equivalence_interval'])
      assert f"{r['variant']} {entry['bleu']:.2f}" in groups[labels[entry['decision']]], line
  assert any('equivalent to it' in line for line in verdict)


def test_the_seed_plan_names_the_option_that_trains_more_seeds():
  """The plan under the pair table: for the observed differences and for the hardest, the undecided contrast
  that needs the most seeds, its range (the seed sd's estimate – its upper bound), and the option that trains
  that many fresh seeds, after those already looked at (train.seeds; a sweep axis when each seed trained as its
  own run), as a new experiment, never a second look at the same one; decided contrasts plan nothing."""

  def plan(observed, upper, hardest, hardest_upper):
    out = {'level': 0.02, 'delta': 0.5, 'sd': 0.8, 'sd_upper': 1.9, 'observed': observed}
    return out | {'observed_upper': upper, 'hardest': hardest, 'hardest_upper': hardest_upper}

  pairs = [
    {'a': 'dot', 'b': 'additive', 'seeds_to_decide': plan(9, 14, 20, 35)},
    {'a': 'general', 'b': 'additive', 'seeds_to_decide': plan(14, 30, 20, 40)},
    {'a': 'dot', 'b': 'general', 'seeds_to_decide': None},  # decided
  ]
  results = [{'variant': 'dot', 'significance': {'pairs': pairs}}] + [{'variant': v} for v in ('additive', 'general')]
  results = [r | {'seeds': [0, 1, 2]} for r in results]
  together = pair_table.seed_plan_text(results).splitlines()
  assert together[0] == 'Seeds to decide the 2 undecided contrast(s) (80 % probability each, at the family level):'
  assert together[1] == (
    '  if the observed differences are true: 14–30 seeds per variant (general − additive needs the most; seed sd '
    '0.80, upper bound 1.90): --config.train.seeds=$(seq -s, 3 16)'
  )
  assert together[2].startswith('  whatever the differences: 20–40 seeds per variant (general − additive needs')
  assert together[2].endswith('--config.train.seeds=$(seq -s, 3 22)')
  assert 'a second look that no error budget covers' in together[3] and 'from seed 3' in together[3]
  assert together[3].endswith(
    '--config.sweep.rounds=6 --config.sweep.seeds_per_round=5 --config.sweep.first_seed=3 '
    '(docs/design.md, "Seeds until decided").'
  )  # 30 seeds, general − additive's upper plan
  as_runs = pair_table.seed_plan_text([{**r, 'seeds_as_runs': True} for r in results])
  assert '--config.sweep.axes="train.seeds=$(seq -s, 3 16)"' in as_runs and '--config.train.seeds' not in as_runs
  assert pair_table.seeds_option(5) == '--config.train.seeds=0,1,2,3,4'
  assert pair_table.seeds_option(3, first=5) == '--config.train.seeds=5,6,7'
  # Out of reach of 1000 seeds (None) is named; past 50 seeds no option is printed; a missing bound reads
  # 'to more than 1000'.
  pairs[0]['seeds_to_decide'] = plan(None, None, 60, None)
  far = pair_table.seed_plan_text(results).splitlines()
  assert far[1] == '  if the observed differences are true: out of reach of 1000 seeds per variant in dot − additive'
  assert far[2].startswith('  whatever the differences: 60 to more than 1000 seeds per variant (dot − additive needs')
  assert far[2].endswith(')') and '--config.train.seeds' not in far[2]
  cell = {'difference': 0.3, 'interval': [-1, 2], 'p_value': 0.4, 'p_adjusted': 1.0, 'p_equivalent_adjusted': 1.0}
  cell |= {'verdict': 'general vs additive: undecided with 3 seeds', 'decision': 'undecided'}
  assert pair_table.contrast_cells({**pairs[1], **cell})[7] == '14–30'  # the table's cell: the same range
  assert pair_table.seed_plan_text([{'variant': 'dot', 'significance': {'pairs': pairs[2:]}}]) == ''


def test_sweep_results_table_and_csv():
  rows = [
    {'variant': 'a', 'seeds': [0], 'test_bleu': [21.81], 'test_chrf': [50.0], 'test_perplexity': [9.0]},
    {'variant': 'b', 'seeds': [0, 1, 2], 'test_bleu': [20.0, 22.0, 24.0], 'test_chrf': [49, 50, 51]},
  ]
  rows[1]['test_chrfpp'] = [47.0, 48.0, 49.5]  # a run trained before chrF++ was reported has none: '–'
  for r in rows:
    r.setdefault('test_perplexity', [8.0, 9.0, 10.0])
    r.update(parameters=1000, tokens_per_s_per_seed=10.0, train_seconds=60.0)
  md = sweep_tables.results_table(rows)
  lines = md.splitlines()
  a, b = ([c.strip() for c in line.strip('|').split('|')] for line in lines[2:4])
  assert a[2:6] == ['21.81', '21.81', '–', '–'] and '± 0.00' not in md
  half = 4.302652729911275 * 2.0 / np.sqrt(3)
  assert b[2:6] == ['20.00 / 22.00 / 24.00', '22.00', '2.00', f'[{22 - half:.2f}, {22 + half:.2f}]']
  assert lines[0].split(' | ')[6:9] == ['test chrF', 'test chrF++', 'test perplexity']
  assert a[6:8] == ['50.00', '–'] and b[6:8] == ['50.00 ± 1.00', '48.17 ± 1.26']
  assert 'not ranked' in lines[-1]
  csv = sweep_tables.results_csv(rows).splitlines()
  assert csv[1].split(',')[2:7] == ['21.8100', '21.8100', '', '', '']
  assert csv[2].split(',')[2:5] == ['20.0000 22.0000 24.0000', '22.0000', '2.0000']
  assert csv[1].split(',')[9:11] == ['', ''] and csv[2].split(',')[9:11] == ['48.1667', '1.2583']


def test_runs_of_one_seed_each_pool_into_one_row_per_variant():
  """A sweep over train.seeds trains a run per seed: the table pools them (seeds and per-seed lists in run order,
  minutes summed, tokens/s averaged) and ranks them as one variant; a metric one run predates leaves the cell empty."""

  def run(name, seed, bleu, chrfpp=None):
    row = {'variant': f'{name}/seeds={seed}', 'seeds': [seed], 'test_bleu': [bleu], 'test_chrf': [50.0 + seed]}
    row.update(test_perplexity=[9.0], parameters=1000, tokens_per_s_per_seed=10.0 * (seed + 1), train_seconds=60.0)
    return row | ({'test_chrfpp': [chrfpp]} if chrfpp is not None else {})

  rows = [run('dot', 0, 20.0, 48.0), run('general', 1, 23.0, 49.0), run('dot', 1, 22.0), run('dot', 2, 24.0, 47.0)]
  rows.append({**run('concat', 0, 21.0, 48.0), 'variant': 'concat'})
  dot, general, concat = sweep_tables.pool_seed_rows(rows)
  assert (dot['variant'], dot['seeds'], dot['test_bleu']) == ('dot', [0, 1, 2], [20.0, 22.0, 24.0])
  assert dot['test_chrf'] == [50.0, 51.0, 52.0] and 'test_chrfpp' not in dot  # seed 1's run predates chrF++
  assert dot['train_seconds'] == 180.0 and dot['tokens_per_s_per_seed'] == pytest.approx(20.0)
  assert general['variant'] == 'general' and general['seeds'] == [1] and concat['variant'] == 'concat'
  assert rows[0]['test_bleu'] == [20.0]  # the inputs are not changed
  md = sweep_tables.results_table([dot, general])
  half = 4.302652729911275 * 2.0 / np.sqrt(3)
  assert f'| dot | 3 | 20.00 / 22.00 / 24.00 | 22.00 | 2.00 | [{22 - half:.2f}, {22 + half:.2f}] |' in md
  with pytest.raises(InputError, match=r'seed\(s\) \[0\] appear in more than one run'):
    sweep_tables.pool_seed_rows([rows[0], rows[0]])


def test_chrfpp_is_sacrebleus_chrf_with_word_bigrams():
  """chrF++ adds word unigrams and bigrams to chrF's character n-grams: a one-letter slip in each sentence
  keeps most character n-grams but loses a word and two word bigrams, so it costs chrF++ more than chrF;
  an exact output scores 100 in both."""
  refs = ['el perro negro come la carne', 'la casa es grande']
  exact = evaluation.bleu_chrf(refs, refs)
  assert exact['chrf'] == pytest.approx(100.0) and exact['chrfpp'] == pytest.approx(100.0)
  slipped = ['el pero negro come la carne', 'la cosa es grande']
  s = evaluation.bleu_chrf(slipped, refs)
  assert s['chrfpp'] < s['chrf'] - 3  # 77.6 against 81.7
  assert s['chrfpp'] == pytest.approx(sacrebleu.CHRF(word_order=2).corpus_score(slipped, [refs]).score)


def test_bleu_chrf_reads_each_reference_list_once_and_scores_as_sacrebleu():
  """The metrics built with a test set's references (kept for the last few lists) score every output as fresh
  sacrebleu metrics do, whichever list came before; a list of other length is refused."""
  sets = [[f'the house {i} is big', f'a dog {i} barks at night', 'el perro negro'] for i in range(6)]
  outputs = [['the house is big', 'a dog barks', 'el perro'], ['house big', 'the dog barks at night 3', '']]
  for refs in [*sets, sets[0], sets[5], sets[0]]:  # more lists than are kept, then old ones again
    for hyps in outputs:
      got, fresh = evaluation.bleu_chrf(hyps, refs), sacrebleu.BLEU()
      assert got['bleu'] == fresh.corpus_score(hyps, [refs]).score
      assert got['chrf'] == sacrebleu.CHRF().corpus_score(hyps, [refs]).score
      assert got['chrfpp'] == sacrebleu.CHRF(word_order=2).corpus_score(hyps, [refs]).score
      assert got['bleu_signature'] == str(fresh.get_signature())
  assert len(translation_scores._SCORERS) <= translation_scores._SCORERS_KEPT
  with pytest.raises(ValueError, match='2 hypotheses for 3 references'):
    evaluation.bleu_chrf(['a', 'b'], sets[0])


def test_length_buckets_merge_the_ones_with_few_sentences():
  # The Bible test split's counts: 9 sentences over 60 words join the 51-60 bucket.
  words = np.array([5] * 44 + [15] * 464 + [25] * 620 + [35] * 304 + [45] * 120 + [55] * 38 + [65] * 9)
  assert evaluation.length_buckets(words) == [(0, 10), (10, 20), (20, 30), (30, 40), (40, 50), (50, 1000)]
  # A small first bucket joins the next; empty buckets vanish; with min_sentences=1 nothing merges.
  words = np.array([5] * 3 + [15] * 30 + [45] * 25)
  assert evaluation.length_buckets(words) == [(0, 20), (40, 50)]
  assert evaluation.length_buckets(words, min_sentences=1) == [(0, 10), (10, 20), (40, 50)]
  rows = evaluation.bleu_by_length(['a b c d'] * 58, ['a b c d'] * 58, [' '.join(['w'] * n) for n in words])
  assert [(r['bucket'], r['sentences']) for r in rows] == [('1-20', 33), ('41-50', 25)]


def test_heatmap_cells_grey_by_weight_and_exact_zeros_pale_blue(tmp_path):
  from attnmt import plots

  w = np.array([[0.0, 1e-6, 0.5, 0.25], [1.0, 0.0, 0.0, 0.0]])
  rgba = plots.heatmap_colors(w)
  np.testing.assert_allclose(rgba[0, 0], plots.EXACT_ZERO_RGBA)
  np.testing.assert_allclose(rgba[1, 1:], [plots.EXACT_ZERO_RGBA] * 3)
  assert rgba[0, 1, :3].min() > 0.99  # a tiny weight is (near) white, not blue
  assert rgba[1, 0, :3].max() < 0.01  # weight 1 is black
  assert rgba[0, 2, 0] < rgba[0, 3, 0] and rgba[0, 2, 0] == rgba[0, 2, 2]  # grey, darker for more weight
  assert os.path.getsize(plots.attention_heatmap(w, list('abcd'), ['x', 'y'], str(tmp_path / 'h.png'))) > 3000
