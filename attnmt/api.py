"""attnmt's Python API: a trained run from its directory, translations with attention, the attention of forced
decoding, heatmaps, and the comparison of runs over seeds and test sentences.

    import attnmt
    run = attnmt.load('runs/main/additive-bahdanau-global-seeds=0')   # best checkpoint, every seed, no corpus read
    out = run.translate(['In the beginning God created the heavens and the earth.'], beam_size=5)
    out[0].text, out[0].tokens, out[0].source_tokens, out[0].attention  # attention: output x source tokens
    forced = run.attend(sources, references, level='word')      # the attention of forced decoding
    fig = attnmt.heatmap(out[0], forced[0])                     # a matplotlib Figure, side by side
    table = attnmt.compare([none_dir, additive_dir])            # the analysis table as data (reads the corpus)

One implementation serves every caller: experiments/translate.py translates through Run.translate, and
`compare` is experiments/analyze.py's report.analyze_runs with nothing written. Input the API cannot use
raises attnmt.errors.InputError, a directory that is not a run attnmt.errors.CheckpointError, each with a
one-line message. A source longer than the model takes (score `location`: its option `positions` tokens,
EOS included) is refused, not truncated; other models take any length.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Optional, Sequence

import jax.numpy as jnp
import ml_collections
import numpy as np

from attnmt import data, plots
from attnmt.analysis import inspection, report
from attnmt.analysis.comparison import Comparison
from attnmt.faithfulness import runner
from attnmt.compare import family
from attnmt.data import batching, pipeline, sources as corpora
from attnmt.data.tokenizers import token_labels
from attnmt.errors import CheckpointError, InputError
from attnmt.model import interventions, scores
from attnmt.model.config import ModelConfig
from attnmt.training import evaluation, trainer

__all__ = ['Attention', 'Comparison', 'Run', 'Translation', 'compare', 'heatmap', 'load', 'train']

DECODE_BATCH = 32  # sentences decoded together
LEVELS = ('word', 'subword')
_UNPADDED = batching.BatchOptions(batch_size=DECODE_BATCH, pad_to_multiple=1, bucket=False)


@dataclasses.dataclass(frozen=True, eq=False)
class Translation:
  """One translated sentence and where each output token looked."""

  source: str
  text: str
  tokens: list[str]  # output pieces; '</s>' last when the model ended the sentence
  source_tokens: list[str]  # source pieces, then '</s>'
  attention: np.ndarray  # len(tokens) x len(source_tokens); row t: output token t's weights over the source
  score: float  # the decoder's score of the output (beam search: length-normalised)
  seed: int


@dataclasses.dataclass(frozen=True, eq=False)
class Attention:
  """The attention of forced decoding: the model reads the source and is fed the reference, token by token."""

  source: str
  reference: str
  tokens: list[str]  # the reference's words or pieces, then '</s>' (the step that emits EOS)
  source_tokens: list[str]  # the source's words or pieces, then '</s>'
  attention: (
    np.ndarray
  )  # len(tokens) x len(source_tokens); words: summed over a source word's pieces, averaged over a target word's
  level: str  # 'word' or 'subword'
  seed: int


class Run(inspection.LoadedRun):
  """A trained run, read from its directory alone (attnmt.load): an inspection.LoadedRun (its config, seeds,
  checkpoint and tokenizers; the corpus read only by `explain`) with the API's methods."""

  @property
  def path(self) -> str:
    return self.workdir

  @property
  def model_config(self) -> ModelConfig:
    return self.cfg

  @property
  def max_source_tokens(self) -> int:
    """The longest source the model takes, in tokens with EOS (0: any): the `location` score's option `positions` for the
    `location` score, whose weights are one output per source position."""
    return scores.build(self.model_config).max_positions() or 0

  def __repr__(self) -> str:
    return f'Run({self.path!r}: {self.name}, seeds {self.seeds}, step {self.step})'

  def tokenize(self, sentence: str) -> list[str]:
    """The source pieces the model reads for `sentence`, '</s>' last (their count is what max_source_tokens
    limits)."""
    ids = self.src_tokenizer.encode(sentence.strip()) + [data.EOS_ID]
    return token_labels(self.src_tokenizer, ids)

  def translate(
    self, sentences: Sequence[str], beam_size: int = 0, seed: Optional[int] = None, intervention=None
  ) -> list[Translation]:
    """Translations of `sentences`, in order, with their attention: greedy search (`beam_size` 0) or beam
    search with the run's length and coverage penalties (train.beam_alpha, train.beam_coverage_penalty), by
    the parameters of `seed` (default: the run's first). Sentences are batched by decoding budget, so each
    output is the one that sentence gets alone (experiments/translate.py decodes one at a time).
    `intervention` (None, an interventions.Intervention or its name): counterfactual attention at every step
    (`intervene`), in greedy and beam search alike."""
    if intervention is not None:
      intervention = interventions.selected(intervention)
    if not isinstance(beam_size, int) or beam_size < 0:
      raise InputError(f'beam_size={beam_size!r}: pass 0 (greedy search) or a beam width >= 1')
    texts = _sentences(sentences, 'sentences')
    params, seed = self._seed_params(seed)
    split = self._encode(texts, [''] * len(texts))
    t, factor = self.config.train, self.config.train.max_decode_factor
    budgets = np.array([evaluation.decode_length(int(n), factor) for n in split.src_len])
    batches = []  # one decoding budget per batch: evaluation.translate sets it from the batch width
    for budget in np.unique(budgets):
      same = np.flatnonzero(budgets == budget)
      batches += [
        pipeline.build_batch(split, same[k : k + DECODE_BATCH], _UNPADDED) for k in range(0, len(same), DECODE_BATCH)
      ]
    src_tok, tgt_tok = self.src_tokenizer, self.tgt_tokenizer
    decoded = evaluation.translate(
      self.model_config,
      params,
      batches,
      tgt_tok,
      beam_size,
      t.beam_alpha,
      factor,
      keep_attention=True,
      beta=t.beam_coverage_penalty,
      intervention=intervention,
    )
    return [
      Translation(
        texts[x.index],
        x.text,
        token_labels(tgt_tok, x.ids),
        token_labels(src_tok, split.src(x.index).tolist() + [data.EOS_ID]),
        np.asarray(x.attention, np.float32),
        x.score,
        seed,
      )
      for x in decoded
    ]

  def intervene(
    self, sentences: Sequence[str], intervention: str = 'uniform', seed: Optional[int] = None, beam_size: int = 0, **kw
  ) -> list[Translation]:
    """Translations of `sentences` with counterfactual attention at every decoder step, by greedy search
    (`beam_size` 0) or beam search: `intervention` is a selection (one of attnmt.model.interventions.NAMES:
    uniform, permute, zero_max, zero_top_k, shift, first, last, random, identity, with its options written after
    it, 'zero_top_k(k=3)', or an import path to a user's own) or an interventions.Intervention; `kw` its options:
    k (zero_top_k: how many of the largest weights are zeroed, a whole number >= 1), concentration (random), and
    draw_seed (permute, random: the seed of the intervention's draw, its Intervention.seed). Two seeds,
    then: `seed` picks the model's parameters (one of `seeds`, as in `translate`), `draw_seed` the
    counterfactual's randomness. Each Translation's attention is the counterfactual one the context read.
    Compare with `translate` to see what the output owes the attention."""
    return self.translate(sentences, beam_size, seed, interventions.selected(intervention, **kw))

  def explain(
    self,
    tests='all',
    max_sentences: int = runner.MAX_SENTENCES,
    adversarial_sentences: int = runner.ADVERSARIAL_SENTENCES,
    adversarial_steps: int = runner.ADVERSARIAL_STEPS,
    split: str = 'test',
    trained_steps: Optional[int] = runner.TRAINED_STEPS,
    train_sentences: int = runner.TRAIN_SENTENCES,
  ) -> dict:
    """The four papers' tests of attention as explanation (attnmt/faithfulness/runner.py: 'moradi',
    'serrano_smith', 'jain_wallace', 'wiegreffe_pinter', a comma list or 'all') for every seed, on the first
    `max_sentences` sentences of the run's `split` (whole batches; 0: all), each along the seed's own greedy
    output; Jain & Wallace's adversarial search on the first `adversarial_sentences`; Wiegreffe & Pinter's trained
    tests `trained_steps` steps (None: the run's own train.num_steps; 0: left out) on the first `train_sentences`
    training sentences. Reads the corpus, as
    `compare` does. Returns runner.analyze_run's dict (per-seed lists under 'tests'); a score without
    attention gets {'not_applicable': why} per test, and an unknown test name one line (ConfigError)."""
    return runner.analyze_run(
      self,
      tests,
      split=split,
      max_sentences=max_sentences,
      adversarial_sentences=adversarial_sentences,
      adversarial_steps=adversarial_steps,
      trained_steps=trained_steps,
      train_sentences=train_sentences,
    )

  def attend(
    self, sources: Sequence[str], references: Sequence[str], level: str = 'word', seed: Optional[int] = None
  ) -> list[Attention]:
    """The attention of forced decoding of each reference given its source (teacher forcing, as in
    training), by `seed`'s parameters: at the `level` of words (inspection.word_attention, the pooling of
    the alignment error rate and the exports) or of subword pieces; EOS last on each side."""
    if level not in LEVELS:
      raise InputError(f'level={level!r}: pass one of {", ".join(LEVELS)}')
    srcs, refs = _sentences(sources, 'sources'), _sentences(references, 'references')
    if len(srcs) != len(refs):
      raise InputError(f'{len(srcs)} sources but {len(refs)} references: pass one reference per source')
    params, seed = self._seed_params(seed)
    split = self._encode(srcs, refs)
    src_tok, tgt_tok = self.src_tokenizer, self.tgt_tokenizer
    out = []
    for start in range(0, len(srcs), DECODE_BATCH):
      batch = pipeline.build_batch(split, np.arange(start, min(start + DECODE_BATCH, len(srcs))), _UNPADDED)
      w = np.asarray(
        inspection.reference_attention(
          self.model_config, params, *(jnp.asarray(batch[k]) for k in ('src', 'src_len', 'tgt_in'))
        )
      )
      for row, i in enumerate(batch['index']):
        src_ids, tgt_ids = split.src(i).tolist(), split.tgt(i).tolist()
        if level == 'word':
          weights, src_labels, tgt_labels = inspection.word_attention(w[row], src_ids, tgt_ids, src_tok, tgt_tok, True)
        else:
          weights = w[row, : len(tgt_ids) + 1, : len(src_ids) + 1]
          src_labels = token_labels(src_tok, src_ids + [data.EOS_ID])
          tgt_labels = token_labels(tgt_tok, tgt_ids + [data.EOS_ID])
        out.append(Attention(srcs[i], refs[i], tgt_labels, src_labels, np.asarray(weights, np.float32), level, seed))
    return out

  def _seed_params(self, seed: Optional[int]):
    """The parameters of `seed` (None: the first seed) and the seed."""
    if seed is None:
      seed = self.seeds[0]
    if seed not in self.seeds:
      raise InputError(
        f"seed {seed!r} is not one of this run's seeds ({', '.join(map(str, self.seeds))}); pass one of them, "
        'or None for the first'
      )
    return evaluation.seed_params(self.params, self.seeds.index(seed)), seed

  def _encode(self, srcs: list[str], tgts: list[str]) -> pipeline.TokenizedSplit:
    """The sentences as the data pipeline tokenizes a split; refuses a source longer than the model takes."""
    raw = corpora.RawSplit(srcs, tgts, [str(i) for i in range(len(srcs))])
    split = pipeline.tokenize_split(raw, self.src_tokenizer, self.tgt_tokenizer)
    limit = self.max_source_tokens
    for k, n in enumerate(split.src_len):
      if limit and n > limit:
        raise InputError(
          f'source {k} has {n} tokens (with EOS), more than the {limit} score {self.model_config.score!r} can address '
          '(its max_positions()); split the sentence'
        )
    return split


