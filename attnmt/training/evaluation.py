"""Evaluation: translate batches, score with sacrebleu (BLEU, chrF), loss, perplexity and the statistics of the
teacher-forced attention, BLEU by length. The decoder programs a batch runs: batch_decoding.py."""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Iterable, Optional

import jax
import jax.numpy as jnp
import numpy as np

from attnmt import data
from attnmt.model import decoding
from attnmt.model.config import ModelConfig
from attnmt.training import batch_decoding, measures, parallel, shapes, train_step, translation_scores

# Source-length buckets (words) for BLEU by sentence length, as in Bahdanau et al. (2015), Fig. 2.
LENGTH_BUCKETS = (0, 10, 20, 30, 40, 50, 60, 1000)


@dataclasses.dataclass
class SplitTranslation:
  """One example of a data split, translated (what evaluation and analysis use; the Python API's
  attnmt.Translation is what a user gets for a sentence of their own)."""

  index: int  # example index in its split (points into data.raw_texts)
  ids: list  # output ids up to and including EOS
  text: str
  attention: Optional[np.ndarray] = None  # len(ids) x source length (incl. EOS)
  score: float = 0.0
  # With translate(n_best=True): every finished beam hypothesis, best first, as [text, score] pairs.
  hypotheses: Optional[list] = None


@jax.jit
def seed_params(params, i: int):
  """The parameters of seed i from a tree stacked over seeds (one compiled program for the whole tree: taken
  leaf by leaf, each parameter's slice would be a program of its own to compile in every process)."""
  return jax.tree.map(lambda x: x[i], params)


def decode_length(src_width: int, factor: float) -> int:
  """A static decoding budget for a batch of this width, rounded to limit recompilations."""
  return int(math.ceil((factor * src_width + 10) / 8) * 8)


def _on_devices(batch: dict, keys, mesh) -> dict:
  """The batch's `keys` as device arrays: whole on the default device, or split over `mesh` (padded with
  empty rows to divide; each process passes the whole global batch)."""
  batch = {k: batch[k] for k in keys}
  if mesh is None:
    return {k: jnp.asarray(v) for k, v in batch.items()}
  return parallel.shard_batch(mesh, batch)


def seeds_together(num_seeds: int, mesh: Optional[jax.sharding.Mesh] = None) -> bool:
  """Whether `translate_seeds` decodes every seed in one program (the decoder vmapped over the seeds): on an
  accelerator, where it is faster (5 seeds' greedy decoding of the main job's model on an H100: 4.4 times the
  speed of the seeds in turn, benchmarks/README.md "On a GPU"), with one device; not on a CPU, where the seeds
  in turn are faster (2 CPU cores: the analysis of 3 seeds 29 s in turn against 37 s vmapped)."""
  one_device = mesh is None or mesh.size == 1
  return num_seeds > 1 and one_device and jax.default_backend() != 'cpu'


def translate_seeds(
  cfg: ModelConfig,
  params,
  num_seeds: int,
  batches: Iterable[dict],
  tgt_tokenizer,
  beam_size: int = 0,
  alpha: float = 0.6,
  factor: float = 1.5,
  keep_attention: bool = False,
  mesh: Optional[jax.sharding.Mesh] = None,
  beta: float = 0.0,
  n_best: bool = False,
  together: Optional[bool] = None,
) -> list[list[SplitTranslation]]:
  """`translate` for every seed of `params` (stacked over a leading axis of `num_seeds`): one list per seed.
  With `together` (default: `seeds_together`) each batch is decoded for every seed by one program, the
  decoder vmapped over the seeds' parameters; else seed after seed, each by `translate`. Both give each seed
  its own translations; vmapped products may round differently, so on an accelerator a token near a tie can
  differ from the seed decoded alone (5 seeds on an H100: 99.9 % of tokens equal)."""
  if n_best and not beam_size:
    raise ValueError('n_best needs beam search: give beam_size >= 1')
  together = seeds_together(num_seeds, mesh) if together is None else together
  if not together:
    same = (batches, tgt_tokenizer, beam_size, alpha, factor, keep_attention, mesh, beta)
    return [translate(cfg, seed_params(params, i), *same, n_best=n_best) for i in range(num_seeds)]
  out = [[] for _ in range(num_seeds)]
  for batch in batches:
    on = _on_devices(batch, ('src', 'src_len'), mesh)
    max_len = decode_length(on['src'].shape[1], factor)
    program = batch_decoding.seeds_program(cfg, beam_size, max_len, alpha, keep_attention, beta, n_best)
    d, beams = shapes.run(shapes.Call(program), params, on['src'], on['src_len'])
    for i in range(num_seeds):
      out[i] += _translations(batch, _seed_of(d, i), _seed_of(beams, i), tgt_tokenizer, keep_attention)
  return [sorted(o, key=lambda t: t.index) for o in out]


