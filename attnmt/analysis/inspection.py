"""Looking inside trained runs: reload from a run directory, forced-decoding attention, alignment error rate.

Alignments are read off attention Luong-style: force-decode the reference and link every target word
to the source word with the largest attention weight. Subword attention is pooled to words first
(summed over a source word's pieces, averaged over a target word's pieces).
"""

from __future__ import annotations

import dataclasses
import functools
import os
from typing import Any, Optional

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from attnmt.analysis import stored
from attnmt.training import checkpoints, evaluation, trainer
from attnmt.training import results as run_results
from attnmt.training import seeds as seed_axis
from attnmt import data
from attnmt.model.config import ModelConfig
from attnmt.model.seq2seq import Seq2Seq, init_params


@dataclasses.dataclass(eq=False)
class LoadedRun:
  """A trained run read from its directory: config, model, parameters (stacked over seeds), tokenizers, and its
  corpus (`prepared`), read or built the first time something asks for it. One type for the analysis, the
  faithfulness tests, translate and the API (api.Run is this type with the API's methods)."""

  workdir: str
  config: ml_collections.ConfigDict
  cfg: ModelConfig
  params: Any  # stacked over seeds
  seeds: list
  step: int
  src_tokenizer: Any
  tgt_tokenizer: Any
  corpus: data.PreparedData | None = None  # None until `prepared` is first read

  @property
  def prepared(self) -> data.PreparedData:
    """The run's corpus, checked against its vocabularies (prepare_checked); built once, then kept."""
    if self.corpus is None:
      self.corpus = prepare_checked(self.workdir, self.config, self.src_tokenizer, self.tgt_tokenizer)
    return self.corpus

  @property
  def name(self) -> str:
    """The run's label in tables: score/timing/window, or a sweep's name for it."""
    return run_results.variant_name(self.config)

  @property
  def pool(self) -> str:
    """The variant this run's seeds pool into with other runs' (`pool_name`)."""
    return pool_name(self.config)


def pool_name(config: ml_collections.ConfigDict) -> str:
  """The variant the seeds of the run of `config` pool into with other runs' (train.seeds as a sweep axis): the
  `pool` the sweep stores in its config (results.json repeats it), read by stored.pooled_name; a run stored
  without one is read by its name."""
  run = {'variant': run_results.variant_name(config)}
  if 'pool' in config:
    run['pool'] = config.pool
  return stored.pooled_name(run)


def check_pooled_runs(runs: list[str], option: str = '--pool_seeds') -> None:
  """The runs that pool into one variant (`pool_name`) must have been trained for the same number of steps and
  translate the same test sentences; a mixture is refused (ValueError), naming two of its runs and `option`
  (how the caller asked to pool), before any run is analysed."""
  seen, tests, corpora = {}, {}, {}

  def test_set(workdir, config):  # read only where the steps agree
    if workdir not in tests:
      tests[workdir] = data.raw_texts(data.prepare_once(config.data, corpora), 'test')
    return tests[workdir]

  for workdir in runs:
    config = checkpoints.load_config(workdir)
    name = pool_name(config)
    if name not in seen:
      seen[name] = (workdir, config)
      continue
    other, other_config = seen[name]
    if other_config.train.num_steps != config.train.num_steps:
      differs = f'were trained for {other_config.train.num_steps} and {config.train.num_steps} steps'
    elif test_set(other, other_config) != test_set(workdir, config):
      differs = 'translate different test sentences'
    else:
      continue
    raise ValueError(
      f'{option}: {other} and {workdir} would pool into {name} but {differs}; pool only runs trained alike '
      f'on the same test set (or leave out {option})'
    )


def load_run(workdir: str, which: str = 'best', corpora: dict | None = None) -> LoadedRun:
  """Everything needed to analyse a run, from its directory alone, its corpus read now (rebuilt if missing).
  `corpora`: shared by the loads of several runs, each data config's corpus is prepared once (data.prepare_once)."""
  config = checkpoints.load_config(workdir)
  params, _, step = checkpoints.restore_params(workdir, which)
  src_tok, tgt_tok = data.load_tokenizers(os.path.join(workdir, 'vocab'))
  prepared = prepare_checked(workdir, config, src_tok, tgt_tok, corpora)
  cfg = trainer.model_config(config, prepared)
  _check_user_params(workdir, cfg, params)
  seeds = seed_axis.parse_seeds(config.train.seeds)
  return LoadedRun(workdir, config, cfg, params, seeds, step, src_tok, tgt_tok, prepared)


