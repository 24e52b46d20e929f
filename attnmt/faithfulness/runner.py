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

import numpy as np

from attnmt import data, progress
from attnmt.faithfulness import chunks as chunking
from attnmt.faithfulness import jain_wallace, moradi, serrano_smith, summaries, wiegreffe_pinter
from attnmt.errors import ConfigError, InputError
from attnmt.model import interventions, scores
from attnmt.model.seq2seq import EOS
from attnmt.training import evaluation

TESTS = ('moradi', 'serrano_smith', 'jain_wallace', 'wiegreffe_pinter')
MORADI_INTERVENTIONS = 'uniform,permute_moved,zero_max,last,only_max,keep_max_uniform_others'  # with zero_out: their 7
ORDERS = serrano_smith.ORDERS  # attention, random, gradient, gradient x attention: all four of their rankings
EPSILON = 0.01  # Jain & Wallace's margin (TVD of the output distributions)
ADVERSARIAL_SENTENCES = 32  # about 300 decoder steps per seed: every cell has hundreds
ADVERSARIAL_STEPS = 500  # theirs; at 100 the search started from uniform logits rarely reached the bound on the
# Bible models (held at 1-8 % of steps against 50-68 % at 500: docs/results/faithfulness.md)
ADVERSARIAL_CANDIDATES = 5
TRAINED_STEPS = None  # Wiegreffe & Pinter's trained tests: None, as many steps as the run trained (train.num_steps)
TRAIN_SENTENCES = 4000  # ... on the first this many training sentences (unshuffled)
MAX_SENTENCES = 100
ONE_SEED = summaries.ONE_SEED

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
  if isinstance(names, str):
    names = names.split(',')
  elif not isinstance(names, (list, tuple)) or not all(isinstance(n, str) for n in names):
    raise ConfigError(f"explanation tests {names!r}: give names as 'moradi,jain_wallace', a list of names, or 'all'")
  parts = [p.strip() for p in names if p.strip()]
  unknown = [p for p in parts if p not in TESTS and p != 'all']
  if unknown or not parts:
    raise ConfigError(
      f"explanation test(s) {', '.join(unknown) or '(none named)'}: valid are {', '.join(TESTS)}, or all"
    )
  return TESTS if 'all' in parts else tuple(t for t in TESTS if t in parts)


def _counted(**values) -> None:
  """Refuses a count that is not an integer (ConfigError, one line): analyze_run's sizes and steps."""
  for name, value in values.items():
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
      raise ConfigError(f'{name}={value!r}: give a whole number')