def _seed_of(decoded: Optional[decoding.Decoded], i: int) -> Optional[decoding.Decoded]:
  """Seed i's rows of a Decoded stacked over seeds (fields left None stay None)."""
  if decoded is None:
    return None
  return decoding.Decoded(*(None if x is None else x[i] for x in decoded))


def programs_ahead(cfg: ModelConfig, config, prepared, state, mesh=None) -> list[tuple]:
  """What validation and the final test evaluation will compile, as (shapes.Call, argument specs) pairs for
  shapes.Ahead: the greedy decoder (and validation's beam search, with train.eval_beam_size), every seed's in one
  program where `seeds_together`, and the teacher-forced loss, one program per batch shape (their batches take
  one row count per width: data.batches(fixed_rows=True)). None on several devices, whose batches are padded
  again to divide."""
  if mesh is not None and mesh.size > 1:
    return []
  t, d = config.train, config.data
  num_seeds = jax.tree.leaves(state.params)[0].shape[0]
  stacked = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), state.params)
  one = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape[1:], x.dtype), state.params)
  together = seeds_together(num_seeds, mesh)
  wanted = {}  # (rows, source width, target width) -> the beam sizes decoded at it
  for split, sentences, beams in (
    ('validation', t.eval_max_sentences, (0, t.eval_beam_size) if t.eval_beam_size else (0,)),
    ('test', 0, (0,)),
  ):
    it = data.batches(prepared, split, d, max_examples=sentences, fixed_rows=True)
    for shape in it.shapes_ahead(len(prepared.tokenized[split]) + 1):
      wanted.setdefault(shape, set()).update(beams)
  ids = lambda *shape: jax.ShapeDtypeStruct(shape, jnp.int32)
  out = []
  for (rows, s, tw), beams in wanted.items():
    src, src_len, target = ids(rows, s), ids(rows), ids(rows, tw)
    batch = {'src': src, 'src_len': src_len, 'tgt_in': target, 'tgt_out': target, 'tgt_len': src_len}
    out.append((loss_call(cfg, rows, s, tw), (one, batch)))
    max_len = decode_length(s, t.max_decode_factor)
    for beam in sorted(beams):
      if together:
        program = batch_decoding.seeds_program(cfg, beam, max_len, t.beam_alpha, False, t.beam_coverage_penalty, False)
        out.append((shapes.Call(program), (stacked, src, src_len)))
      else:  # in translate's row blocks
        size = rows // batch_decoding.decode_blocks(rows, mesh)
        call = batch_decoding.decode_call(cfg, beam, max_len, t.beam_alpha, False, t.beam_coverage_penalty, None)
        out.append((call, (one, ids(size, s), ids(size))))
  return out


def _translations(batch: dict, d: decoding.Decoded, beams, tgt_tokenizer, keep_attention: bool) -> list:
  """The SplitTranslations of one decoded batch's real rows (a row whose index is -1 pads the batch)."""
  tokens, lengths, scores = (parallel.to_numpy(x) for x in (d.tokens, d.lengths, d.scores))
  weights = parallel.to_numpy(d.weights) if keep_attention else None
  if beams is not None:
    beams = decoding.Decoded(*(None if x is None else parallel.to_numpy(x) for x in beams))
  out = []
  for row, index in enumerate(np.asarray(batch['index'])):
    if index < 0:  # an empty row that pads the batch
      continue
    ids = tokens[row, : lengths[row]].tolist()
    att = weights[row, : lengths[row], : int(batch['src_len'][row])] if keep_attention else None
    hyps = _hypotheses(beams, row, tgt_tokenizer) if beams is not None else None
    out.append(SplitTranslation(int(index), ids, tgt_tokenizer.decode(ids), att, float(scores[row]), hyps))
  return out