def prepare_checked(
  workdir: str, config: ml_collections.ConfigDict, run_src, run_tgt, corpora: dict | None = None
) -> data.PreparedData:
  """The run's corpus (built if missing; `corpora`: see data.prepare_once), refused when its vocabularies differ from
  the run's own (`run_src`, `run_tgt`, saved in <workdir>/vocab): the token ids would mean other pieces."""
  prepared = data.prepare_once(config.data, corpora)
  for mine, theirs, side in ((run_src, prepared.src_tokenizer, 'source'), (run_tgt, prepared.tgt_tokenizer, 'target')):
    if [mine.id_to_piece(i) for i in range(mine.vocab_size)] != [
      theirs.id_to_piece(i) for i in range(theirs.vocab_size)
    ]:
      raise checkpoints.CheckpointError(
        f'the {side} vocabulary in {config.data.data_dir} differs from the one saved in '
        f'{workdir}/vocab; point --config.data.data_dir at the data the run used'
      )
  return prepared


def load_model(workdir: str, which: str = 'best') -> LoadedRun:
  """The run without its corpus, read from its directory alone (config.json stores the complete model config,
  vocabulary sizes included; the tokenizers are in <workdir>/vocab): nothing is read or built until `prepared` is
  asked for."""
  config = checkpoints.load_config(workdir)
  fields = checkpoints.load_model_fields(workdir)
  src_tok, tgt_tok = data.load_tokenizers(os.path.join(workdir, 'vocab'))
  if fields is None:  # a config.json without the model section: the sizes from the saved tokenizers
    fields = {
      **config.model.to_dict(),
      'source_vocab_size': src_tok.vocab_size,
      'target_vocab_size': tgt_tok.vocab_size,
    }
  cfg = ModelConfig.from_dict(fields)
  params, _, step = checkpoints.restore_params(workdir, which)
  _check_user_params(workdir, cfg, params)
  return LoadedRun(workdir, config, cfg, params, seed_axis.parse_seeds(config.train.seeds), step, src_tok, tgt_tok)


def _check_user_params(workdir: str, cfg: ModelConfig, params) -> None:
  """For a run that selects a user's own score, window, normaliser or form: its restored parameters must still
  be those the user's code declares (checkpoints.check_user_params), else one CheckpointError line."""
  if checkpoints.user_components(cfg):
    wanted = jax.eval_shape(lambda: init_params(cfg, jax.random.key(0)))
    checkpoints.check_user_params(workdir, cfg, params, wanted)


@functools.partial(jax.jit, static_argnames=('cfg',))
def reference_attention(cfg: ModelConfig, params, src, src_len, tgt_in):
  """Attention weights (B x T x S) while teacher forcing the reference (`tgt_in`: BOS, then the reference).
  decoding.forced_attention is the same for the model's own outputs (it prepends BOS itself)."""
  return Seq2Seq(cfg).apply({'params': params}, src, src_len, tgt_in)[1]


def word_index(tokenizer, ids: list[int]) -> list[int]:
  """The word each token belongs to: sentencepiece pieces starting with '▁' open a new word."""
  if getattr(tokenizer, 'kind', '') != 'sentencepiece':
    return list(range(len(ids)))
  out, word = [], -1
  for i in ids:
    if tokenizer.id_to_piece(i).startswith('\u2581') or word < 0:
      word += 1
    out.append(word)
  return out


def pool_to_words(weights_TxS: np.ndarray, tgt_words: list[int], src_words: list[int]) -> np.ndarray:
  """Word-level attention: sum over a source word's pieces, mean over a target word's pieces."""
  src_pool = np.zeros((weights_TxS.shape[1], max(src_words) + 1))
  src_pool[np.arange(len(src_words)), src_words] = 1.0
  tgt_pool = np.zeros((max(tgt_words) + 1, weights_TxS.shape[0]))
  tgt_pool[tgt_words, np.arange(len(tgt_words))] = 1.0
  tgt_pool /= tgt_pool.sum(1, keepdims=True)
  return tgt_pool @ weights_TxS @ src_pool


def attention_alignment(word_weights_TxS: np.ndarray) -> set[tuple[int, int]]:
  """Pharaoh-style (source, target) links: each target word to its most attended source word."""
  return {(int(np.argmax(row)), t) for t, row in enumerate(word_weights_TxS)}


def alignment_error_rate(predicted: list[set], sure: list[set], possible: Optional[list[set]] = None) -> float:
  """AER = 1 - (|A & S| + |A & P|) / (|A| + |S|) summed over the corpus (Och & Ney 2003)."""
  possible = possible or sure
  a_s = sum(len(a & s) for a, s in zip(predicted, sure))
  a_p = sum(len(a & p) for a, p in zip(predicted, possible))
  total = sum(len(a) for a in predicted) + sum(len(s) for s in sure)
  return 1.0 - (a_s + a_p) / max(total, 1)