def attends(run) -> bool:
  """Whether the score of a run (an inspection.LoadedRun) attends at all."""
  return bool(scores.build(run.cfg).attends)


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
  trained_steps: int | None = TRAINED_STEPS,
  train_sentences: int = TRAIN_SENTENCES,
) -> dict:
  """The selected tests (`parse_tests`) of the module docstring for one run (an inspection.LoadedRun), per seed, on
  the first `max_sentences` sentences of `split` (whole batches; 0: all), `chunk` sentences at a time (the
  gradients are B x T x S x E). `function_words`: the words of the Moradi split (None: faithfulness's shipped
  list). Wiegreffe & Pinter's trained tests (the non-contextual diagnostic and the adversarially trained model,
  summaries.trained) run `trained_steps` optimisation steps (None: the run's own train.num_steps; 0 leaves them
  out) on the first `train_sentences` training sentences, from the first seed, the adversary at the run's own
  learning rate (their code trains it to convergence: a fresh model needs the base's own budget to come close).
  Returns {'variant', 'pool', 'seeds', 'sentences', 'attends', 'split', 'settings', 'tests': {test: {... per-seed
  lists ...} or {'not_applicable': why}}, 'seconds': {test: seconds}} (NaN as None)."""
  tests = parse_tests(tests)
  trained_steps = int(run.config.train.num_steps) if trained_steps is None else trained_steps
  counts = dict(
    max_sentences=max_sentences,
    chunk=chunk,
    seed=seed,
    adversarial_sentences=adversarial_sentences,
    adversarial_steps=adversarial_steps,
    adversarial_candidates=adversarial_candidates,
    trained_steps=trained_steps,
    train_sentences=train_sentences,
  )
  _check(run, split, epsilon, counts)
  batches = chunking.first_batches(list(data.batches(run.prepared, split, run.config.data)), max_sentences)
  records = chunking.records(batches, None)
  score = scores.build(run.cfg)
  out = {
    'variant': run.name,
    'pool': run.pool,
    'seeds': list(run.seeds),
    'sentences': len(records),
    'test_set': chunking.fingerprint(records),
    'attends': bool(score.attends),
    'split': split,
    'settings': {},
    'tests': {},
    'seconds': {},
  }
  if not score.attends:
    out['tests'] = {t: {'not_applicable': f'score {score.name} has no attention'} for t in tests}
    if 'wiegreffe_pinter' in tests:  # a model trained with uniform weights: Wiegreffe & Pinter's own baseline
      out['tests']['wiegreffe_pinter']['trained_uniform_accuracy'] = _uniform_accuracy(run, records, chunk, seed)
    return out
  chosen = interventions.parse(moradi_interventions, seed) if 'moradi' in tests else []
  words = moradi.function_words() if function_words is None else frozenset(function_words)
  listed, marks = moradi.function_token_ids(run.prepared.tgt_tokenizer, words)
  function_ids = listed | marks if listed else frozenset()  # no listed word: the list misses this target language
  counts['adversarial_sentences'] = min(adversarial_sentences, len(records))
  out['settings'] = _settings(tests, split, counts, epsilon, chosen, words, listed, marks, function_ids, orders)
  lists, seconds = _per_seed(run, tests, batches, records, counts, chosen, function_ids, orders, epsilon)
  if 'wiegreffe_pinter' in tests:
    start = time.time()
    lists['wiegreffe_pinter']['seed_variance'] = summaries.seed_variance(run, run.cfg, lists.pop('_base'), chunk)
    if trained_steps:
      lists['wiegreffe_pinter'].update(summaries.trained(run, records, trained_steps, train_sentences, seed))
    seconds['wiegreffe_pinter'] += time.time() - start
  out['tests'] = {t: summaries.plain(lists[t]) for t in tests}
  out['seconds'] = {k: round(v, 2) for k, v in seconds.items()}
  return nan_none(out)


def _check(run, split: str, epsilon, counts: dict) -> None:
  """analyze_run's arguments, each a ConfigError naming it and the fix before anything is computed."""
  _counted(**counts)
  if not (isinstance(epsilon, (int, float)) and 0 < epsilon < 1):
    raise ConfigError(f'epsilon={epsilon!r}: give a TVD bound between 0 and 1 (theirs: 0.01)')
  if split not in run.prepared.tokenized:
    raise ConfigError(f"split {split!r}: valid are {', '.join(run.prepared.tokenized)}")
  at_least_one = ('chunk', 'adversarial_steps', 'adversarial_candidates', 'train_sentences')
  if min(counts[k] for k in at_least_one) < 1:
    raise ConfigError('chunk, adversarial_steps, adversarial_candidates and train_sentences must be >= 1')
  if min(counts[k] for k in ('max_sentences', 'adversarial_sentences', 'trained_steps')) < 0:
    raise ConfigError('max_sentences, adversarial_sentences and trained_steps must be >= 0')


def _uniform_accuracy(run, records, chunk: int, seed: int) -> list:
  """Each seed's teacher-forced accuracy of a run trained with uniform weights (Wiegreffe & Pinter's baseline)."""
  into, chunks = collections.defaultdict(list), chunking.chunks(records, chunk)
  bar = progress.bar(len(run.seeds) * len(records), f'{run.name} explanations', 'sentence')
  for seed_i in range(len(run.seeds)):
    params = evaluation.seed_params(run.params, seed_i)
    summaries.SUMMARIES['wiegreffe_pinter'](into, run.cfg, params, chunks, records, chunk, seed, [], (), (), bar)
  bar.close()
  return into['accuracy_own']