def _sentences(items: Sequence[str], what: str) -> list[str]:
  """The non-empty strings of `items`, stripped; anything else is an InputError naming the first bad one."""
  if isinstance(items, str):
    raise InputError(f'{what}: pass a list of strings, not one string (wrap it in a list)')
  try:
    texts = list(items)
  except TypeError:
    raise InputError(f'{what}: pass a list of strings, not {type(items).__name__}') from None
  if not texts:
    raise InputError(f'no {what} given: pass a non-empty list of strings')
  for k, text in enumerate(texts):
    if not isinstance(text, str):
      raise InputError(f'{what}[{k}] is of type {type(text).__name__}, not a string')
    if not text.strip():
      raise InputError(f'{what}[{k}] is empty: pass sentences with words in them')
  return [text.strip() for text in texts]


def load(run_dir: str, which: str = 'best') -> Run:
  """The run in `run_dir` (written by experiments/train.py or sweep.py, or `train`) at its best checkpoint
  (best validation BLEU; the latest if it never evaluated) or `which='latest'`: every seed's parameters,
  the config and the vocabulary saved beside them. No corpus is read."""
  if which not in ('best', 'latest'):
    raise InputError(f"which={which!r}: pass 'best' or 'latest'")
  if not isinstance(run_dir, (str, os.PathLike)):
    raise InputError(f'run_dir={run_dir!r} (of type {type(run_dir).__name__}): pass the run directory as a path')
  if os.path.isfile(run_dir):
    parent = os.path.dirname(os.path.abspath(run_dir))
    raise CheckpointError(
      f'{run_dir} is a file; attnmt.load needs the run directory (the workdir train.py or sweep.py wrote), not a '
      f'file inside it: pass {parent}'
    )
  return Run(**vars(inspection.load_model(run_dir, which)))


