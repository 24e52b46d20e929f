"""One run's own part of the analysis (analyze_run): every seed decoded greedily and with beam search, its
translations written, scored and measured (attention monotonicity, entropy, maximum weight, coverage deviation;
AER where gold alignments exist), pooled over seeds, with the first seed's heatmaps and sentence views."""

from __future__ import annotations

import os
from typing import Optional

import numpy as np

from attnmt import data, plots, progress
from attnmt.analysis import files, gold, scoring, sentences
from attnmt.model import scores as score_registry
from attnmt.training import evaluation, measures

POOLED_COUNTS = ('sentences', 'undefined', 'skipped', 'tokens', 'positions')


def analyze_run(
  run,
  out_dir: Optional[str],
  beam_size=5,
  heatmap_sentences=(),
  num_heatmaps=3,
  heatmap_seed=0,
  pharaoh=None,
  split='test',
  heatmap_min_words=0,
  drawing: Optional[plots.Drawing] = None,
) -> tuple[dict, dict, dict]:
  """Every analysis of one run (an inspection.LoadedRun): every seed decoded (greedy, and beam search when
  beam_size > 0) for the scores, BLEU by length, attention statistics and repetition, per seed and pooled over seeds;
  heatmaps and the report's sentence views from the first seed. Returns that result; every seed's hypotheses by mode
  ({'greedy': [seed 0's, seed 1's, ...], ...}) with the references and sources they translate; and the first seed's
  view of every sentence (sentences.sentence_views). Translations and heatmaps are written under
  <out_dir>/<variant>/; with `out_dir` None nothing is written: no translations, heatmaps or sentence views. The
  heatmaps are drawn by `drawing` (plots.Drawing: maybe in the background, done when it closes), else at once."""
  sources, references = data.raw_texts(run.prepared, split)
  sentences.check_sentences(heatmap_sentences, len(sources), split, run.workdir)  # before anything is decoded
  run_dir = None if out_dir is None else os.path.join(out_dir, files.slug(run.name))
  if run_dir is not None:
    os.makedirs(run_dir, exist_ok=True)
  # 'pool': the variant its seeds pool into with other runs' (stored.pooled_name)
  result = {'variant': run.name, 'pool': run.pool, 'workdir': run.workdir, 'step': run.step, 'seeds': run.seeds}
  result['attends'] = score_registry.build(run.cfg).attends  # False: a baseline without attention (score 'none')
  modes = [('greedy', 0)] + ([('beam', beam_size)] if beam_size else [])
  if pharaoh:
    pharaoh = gold.read_pharaoh(pharaoh)  # a malformed file fails before anything is decoded
    gold.check_pharaoh(pharaoh, sources, references, split)
  texts, n_best, attention_by_seed = {'hypotheses': {}}, {}, []
  for mode, by_seed in _translations_by_mode(run, split, modes):
    for seed_i, (seed, trans) in enumerate(zip(run.seeds, by_seed)):
      hyps, refs = [x.text for x in trans], [references[x.index] for x in trans]
      srcs = [sources[x.index] for x in trans]
      scoring.add_scores(result, mode, hyps, refs, srcs)
      texts['hypotheses'].setdefault(mode, []).append(hyps)
      texts.update(references=refs, sources=srcs)
      if run_dir is not None:
        files.write_lines(os.path.join(run_dir, f'translations.{mode}.seed{seed}.txt'), hyps)
        if seed_i == 0:
          files.write_lines(os.path.join(run_dir, f'translations.{mode}.txt'), hyps)
    if mode == 'beam':
      n_best = {x.index: x.hypotheses for x in by_seed[0]}
    else:
      greedy, attention_by_seed = by_seed[0], [attention_measures(trans) for trans in by_seed]
      if run_dir is not None:
        result['heatmaps'], result['heatmap_sentences'] = sentences.draw_heatmaps(
          run, greedy, sources, run_dir, heatmap_sentences, num_heatmaps, heatmap_seed, heatmap_min_words, drawing
        )
  for mode, _ in modes:
    result[f'{mode}_bleu_by_length'] = scoring.pool_by_length(result[f'{mode}_bleu_by_length_by_seed'])
  result['attention_by_seed'] = attention_by_seed
  result['attention'] = pool_over_seeds(attention_by_seed)
  aer, gold_links = gold.alignment_error_rates(run, split, pharaoh)
  if aer is not None:
    result['aer'] = aer
  views = {} if run_dir is None else sentences.sentence_views(run, greedy, sources, references, n_best, gold_links)
  return result, texts, views


def _translations_by_mode(run, split: str, modes: list[tuple[str, int]]):
  """(mode, one list of translations per seed) for each (mode, beam size) of `modes` (beam size 0: greedy, with
  the attention kept), decoded as each is reached, every seed's batch in one program on an accelerator; one
  progress bar per mode, closed after the last."""
  t = run.config.train
  batches = list(data.batches(run.prepared, split, run.config.data, fixed_rows=True))  # one program per width
  rows = sum(int(np.sum(b['index'] >= 0)) for b in batches)
  bars = {mode: progress.bar(len(run.seeds) * rows, f'{run.name} {mode}', 'sentence') for mode, _ in modes}
  together = evaluation.seeds_together(len(run.seeds))  # every seed in one program on an accelerator

  def rows_in(batch):  # the sentences a batch translates for the bar: once per seed when seeds go together
    return (len(run.seeds) if together else 1) * int(np.sum(batch['index'] >= 0))

  same = dict(alpha=t.beam_alpha, factor=t.max_decode_factor, beta=t.beam_coverage_penalty, together=together)
  for mode, k in modes:
    counted, tgt_tok = _Counted(batches, bars[mode], rows_in), run.prepared.tgt_tokenizer
    flags = dict(keep_attention=mode == 'greedy', n_best=mode == 'beam')  # the attention of greedy decoding alone
    yield mode, evaluation.translate_seeds(run.cfg, run.params, len(run.seeds), counted, tgt_tok, k, **flags, **same)
  for bar in bars.values():
    bar.close()


class _Counted:
  """`batches` that advance `bar` by size(batch) as each is used, every time they are iterated (seed after
  seed, translate_seeds iterates them once per seed)."""

  def __init__(self, batches, bar, size):
    self.batches, self.bar, self.size = batches, bar, size

  def __iter__(self):
    return progress.counted(self.batches, self.bar, self.size)


def attention_measures(translations: list[evaluation.SplitTranslation]) -> dict:
  """Monotonicity, entropy, maximum weight and coverage deviation of the translations' attention
  (measures.AttentionStatistics): the EOS row is left out of all but coverage, the source EOS column out of
  monotonicity; coverage counts every output step over every source position."""
  stats = measures.AttentionStatistics()
  for x in translations:
    stats.add(x.attention, ends_with_eos=bool(x.ids) and x.ids[-1] == data.EOS_ID)
  return stats.result()


def pool_over_seeds(per_seed: list[dict]) -> dict:
  """AttentionStatistics.result() pooled over seeds: each mean is the mean of the seeds' means (over the
  seeds that measured it; None if none did), each count (POOLED_COUNTS: 'sentences', 'undefined', 'skipped',
  'tokens', 'positions') the sum over seeds."""
  out = {}
  for key in per_seed[0] if per_seed else ():
    values = [d[key] for d in per_seed if d.get(key) is not None]
    if key in POOLED_COUNTS:
      out[key] = int(sum(values))
    else:
      out[key] = float(np.mean(values)) if values else None
  return out