def _settings(tests, split, counts, epsilon, chosen, words, listed, marks, function_ids, orders) -> dict:
  """What each selected test ran with, as the results record it (`settings`)."""
  settings = {
    'split': split,
    'max_sentences': counts['max_sentences'],
    'chunk': counts['chunk'],
    'seed': counts['seed'],
    'tokens': 'each seed\'s own greedy output (EOS included); wiegreffe_pinter\'s accuracy: the reference',
  }
  if 'moradi' in tests:
    settings['moradi'] = {
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
    settings['serrano_smith'] = {
      'orders': list(orders),
      'random_draws': serrano_smith.RANDOM_DRAWS,
      'steps': 'sources of 2 or more positions (their ATTN_SEQ_LEN > 1); the rest counted in filtered',
    }
  if 'jain_wallace' in tests:
    settings['jain_wallace'] = {
      'kendall': 'tau-b over the source positions but the final EOS; significant: p < 0.05',
      'permutations': jain_wallace.PERMUTATIONS,
      'select': 0.05,
      **{k: counts[k] for k in ('adversarial_sentences', 'adversarial_steps', 'adversarial_candidates')},
      'epsilon': epsilon,
      'learning_rate': 0.01,
      'penalty': 500.0,
    }
  if 'wiegreffe_pinter' in tests:
    settings['wiegreffe_pinter'] = {
      'accuracy': 'teacher-forced on the reference',
      'seed_variance': 'base seed: the first; every seed teacher-forced on the base seed\'s own output',
      'trained': {'steps': counts['trained_steps'], 'train_sentences': counts['train_sentences'], 'seed': 'the first'},
    }
  return settings


def _per_seed(run, tests, batches, records, counts, chosen, function_ids, orders, epsilon):
  """Every selected test's per-seed lists (`summaries.SUMMARIES`), on each seed's own greedy output where a test
  reads it, and the seconds each took; with wiegreffe_pinter, under '_base' the first seed's records."""
  cfg, chunk, tokenizer = run.cfg, counts['chunk'], run.prepared.tgt_tokenizer
  lists = {t: collections.defaultdict(list) for t in tests}
  seconds = collections.Counter()
  greedy = ('moradi', 'serrano_smith', 'jain_wallace')
  bar = progress.bar(len(run.seeds) * len(tests) * len(records), f'{run.name} explanations', 'sentence')
  adversarial = [counts[k] for k in ('adversarial_sentences', 'adversarial_steps', 'adversarial_candidates')]
  for seed_i in range(len(run.seeds)):
    params = evaluation.seed_params(run.params, seed_i)
    recs = records
    if any(t in tests for t in greedy) or (seed_i == 0 and 'wiegreffe_pinter' in tests and len(run.seeds) > 1):
      start = time.time()
      own = {t.index: t for t in evaluation.translate(cfg, params, batches, tokenizer)}
      seconds['greedy'] += time.time() - start
      recs = chunking.records(batches, own)
    if seed_i == 0 and 'wiegreffe_pinter' in tests:
      lists['_base'] = recs
    chunks = chunking.chunks(recs, chunk)
    for test in tests:
      start = time.time()
      summaries.SUMMARIES[test](
        lists[test], cfg, params, chunks, recs, chunk, counts['seed'], chosen, function_ids, orders, bar,
        *adversarial, epsilon,
      )  # fmt: skip
      seconds[test] += time.time() - start
  bar.close()
  return lists, seconds


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
  batches = chunking.first_batches(list(data.batches(run_b.prepared, split, run_b.config.data)), max_sentences)
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
    recs = chunking.records(batches, own)
    out['sentences'] = len(recs)
    sums = collections.Counter()
    for c in chunking.chunks(recs, chunk):
      got = wiegreffe_pinter.frozen_attention(
        run_a.cfg, params_a, run_b.cfg, params_b, *chunking.device(c, 'src', 'src_len', 'tokens'), c['lengths']
      )
      sums.update(got['counts'])
    out['agrees'].append(summaries.ratio(sums['agrees'], sums['tokens']))
    out['agrees_uniform'].append(summaries.ratio(sums['agrees_uniform'], sums['tokens']))
  return nan_none(out)


# Verdicts -------------------------------------------------------------------------------------------------------
