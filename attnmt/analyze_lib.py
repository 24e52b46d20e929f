"""analyze_runs: translations, BLEU/chrF, BLEU by length, heatmaps and AER for a set of run directories."""
from __future__ import annotations

import json
import os
from typing import Optional

import numpy as np

from attnmt import analysis, data, evaluation, plots


def _write_lines(path: str, lines: list[str]) -> None:
  with open(path, 'w') as f:
    f.write('\n'.join(lines) + '\n')


def _slug(name: str) -> str:
  return name.replace('/', '-')


def analyze_run(run: analysis.LoadedRun, out_dir: str, beam_size: int = 5, heatmap_sentences=(),
                num_heatmaps: int = 3, heatmap_seed: int = 0, pharaoh: Optional[str] = None,
                split: str = 'test') -> dict:
  """Every analysis of one run (all seeds for the scores, the first seed for figures)."""
  t = run.config.train
  sources, references = data.raw_texts(run.prepared, split)
  run_dir = os.path.join(out_dir, _slug(run.name))
  os.makedirs(run_dir, exist_ok=True)
  result = {'variant': run.name, 'workdir': run.workdir, 'step': run.step, 'seeds': run.seeds}
  modes = [('greedy', 0)] + ([('beam', beam_size)] if beam_size else [])
  for seed_i, seed in enumerate(run.seeds):
    params = evaluation.seed_params(run.params, seed_i)
    batches = list(data.batches(run.prepared, split, run.config.data))
    for mode, k in modes:
      trans = evaluation.translate(run.cfg, params, batches, run.prepared.tgt_tokenizer, k, t.beam_alpha,
                                   t.max_decode_factor, keep_attention=(seed_i == 0 and mode == 'greedy'))
      hyps, refs = [x.text for x in trans], [references[x.index] for x in trans]
      scores = evaluation.bleu_chrf(hyps, refs)
      for key in ('bleu', 'chrf'):
        result.setdefault(f'{mode}_{key}', []).append(scores[key])
      result['bleu_signature'] = scores['bleu_signature']
      if seed_i == 0:
        _write_lines(os.path.join(run_dir, f'translations.{mode}.txt'), hyps)
        result[f'{mode}_bleu_by_length'] = evaluation.bleu_by_length(hyps, refs, [sources[x.index] for x in trans])
      if seed_i == 0 and mode == 'greedy':
        result['heatmaps'] = _heatmaps(run, trans, sources, run_dir, heatmap_sentences, num_heatmaps, heatmap_seed)
  aer = _alignment_error_rates(run, split, pharaoh)
  if aer is not None:
    result['aer'] = aer
  with open(os.path.join(run_dir, 'analysis.json'), 'w') as f:
    json.dump(result, f, indent=1)
  return result


def _heatmaps(run, trans, sources, run_dir, chosen, count, seed) -> list[str]:
  """Heatmap PNGs of the chosen sentences (example indices), or of `count` random ones."""
  by_index = {x.index: x for x in trans}
  if chosen:
    missing = [i for i in chosen if i not in by_index]
    if missing:
      raise ValueError(f'sentence indices {missing} are not in the split (it has {len(by_index)} sentences, '
                       f'0..{max(by_index)}); pass indices from that range')
    picks = list(chosen)
  else:
    rng = np.random.default_rng(seed)
    picks = sorted(rng.choice(sorted(by_index), size=min(count, len(by_index)), replace=False).tolist())
  src_tok, tgt_tok = run.prepared.src_tokenizer, run.prepared.tgt_tokenizer
  paths = []
  for i in picks:
    x = by_index[i]
    src_ids = src_tok.encode(sources[i])
    src_labels = [src_tok.id_to_piece(j) for j in src_ids][:x.attention.shape[1] - 1] + ['</s>']
    out_labels = [tgt_tok.id_to_piece(j) if j != data.EOS_ID else '</s>' for j in x.ids]
    title = f'{run.name} | test #{i}\n{sources[i][:90]}'
    paths.append(plots.attention_heatmap(x.attention[:, :len(src_labels)], src_labels, out_labels,
                                         os.path.join(run_dir, f'heatmap_{i}.png'), title))
  return paths


def _alignment_error_rates(run, split, pharaoh) -> Optional[list[float]]:
  """AER of every seed against the dataset's gold alignments or a Pharaoh file (one line per example)."""
  if pharaoh:
    with open(pharaoh) as f:
      gold_lines = [analysis.parse_pharaoh(line) for line in f]
    n = len(data.raw_texts(run.prepared, split)[0])
    if len(gold_lines) != n:
      raise ValueError(f'{pharaoh} has {len(gold_lines)} lines but the {split} split has {n} sentences; '
                       'give one Pharaoh line per sentence, in split order')
    sure = {i: s for i, (s, _) in enumerate(gold_lines)}
    possible = {i: p for i, (_, p) in enumerate(gold_lines)}
  else:
    sure = analysis.gold_alignments_from_batches(run, split)
    if sure is None:
      return None
    possible = sure
  out = []
  for seed_i in range(len(run.seeds)):
    pred = analysis.split_alignments(run, seed_i, split)
    keys = sorted(pred)
    out.append(analysis.alignment_error_rate([pred[k] for k in keys], [sure[k] for k in keys],
                                             [possible[k] for k in keys]))
  return out


def analyze_runs(workdirs: list[str], out_dir: str, which: str = 'best', **options) -> list[dict]:
  """analyze_run for every directory, then the figure comparing them: BLEU by source length."""
  results = []
  for workdir in workdirs:
    run = analysis.load_run(workdir, which)
    results.append(analyze_run(run, out_dir, **options))
  curves = {r['variant']: r['greedy_bleu_by_length'] for r in results}
  plots.bleu_by_length(curves, os.path.join(out_dir, 'bleu_by_length.png'),
                       'BLEU by source length (test, greedy, first seed)')
  with open(os.path.join(out_dir, 'analysis.json'), 'w') as f:
    json.dump(results, f, indent=1)
  return results