def train(config: ml_collections.ConfigDict, workdir: str) -> Run:
  """Trains `config` (every seed of config.train.seeds) into `workdir`, as experiments/train.py does, and
  loads the result; run again, it resumes. The same model and train settings trained again in this process (a
  notebook's next cell) reuse the traced step."""
  trainer.train_and_evaluate(config, workdir)
  return load(workdir)


def heatmap(*items, titles: Optional[Sequence[str]] = None):
  """The attention of Translations or Attentions as heatmaps side by side in one matplotlib Figure: output
  tokens down, source tokens across, one [0, 1] grey scale (white 0, black 1; exactly 0 pale blue), as
  experiments/analyze.py draws them. `titles` default to each item's source sentence."""
  if not items:
    raise InputError('heatmap: pass at least one Translation or Attention')
  for k, x in enumerate(items):
    if not all(hasattr(x, a) for a in ('attention', 'source_tokens', 'tokens')):  # what is drawn
      spread = ', as separate arguments: heatmap(*items)' if isinstance(x, (list, tuple)) else ''
      raise InputError(
        f'heatmap item {k} is a {type(x).__name__}, not a Translation or Attention; pass Translations or '
        f'Attentions (what translate, intervene and attend return){spread}'
      )
  if isinstance(titles, str):
    raise InputError('heatmap titles: pass a list of strings, one per heatmap, not one string (wrap it in a list)')
  titles = list(titles) if titles is not None else [x.source[:80] for x in items]
  if len(titles) != len(items):
    raise InputError(f'{len(titles)} titles for {len(items)} heatmaps: pass one title per heatmap')
  return plots.attention_panels([(x.attention, x.source_tokens, x.tokens, t) for x, t in zip(items, titles)])