def split_alignments(run: LoadedRun, seed_index: int, split: str = 'test') -> dict[int, set]:
  """Attention alignments (word level, EOS excluded) of every example of `split`, by example index."""
  return {
    i: attention_alignment(w) if w.size else set()
    for i, (w, _, _) in split_word_attention(run, seed_index, split).items()
  }


def word_labels(tokenizer, ids: list[int]) -> list[str]:
  """The words of `ids` as word_index groups them (sentencepiece pieces joined, the '▁' dropped)."""
  words = {}
  for w, i in zip(word_index(tokenizer, ids), ids):
    words[w] = words.get(w, '') + tokenizer.id_to_piece(i)
  return [words[w].replace('\u2581', '') or '\u2581' for w in sorted(words)]


def word_attention(weights_TxS, src_ids, tgt_ids, src_tok, tgt_tok, eos: bool = False) -> tuple:
  """Forced-decoding attention of one sentence (T x S, EOS row and column included; `src_ids`, `tgt_ids`
  without EOS) pooled to words: (weights, source word labels, target word labels). Without `eos` the EOS
  row and column are left out (an empty sentence gives a 0 x 0 matrix); with it each is a word of its own,
  labelled '</s>', and the other words' weights are the same."""
  n_src, n_tgt = len(src_ids), len(tgt_ids)
  src_words, tgt_words = word_index(src_tok, src_ids), word_index(tgt_tok, tgt_ids)
  src_labels, tgt_labels = word_labels(src_tok, src_ids), word_labels(tgt_tok, tgt_ids)
  if eos:
    src_words, tgt_words = src_words + [len(src_labels)], tgt_words + [len(tgt_labels)]
    return (
      pool_to_words(weights_TxS[: n_tgt + 1, : n_src + 1], tgt_words, src_words),
      src_labels + ['</s>'],
      tgt_labels + ['</s>'],
    )
  if n_src < 1 or n_tgt < 1:
    return np.zeros((0, 0)), [], []
  return pool_to_words(weights_TxS[:n_tgt, :n_src], tgt_words, src_words), src_labels, tgt_labels


def split_word_attention(run: LoadedRun, seed_index: int, split: str = 'test', eos: bool = False) -> dict[int, tuple]:
  """Forced-decoding attention pooled to words (word_attention; EOS excluded unless `eos`) of every example
  of `split`, by example index: (target words x source words weights, source word labels, target word
  labels)."""
  params = evaluation.seed_params(run.params, seed_index)
  src_tok, tgt_tok = run.prepared.src_tokenizer, run.prepared.tgt_tokenizer
  out = {}
  for batch in data.batches(run.prepared, split, run.config.data):
    w = np.asarray(
      reference_attention(
        run.cfg, params, jnp.asarray(batch['src']), jnp.asarray(batch['src_len']), jnp.asarray(batch['tgt_in'])
      )
    )
    for row, index in enumerate(batch['index']):
      n_src, n_tgt = int(batch['src_len'][row]) - 1, int(batch['tgt_len'][row]) - 1  # drop EOS
      src_ids, tgt_ids = batch['src'][row, :n_src].tolist(), batch['tgt_out'][row, :n_tgt].tolist()
      out[int(index)] = word_attention(w[row], src_ids, tgt_ids, src_tok, tgt_tok, eos)
  return out


def gold_alignments_from_batches(run: LoadedRun, split: str = 'test') -> Optional[dict[int, set]]:
  """Gold links of a dataset that carries them (the synthetic task; tsv_pairs with data.alignment_path), as
  (source, target) pairs of the words that split_word_attention pools to (word_index), by example index."""
  src_tok, tgt_tok = run.prepared.src_tokenizer, run.prepared.tgt_tokenizer
  gold = {}
  for batch in data.batches(run.prepared, split, run.config.data):
    if 'alignment' not in batch:
      return None
    for row, index in enumerate(batch['index']):
      n_src, n_tgt = int(batch['src_len'][row]) - 1, int(batch['tgt_len'][row]) - 1  # drop EOS
      src_words = word_index(src_tok, batch['src'][row, :n_src].tolist())
      tgt_words = word_index(tgt_tok, batch['tgt_out'][row, :n_tgt].tolist())
      t_idx, s_idx = np.nonzero(batch['alignment'][row, : max(n_tgt, 0), : max(n_src, 0)])
      gold[int(index)] = {(src_words[s], tgt_words[t]) for s, t in zip(s_idx, t_idx)}
  return gold