def translate(
  cfg: ModelConfig,
  params,
  batches: Iterable[dict],
  tgt_tokenizer,
  beam_size: int = 0,
  alpha: float = 0.6,
  factor: float = 1.5,
  keep_attention: bool = False,
  mesh: Optional[jax.sharding.Mesh] = None,
  beta: float = 0.0,
  intervention=None,
  n_best: bool = False,
) -> list[SplitTranslation]:
  """Translates every batch (greedy when beam_size is 0), returned sorted by example index. Beam
  search uses the length penalty `alpha` and the coverage penalty `beta` (attnmt.model.decoding).

  With a `mesh` every batch is split over its devices (params replicated); rows whose index is -1 are
  padding and produce no translation. The attention is kept only with `keep_attention` (its B x T x S
  history is the one buffer quadratic in the sentence length; see attnmt.model.decoding). `intervention`:
  counterfactual attention at every step (attnmt.model.interventions). With `n_best` (beam search only),
  each SplitTranslation also holds every finished hypothesis of the beam with its score, best first.
  `translate_seeds` translates for every seed of a run."""
  if n_best and not beam_size:
    raise ValueError('n_best needs beam search: give beam_size >= 1')
  out = []
  for batch in batches:
    on = _on_devices(batch, ('src', 'src_len'), mesh)
    max_len = decode_length(on['src'].shape[1], factor)
    blocks = batch_decoding.decode_blocks(on['src'].shape[0], mesh)

    def decode_rows(src, src_len):
      return batch_decoding.decode(
        cfg, params, src, src_len, beam_size, max_len, alpha, keep_attention, beta, intervention, n_best
      )

    d, beams = batch_decoding.decode_in_blocks(decode_rows, on['src'], on['src_len'], blocks)
    out += _translations(batch, d, beams, tgt_tokenizer, keep_attention)
  return sorted(out, key=lambda t: t.index)


def _hypotheses(beams: decoding.Decoded, row: int, tgt_tokenizer) -> list:
  """Row `row`'s finished beam hypotheses, best first, as [text, score] pairs. A beam that finished fewer
  hypotheses than it holds keeps NEG_INF scores in the rest: those are left out (the best always stays)."""
  hyps = []
  for j in range(beams.tokens.shape[1]):
    if j and beams.scores[row, j] <= decoding.NEG_INF / 2:
      continue
    ids = beams.tokens[row, j, : beams.lengths[row, j]].tolist()
    hyps.append([tgt_tokenizer.decode(ids), float(beams.scores[row, j])])
  return hyps


@functools.partial(jax.jit, static_argnames=('cfg',))
def _batch_loss(cfg: ModelConfig, params, batch):
  return train_step.summed_loss(cfg, params, batch, None, False)


@functools.partial(jax.jit, static_argnames=('cfg',))
def _batch_loss_only(cfg: ModelConfig, params, batch):
  # The weights unused, XLA keeps no B x T x S buffer: one 10,000-token pair of the tests' small model compiles
  # to 10 MB of buffers against 611 MB with them (tests/training/test_evaluation_statistics.py).
  return train_step.summed_loss(cfg, params, batch, None, False)[:2]


# Teacher-forced attention (B x T x S float32 weights, padded) is kept for its statistics only in batches of at
# most this many weights (64 MB, and as much again on the host): the one buffer of an evaluation that grows with
# the square of the sentence length. Sentences in larger batches (evaluation batches hold at most
# batching.EVAL_BATCH_POSITIONS source positions, so these are the longest ones, alone or nearly) get their
# loss, not their attention statistics, and are counted ('attention_skipped_long').
ATTENTION_CELLS = 1 << 24


def loss_call(cfg: ModelConfig, rows: int, src_width: int, tgt_width: int) -> shapes.Call:
  """The teacher-forced loss program for a batch of this shape: with the attention weights, or without them for
  a batch of more than ATTENTION_CELLS weights."""
  return shapes.Call.of(_batch_loss if rows * src_width * tgt_width <= ATTENTION_CELLS else _batch_loss_only, cfg)


# The attention statistics of measures.AttentionStatistics as teacher_forced_metrics reports them.
ATTENTION_KEYS = {
  'attention_entropy': 'entropy',
  'attention_max_weight': 'max_weight',
  'attention_coverage_deviation': 'coverage_deviation',
  'attention_monotonicity': 'monotonicity',
}