def compare(
  run_dirs: Sequence[str],
  split: str = 'test',
  which: str = 'best',
  beam_size: int = 0,
  contrasts: str = 'all',
  delta: float = family.DELTA,
  pool_seeds: bool = False,
) -> Comparison:
  """Decodes `split` with every seed of every run and compares them as experiments/analyze.py does: a t
  test over seeds (paired by seed number where the runs share their seeds) with the test set's variance
  (jackknife over sentences), the family `contrasts` ('all' pairs, variant names each tested against every
  other, or pairs written A~B) with simultaneous intervals, and three answers: A > B, A ≈ B within ±`delta`
  BLEU, undecided (attnmt.compare.verdicts), writing nothing. Unlike `load`, this reads each run's corpus
  (built again from the config if missing).

  `pool_seeds`: runs trained a seed each (train.seeds as a sweep axis, as the CPU main job trains them:
  runs/main/<variant>-seeds=k) are pooled into one variant per name less its seeds part, as
  `analyze --pool_seeds` does; they must have been trained alike on the same test set (refused otherwise), and
  each pooled result's 'workdirs' lists its runs ('workdir' joins them)."""
  dirs = _sentences(run_dirs, 'run_dirs')
  if which not in ('best', 'latest'):
    raise InputError(f"which={which!r}: pass 'best' or 'latest'")
  family.checked('delta', delta, 'delta')  # before anything is decoded
  if pool_seeds:
    try:
      inspection.check_pooled_runs(dirs, 'pool_seeds=True')
    except ValueError as e:
      raise InputError(str(e)) from None
  results = report.analyze_runs(
    dirs,
    None,
    which,
    report_sentences=0,
    contrasts=contrasts,
    delta=delta,
    beam_size=beam_size,
    split=split,
    num_heatmaps=0,
    seeds_as_runs=pool_seeds,
  )
  return Comparison(results, split)
