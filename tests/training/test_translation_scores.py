"""Scores from sentence statistics extracted once (attnmt.training.translation_scores) against fresh sacrebleu
metrics scoring the same texts."""

import numpy as np
import pytest
import sacrebleu

from attnmt.compare import pair_tests
from attnmt.training import evaluation, translation_scores as ts

REFS = [
  'the cat sat on the mat',
  'a dog barks at night',
  'el perro negro come la carne',
  'la casa es grande y blanca',
  'he said , " no . "',
  'one two three four five six seven',
]
HYPS = [
  'the cat sat on a mat',
  'dog barks at the night',
  'el pero negro come carne',
  '',
  'he said , " no . "',
  'one two three four five six seven eight',
]
FRESH = {
  'bleu': sacrebleu.BLEU,
  'chrf': sacrebleu.CHRF,
  'chrfpp': lambda: sacrebleu.CHRF(word_order=2),
}


@pytest.fixture(autouse=True)
def _empty_caches(monkeypatch):
  monkeypatch.setattr(ts, '_STATISTICS', type(ts._STATISTICS)())
  monkeypatch.setattr(ts, '_SCORERS', {})


def _count_extractions(monkeypatch):
  """Counts sacrebleu's statistics extractions by metric class (BLEU, CHRF)."""
  calls = []
  for cls in (sacrebleu.BLEU, sacrebleu.CHRF):
    original = cls._extract_corpus_statistics

    def counted(self, hyps, refs, original=original, name=cls.__name__):
      calls.append(name)
      return original(self, hyps, refs)

    monkeypatch.setattr(cls, '_extract_corpus_statistics', counted)
  return calls


@pytest.mark.parametrize('metric', ts.METRICS)
def test_corpus_scores_and_subsets_equal_fresh_sacrebleu(metric):
  """Every metric, of the whole list and of subsets of its sentences (as BLEU by length takes them), equals a
  fresh sacrebleu metric given those sentences alone."""
  assert ts.corpus_score(HYPS, REFS, metric) == FRESH[metric]().corpus_score(HYPS, [REFS]).score
  for rows in ([0, 2, 4], [3], [1, 5], list(range(6))[::-1]):
    expected = FRESH[metric]().corpus_score([HYPS[i] for i in rows], [[REFS[i] for i in rows]]).score
    assert ts.corpus_score(HYPS, REFS, metric, rows=np.array(rows)) == expected


def test_each_metric_is_extracted_once_per_list_of_outputs(monkeypatch):
  """The corpus scores, BLEU by length, sentence BLEU and the significance statistics of one list extract BLEU
  once and chrF twice (chrF and chrF++), however often they are asked; one changed word extracts again."""
  calls = _count_extractions(monkeypatch)
  sources = [' '.join(['w'] * n) for n in (3, 3, 12, 12, 25, 25)]
  for _ in range(3):
    scores = evaluation.bleu_chrf(HYPS, REFS)
    rows = evaluation.bleu_by_length(HYPS, REFS, sources, min_sentences=1)
    bleus = pair_tests.sentence_bleus(HYPS, REFS)
    stats = pair_tests.sentence_statistics(HYPS, REFS)
  assert sorted(calls) == ['BLEU', 'CHRF', 'CHRF']
  changed = [*HYPS[:-1], 'one two three four five six']
  changed_bleu = evaluation.bleu_chrf(changed, REFS)['bleu']
  assert sorted(calls) == ['BLEU', 'BLEU', 'CHRF', 'CHRF', 'CHRF', 'CHRF']
  assert changed_bleu == sacrebleu.BLEU().corpus_score(changed, [REFS]).score
  assert scores['bleu'] == pair_tests.corpus_bleu(stats.sum(0))
  assert [r['sentences'] for r in rows] == [2, 2, 2]
  assert rows[0]['bleu'] == sacrebleu.corpus_bleu(HYPS[:2], [REFS[:2]]).score
  assert bleus == [sacrebleu.sentence_bleu(h, [r]).score for h, r in zip(HYPS, REFS)]
  assert not stats.flags.writeable  # a caller cannot change what the next one reads


def test_lists_that_join_alike_are_told_apart():
  """The key of a list reads each sentence's own length: sentences that would join to the same text differ."""
  a, b = ['a b', 'c'], ['a', 'b c']
  refs = ['a b', 'c']
  assert ts.corpus_score(a, refs, 'chrf') == 100.0
  assert ts.corpus_score(b, refs, 'chrf') == sacrebleu.CHRF().corpus_score(b, [refs]).score < 100.0


def test_the_oldest_lists_are_dropped_beyond_the_budget(monkeypatch):
  """Beyond _KEPT_BYTES the least recently used lists go (the newest always stays) and are extracted again,
  to the same statistics."""
  one = ts.sentence_statistics(HYPS, REFS).nbytes
  monkeypatch.setattr(ts, '_KEPT_BYTES', 2 * one)
  lists = [[f'{h} {i}' for h in HYPS] for i in range(4)]
  first = ts.sentence_statistics(lists[0], REFS).copy()
  for hyps in lists[1:]:
    ts.sentence_statistics(hyps, REFS)
  assert len(ts._STATISTICS) == 2
  calls = _count_extractions(monkeypatch)
  np.testing.assert_array_equal(ts.sentence_statistics(lists[0], REFS), first)
  ts.sentence_statistics(lists[3], REFS)  # still kept: the two most recent are lists 3 and 0
  assert calls == ['BLEU']
  monkeypatch.setattr(ts, '_KEPT_BYTES', 0)
  ts.sentence_statistics(lists[1], REFS)
  assert len(ts._STATISTICS) == 1


def test_bad_input():
  with pytest.raises(ValueError, match='2 hypotheses for 3 references'):
    evaluation.bleu_chrf(['a', 'b'], ['a', 'b', 'c'])
  with pytest.raises(ValueError, match='no sentences to score'):
    ts.sentence_statistics([], [])
  with pytest.raises(ValueError, match="unknown metric 'ter'"):
    ts.corpus_score(['a'], ['a'], 'ter')
  with pytest.raises(ValueError, match='2 hypotheses for 1 sources'):
    evaluation.bleu_by_length(['a', 'b'], ['a', 'b'], ['x'])