def teacher_forced_metrics(
  cfg: ModelConfig, params, batches: Iterable[dict], mesh: Optional[jax.sharding.Mesh] = None
) -> dict:
  """Token-level cross-entropy over all batches, its perplexity exp(loss), and the statistics of the
  teacher-forced attention (data-parallel on `mesh`).

  The attention statistics (measures.AttentionStatistics over every valid output step and source
  position of each sentence, padding excluded) are reduced batch by batch, so memory stays that of one
  batch: 'attention_entropy' (nats), 'attention_max_weight', 'attention_coverage_deviation',
  'attention_monotonicity', and 'attention_monotonicity_undefined', the fraction of sentences whose
  attention peak never moves (counted 0 in the monotonicity: every sentence under score `none`, whose
  weights are the uniform 1/S of its mean summary). 'attention_skipped_long': sentences left out of the
  attention statistics (ATTENTION_CELLS), still in the loss.
  """
  total = count = 0.0
  skipped = 0
  stats = measures.AttentionStatistics()
  for batch in batches:
    b = _on_devices(batch, ('src', 'src_len', 'tgt_in', 'tgt_out', 'tgt_len'), mesh)
    call = loss_call(cfg, batch['src'].shape[0], batch['src'].shape[1], batch['tgt_out'].shape[1])
    t, c, *rest = shapes.run(call, params, b)  # compiled ahead during training, where it was
    weights = rest[0] if rest else None
    total, count = total + float(parallel.to_numpy(t)), count + float(parallel.to_numpy(c))
    if weights is None:
      skipped += int(np.sum(np.asarray(batch['tgt_len']) > 0))
      continue
    weights_BxTxS = parallel.to_numpy(weights)  # a mesh pads rows at the end: the batch's rows come first
    for row, (n_src, n_tgt) in enumerate(zip(batch['src_len'], batch['tgt_len'])):
      if n_tgt > 0:  # rows of length 0 pad the batch
        stats.add(weights_BxTxS[row, :n_tgt, :n_src], ends_with_eos=True)
  loss = total / max(count, 1.0)
  att = stats.result()
  out = {'loss': loss, 'perplexity': math.exp(min(loss, 50.0)), 'tokens': int(count)}
  out.update({key: att[name] for key, name in ATTENTION_KEYS.items()})
  out['attention_monotonicity_undefined'] = att['undefined'] / att['sentences'] if att['sentences'] else None
  out['attention_skipped_long'] = skipped
  return out


def bleu_chrf(hypotheses: list[str], references: list[str]) -> dict:
  """Corpus BLEU, chrF and chrF++ (chrF with word unigrams and bigrams, Popović 2017: sacrebleu's
  CHRF(word_order=2), its other settings sacrebleu's defaults) from sacrebleu, with the BLEU signature that
  makes them reproducible (it names the sacrebleu version). Each metric's sentence statistics are extracted
  once per list of outputs (translation_scores): an analysis asks many scores of the same outputs."""
  scores = {m: translation_scores.corpus_score(hypotheses, references, m) for m in translation_scores.METRICS}
  return {**scores, 'bleu_signature': translation_scores.bleu_signature(references)}


def source_words(sources: list[str]) -> np.ndarray:
  """Each source sentence's length in whitespace-separated words, the unit of the length buckets."""
  return np.array([len(s.split()) for s in sources])


def in_bucket(words: np.ndarray, lo: int, hi: int) -> np.ndarray:
  """Positions of the sentences with lo < words <= hi."""
  return np.nonzero((words > lo) & (words <= hi))[0]


def length_buckets(words: np.ndarray, buckets=LENGTH_BUCKETS, min_sentences: int = 20) -> list[tuple[int, int]]:
  """(lo, hi] word-count intervals from the `buckets` edges, empty ones dropped, and any holding fewer than
  `min_sentences` sentences merged into its neighbour (the previous one for the last bucket, else the
  next), so that no point of a BLEU-by-length curve rests on a handful of sentences."""
  edges = list(buckets)

  def counts():
    return [len(in_bucket(words, lo, hi)) for lo, hi in zip(edges[:-1], edges[1:])]

  while len(edges) > 2:
    c = counts()
    small = [k for k, n in enumerate(c) if 0 < n < min_sentences]
    if not small:
      break
    k = small[0]
    del edges[k if k == len(c) - 1 else k + 1]  # merge interval k with the previous (if last) or next one
  return [(lo, hi) for (lo, hi), n in zip(zip(edges[:-1], edges[1:]), counts()) if n]


def bleu_by_length(
  hypotheses: list[str], references: list[str], sources: list[str], buckets=LENGTH_BUCKETS, min_sentences: int = 20
) -> list[dict]:
  """BLEU of the sentences whose source has lo < words <= hi, for each bucket of `length_buckets` (sacrebleu's
  corpus BLEU of those sentences, from the outputs' sentence statistics)."""
  if len(sources) != len(hypotheses):
    raise ValueError(f'{len(hypotheses)} hypotheses for {len(sources)} sources')
  words = source_words(sources)
  rows = []
  for lo, hi in length_buckets(words, buckets, min_sentences):
    sel = in_bucket(words, lo, hi)
    score = translation_scores.corpus_score(hypotheses, references, 'bleu', rows=sel)
    label = f'{lo + 1}-{hi}' if hi < buckets[-1] else f'>{lo}'
    rows.append({'bucket': label, 'lo': lo + 1, 'hi': hi, 'sentences': int(len(sel)), 'bleu': score})
  return rows
