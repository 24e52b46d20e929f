"""analyze_runs: translations, BLEU/chrF, BLEU by length, heatmaps, AER, attention monotonicity, entropy,
maximum weight and coverage deviation, repetition, and the declared family's verdicts (attnmt.compare.verdicts) for a
set of run directories."""

from __future__ import annotations

import json
import os
from typing import Callable, Collection, NamedTuple, Optional

import numpy as np

from attnmt.analysis import inspection, stored, tables
from attnmt.compare import verdicts, family, pair_tests
from attnmt.errors import InputError
from attnmt.training import checkpoints

from attnmt import data, plots, progress
from attnmt.data import pharaoh as pharaoh_file
from attnmt.data.tokenizers import token_labels
from attnmt.model import scores as score_registry
from attnmt.training import evaluation, measures


def write_text(path: str, text: str) -> None:
  """Writes `text` whole: a temporary file beside `path`, then renamed over it (a reader never sees half)."""
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  tmp = f'{path}.tmp-{os.getpid()}'
  with open(tmp, 'w', encoding='utf-8') as f:
    f.write(text)
  os.replace(tmp, path)


def _write_lines(path: str, lines: list[str]) -> None:
  write_text(path, '\n'.join(lines) + '\n')


def _slug(name: str) -> str:
  return name.replace('/', '-')


def _write_result(out_dir: str, result: dict) -> None:
  write_text(os.path.join(out_dir, _slug(result['variant']), 'analysis.json'), json.dumps(result, indent=1))


def analyze_run(
  run: inspection.LoadedRun,
  out_dir: str,
  beam_size: int = 5,
  heatmap_sentences=(),
  num_heatmaps: int = 3,
  heatmap_seed: int = 0,
  pharaoh: Optional[str] = None,
  split: str = 'test',
  heatmap_min_words: int = 0,
) -> dict:
  """Every analysis of one run: every seed decoded (greedy, and beam search when beam_size > 0) for the
  scores, BLEU by length, attention statistics and repetition, per seed and pooled over seeds; heatmaps
  and the report's sentence views from the first seed. Written to <out_dir>/<variant>/analysis.json."""
  result, _, _ = _analyze_run(
    run, out_dir, beam_size, heatmap_sentences, num_heatmaps, heatmap_seed, pharaoh, split, heatmap_min_words
  )
  _write_result(out_dir, result)
  return result


def _analyze_run(
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
):
  """analyze_run's result; every seed's hypotheses by mode ({'greedy': [seed 0's, seed 1's, ...], ...}) with
  the references and sources they translate; and the first seed's view of every sentence (sentence_views).
  With `out_dir` None nothing is written: no translations, heatmaps or sentence views. The heatmaps are drawn
  by `drawing` (plots.Drawing: maybe in the background, done when it closes), else at once."""
  t = run.config.train
  sources, references = data.raw_texts(run.prepared, split)
  check_sentences(heatmap_sentences, len(sources), split, run.workdir)  # before anything is decoded
  run_dir = None if out_dir is None else os.path.join(out_dir, _slug(run.name))
  if run_dir is not None:
    os.makedirs(run_dir, exist_ok=True)
  result = {
    'variant': run.name,
    'pool': run.pool,  # the variant its seeds pool into with other runs' (stored.pooled_name)
    'workdir': run.workdir,
    'step': run.step,
    'seeds': run.seeds,
    'attends': score_registry.build(run.cfg).attends,  # False: a baseline without attention (score 'none')
  }
  modes = [('greedy', 0)] + ([('beam', beam_size)] if beam_size else [])
  n_best, texts, attention_by_seed = {}, {'hypotheses': {}}, []
  if pharaoh:
    pharaoh = read_pharaoh(pharaoh)  # a malformed file fails before anything is decoded
    check_pharaoh(pharaoh, sources, references, split)
  batches = list(data.batches(run.prepared, split, run.config.data, fixed_rows=True))  # one program per width
  rows = sum(int(np.sum(b['index'] >= 0)) for b in batches)
  bars = {mode: progress.bar(len(run.seeds) * rows, f'{run.name} {mode}', 'sentence') for mode, _ in modes}
  together = evaluation.seeds_together(len(run.seeds))  # every seed in one program on an accelerator

  def rows_in(batch):  # the sentences a batch translates for the bar: once per seed when seeds go together
    return (len(run.seeds) if together else 1) * int(np.sum(batch['index'] >= 0))

  for mode, k in modes:
    by_seed = evaluation.translate_seeds(
      run.cfg,
      run.params,
      len(run.seeds),
      _Counted(batches, bars[mode], rows_in),
      run.prepared.tgt_tokenizer,
      k,
      t.beam_alpha,
      t.max_decode_factor,
      keep_attention=mode == 'greedy',
      beta=t.beam_coverage_penalty,
      n_best=mode == 'beam',
      together=together,
    )
    for seed_i, (seed, trans) in enumerate(zip(run.seeds, by_seed)):
      if mode == 'beam' and seed_i == 0:
        n_best = {x.index: x.hypotheses for x in trans}
      hyps, refs = [x.text for x in trans], [references[x.index] for x in trans]
      srcs = [sources[x.index] for x in trans]
      scores = evaluation.bleu_chrf(hyps, refs)
      for key in ('bleu', 'chrf', 'chrfpp'):
        result.setdefault(f'{mode}_{key}', []).append(scores[key])
      result.setdefault(f'{mode}_repetition', []).append(measures.repetition_rate(hyps))
      result.setdefault(f'{mode}_bleu_by_length_by_seed', []).append(evaluation.bleu_by_length(hyps, refs, srcs))
      result['bleu_signature'] = scores['bleu_signature']
      texts['hypotheses'].setdefault(mode, []).append(hyps)
      texts.update(references=refs, sources=srcs)
      if run_dir is not None:
        _write_lines(os.path.join(run_dir, f'translations.{mode}.seed{seed}.txt'), hyps)
        if seed_i == 0:
          _write_lines(os.path.join(run_dir, f'translations.{mode}.txt'), hyps)
      if mode == 'greedy':
        attention_by_seed.append(attention_measures(trans))
      if seed_i == 0 and mode == 'greedy':
        greedy_trans = trans
        if run_dir is not None:
          result['heatmaps'], result['heatmap_sentences'] = _heatmaps(
            run, trans, sources, run_dir, heatmap_sentences, num_heatmaps, heatmap_seed, heatmap_min_words, drawing
          )
  for bar in bars.values():
    bar.close()
  for mode, _ in modes:
    result[f'{mode}_bleu_by_length'] = pool_by_length(result[f'{mode}_bleu_by_length_by_seed'])
  result['attention_by_seed'] = attention_by_seed
  result['attention'] = pool_over_seeds(attention_by_seed)
  aer, gold = _alignment_error_rates(run, split, pharaoh)
  if aer is not None:
    result['aer'] = aer
  views = {} if run_dir is None else sentence_views(run, greedy_trans, sources, references, n_best, gold)
  return result, texts, views


def check_sentences(chosen, size: int, split: str, workdir: str) -> None:
  """Refuses heatmap sentence indices (--sentences) outside the `split` of `size` sentences, naming them."""
  bad = [i for i in chosen if not 0 <= i < size]
  if bad:
    raise ValueError(
      f'--sentences {",".join(map(str, bad))}: the {split} split of {workdir} has {size} sentences; '
      f'pass indices from 0 to {size - 1}'
    )


class _Counted:
  """`batches` that advance `bar` by size(batch) as each is used, every time they are iterated (seed after
  seed, translate_seeds iterates them once per seed)."""

  def __init__(self, batches, bar, size):
    self.batches, self.bar, self.size = batches, bar, size

  def __iter__(self):
    return progress.counted(self.batches, self.bar, self.size)


def pool_by_length(per_seed: list[list[dict]]) -> list[dict]:
  """Each length bucket's BLEU pooled over seeds: 'bleu' is the mean, 'per_seed' the seeds' values (every
  seed translates the same sentences, so the buckets agree)."""
  pooled = []
  for rows in zip(*per_seed):
    values = [r['bleu'] for r in rows]
    pooled.append({**rows[0], 'bleu': float(np.mean(values)), 'per_seed': values})
  return pooled


def pool_over_seeds(per_seed: list[dict]) -> dict:
  """AttentionStatistics.result() pooled over seeds: each mean is the mean of the seeds' means (over the
  seeds that measured it; None if none did), each count ('sentences', 'undefined', 'skipped', 'tokens',
  'positions') the sum over seeds."""
  out = {}
  for key in per_seed[0] if per_seed else ():
    values = [d[key] for d in per_seed if d.get(key) is not None]
    if key in POOLED_COUNTS:
      out[key] = int(sum(values))
    else:
      out[key] = float(np.mean(values)) if values else None
  return out


POOLED_COUNTS = ('sentences', 'undefined', 'skipped', 'tokens', 'positions')


def sentence_views(run, trans, sources, references, n_best=None, gold=None) -> dict[int, dict]:
  """What the HTML report shows of each translated sentence, by example index: source and reference, the
  greedy output with its sentence BLEU (sacrebleu.sentence_bleu's, pair_tests.sentence_bleus), its attention (output tokens x source
  tokens, EOS included) and both sides' token labels, the beam hypotheses with their scores (`n_best`),
  and where `gold` alignments exist the forced-decoding attention pooled to words with the gold links
  and the sentence's AER."""
  src_tok, tgt_tok = run.prepared.src_tokenizer, run.prepared.tgt_tokenizer
  views = {}
  bleus = pair_tests.sentence_bleus([x.text for x in trans], [references[x.index] for x in trans])
  for x, bleu in zip(trans, bleus):
    i = x.index
    src_ids = src_tok.encode(sources[i])
    view = {
      'source': sources[i],
      'reference': references[i],
      'words': len(sources[i].split()),
      'output': x.text,
      'bleu': bleu,
      'src': token_labels(src_tok, src_ids[: x.attention.shape[1] - 1] + [data.EOS_ID]),
      'out': token_labels(tgt_tok, x.ids),
      'beam': (n_best or {}).get(i, []),
    }
    view['attention'] = x.attention[:, : len(view['src'])]
    if gold is not None and i in gold['forced']:
      weights, src_words, tgt_words = gold['forced'][i]
      sure, possible = gold['sure'].get(i, set()), gold['possible'].get(i, set())
      predicted = inspection.attention_alignment(weights) if weights.size else set()
      view['forced'] = {
        'src': src_words,
        'tgt': tgt_words,
        'attention': weights,
        'sure': sorted(sure),
        'possible': sorted(possible - sure),
        'aer': inspection.alignment_error_rate([predicted], [sure], [possible]),
      }
    views[i] = view
  return views


def attention_measures(translations: list[evaluation.SplitTranslation]) -> dict:
  """Monotonicity, entropy, maximum weight and coverage deviation of the translations' attention
  (measures.AttentionStatistics): the EOS row is left out of all but coverage, the source EOS column out of
  monotonicity; coverage counts every output step over every source position."""
  stats = measures.AttentionStatistics()
  for x in translations:
    stats.add(x.attention, ends_with_eos=bool(x.ids) and x.ids[-1] == data.EOS_ID)
  return stats.result()


def _heatmaps(run, trans, sources, run_dir, chosen, count, seed, min_words=0, drawing=None) -> tuple[list, list]:
  """Heatmap PNGs of the chosen sentences (example indices), or of `count` random ones whose source has at
  least `min_words` words (any length if none has), drawn by `drawing` (else at once); the paths and the
  sentences."""
  by_index = {x.index: x for x in trans}
  if chosen:
    missing = [i for i in chosen if i not in by_index]
    if missing:
      raise ValueError(
        f'sentence indices {missing} are not in the split (it has {len(by_index)} sentences, '
        f'0..{max(by_index)}); pass indices from that range'
      )
    picks = list(chosen)
  else:
    rng = np.random.default_rng(seed)
    pool = [i for i in sorted(by_index) if len(sources[i].split()) >= min_words] or sorted(by_index)
    picks = sorted(rng.choice(pool, size=min(count, len(pool)), replace=False).tolist())
  src_tok, tgt_tok = run.prepared.src_tokenizer, run.prepared.tgt_tokenizer
  paths = []
  for i in picks:
    x = by_index[i]
    src_ids = src_tok.encode(sources[i])
    src_labels = token_labels(src_tok, src_ids[: x.attention.shape[1] - 1] + [data.EOS_ID])
    out_labels = token_labels(tgt_tok, x.ids)
    weights, cols, rows, title = plots.bounded_panel(
      x.attention[:, : len(src_labels)], src_labels, out_labels, f'{run.name} | test #{i}'
    )
    path = os.path.join(run_dir, f'heatmap_{i}.png')
    (drawing or plots.Drawing(background=False)).draw(
      plots.attention_heatmap, weights, cols, rows, path, f'{title}\n{sources[i][:90]}'
    )
    paths.append(path)
  return paths, [int(i) for i in picks]


class GoldLinks(NamedTuple):
  path: str
  lines: list  # (sure, possible) link sets of each line


def read_pharaoh(pharaoh) -> GoldLinks:
  """The (sure, possible) links of every line of a Pharaoh file given as --pharaoh, read once (it may be a
  pipe): a byte-order mark is dropped, and a malformed line is refused naming the file and the line. Already
  read GoldLinks pass through."""
  if isinstance(pharaoh, GoldLinks):
    return pharaoh
  lines = pharaoh_file.read_lines(pharaoh, '--pharaoh')
  return GoldLinks(pharaoh, [pharaoh_file.parse_sure_possible(line, pharaoh, k) for k, line in enumerate(lines, 1)])


def check_pharaoh(gold: GoldLinks, sources: list[str], targets: list[str], split: str) -> None:
  """Refuses gold links that cannot belong to the split: a line count other than its sentence count, or a
  link naming a word beyond its sentence (AER would silently count it as missed), naming file, line and link."""
  if len(gold.lines) != len(sources):
    raise ValueError(
      f'{gold.path} has {len(gold.lines)} lines but the {split} split has {len(sources)} sentences; '
      'give one Pharaoh line per sentence, in split order'
    )
  for k, ((_, possible), src, tgt) in enumerate(zip(gold.lines, sources, targets), 1):
    pharaoh_file.check_within(possible, len(src.split()), len(tgt.split()), f'{gold.path}:{k}', f'{split} sentence {k}')


def _alignment_error_rates(run, split, pharaoh) -> tuple[Optional[list[float]], Optional[dict]]:
  """AER of every seed against the dataset's gold alignments or a Pharaoh file (one line per example), and
  the gold links with the first seed's forced attention ({'sure', 'possible', 'forced'}, by example index;
  inspection.split_word_attention); (None, None) without gold."""
  if pharaoh:
    gold = read_pharaoh(pharaoh)
    check_pharaoh(gold, *data.raw_texts(run.prepared, split), split)
    gold_lines = gold.lines
    sure = {i: s for i, (s, _) in enumerate(gold_lines)}
    possible = {i: p for i, (_, p) in enumerate(gold_lines)}
  else:
    sure = inspection.gold_alignments_from_batches(run, split)
    if sure is None:
      return None, None
    possible = sure
  out, forced = [], None
  for seed_i in range(len(run.seeds)):
    words = inspection.split_word_attention(run, seed_i, split)
    forced = words if seed_i == 0 else forced
    pred = {i: inspection.attention_alignment(w) if w.size else set() for i, (w, _, _) in words.items()}
    keys = sorted(pred)
    out.append(
      inspection.alignment_error_rate([pred[k] for k in keys], [sure[k] for k in keys], [possible[k] for k in keys])
    )
  return out, {'sure': sure, 'possible': possible, 'forced': forced}


def default_baseline(results: list[dict], name: Optional[str] = None) -> Optional[str]:
  """The variant others are tested against: `name` when given (it must be one of `results`), else the first
  variant whose score does not attend (result['attends'] False), else None."""
  names = [r['variant'] for r in results]
  if name is not None:
    if name not in names:
      raise ValueError(f'--baseline {name} is not one of the variants compared: {", ".join(names)}')
    return name
  return next((r['variant'] for r in results if not stored.attends(r)), None)


LENGTH_SHARE = 0.2  # of alpha, for the longest-sentence verdicts against the baseline; the rest for the corpus


def add_significance(
  results: list[dict],
  texts: list[dict],
  baseline: Optional[str] = None,
  contrasts: str = 'all',
  delta: float = verdicts.DELTA,
) -> None:
  """Sets result['significance'] of every run from verdicts.compare_statistics, over seeds and test
  sentences: 'corpus' holds the per-seed greedy BLEU, mean, sd and t interval over seeds with the test set's
  variance; 'pairs' the contrasts of the declared family `contrasts` this run leads (difference, simultaneous
  interval, p, adjusted p, verdict, seeds to decide); 'by_length' the same per source-length bucket of
  result['greedy_bleu_by_length'] (mean over seeds, 95 % interval), and on the two longest buckets every run
  shares the contrast against the baseline.

  One page, one error budget: with a baseline and length buckets, LENGTH_SHARE of alpha goes to the length
  contrasts (Bonferroni over every bucket and variant tested) and the rest to the corpus family; otherwise
  the corpus family has all of it. `texts[k]` holds run k's 'hypotheses' ({'greedy': one list per seed}),
  'references' and 'sources'. Runs are compared only with runs that translated the same sentences; the
  baseline is the variant named `baseline`, else the first whose score does not attend (result['attends']
  False: `none`, or a user's score that declares so)."""
  groups = {}
  for k, g in enumerate(texts):
    groups.setdefault((tuple(g['references']), tuple(g['sources'])), []).append(k)
  for group, members in enumerate(groups.values()):
    names = [results[k]['variant'] for k in members]
    base = default_baseline([results[k] for k in members], baseline)
    refs, sources = texts[members[0]]['references'], texts[members[0]]['sources']
    stats = [
      np.stack([pair_tests.sentence_statistics(h, refs) for h in texts[k]['hypotheses']['greedy']]) for k in members
    ]
    rows = results[members[0]]['greedy_bleu_by_length']
    tested = tables.longest_shared_buckets([results[k] for k in members]) if base is not None and len(names) > 1 else []
    length_level = verdicts.ALPHA * LENGTH_SHARE if tested else 0.0
    seeds = [results[k]['seeds'] for k in members]  # same-numbered seeds pair (pair_tests.pair_test)
    whole = verdicts.compare_statistics(
      names, stats, base, contrasts=contrasts, delta=delta, level=verdicts.ALPHA - length_level, seeds=seeds
    )
    buckets = _buckets_against_baseline(rows, sources, stats, names, seeds, base, tested, length_level, delta)
    for m, k in enumerate(members):
      results[k]['significance'] = {
        key: whole[key]
        for key in ('method', 'designs', 'baseline', 'alpha', 'level', 'delta', 'contrasts', 'family_size', 'ranked')
      } | {
        'group': group,  # runs on other sentences are another group, never contrasted with this one
        'length_level': length_level,
        'corpus': {'sentences': len(refs), **whole['variants'][m]},
        'pairs': [p for p in whole['pairs'] if p['a'] == names[m]],
        'by_length': [b[m] for b in buckets],
      }


def _buckets_against_baseline(rows, sources, stats, names, seeds, baseline, tested, level, delta) -> list[list[dict]]:
  """Per source-length bucket (rows of greedy_bleu_by_length), per variant: mean BLEU over seeds on the
  bucket's sentences and its 95 % interval; on the `tested` buckets, each variant's contrast against
  `baseline` (verdicts.compare_scores, the buckets sharing `level`: Bonferroni over every bucket and variant
  tested): p, adjusted p, simultaneous interval and decision."""
  words = evaluation.source_words(sources)
  selections = [evaluation.in_bucket(words, row['lo'] - 1, row['hi']) for row in rows]  # rows hold lo + 1
  n_tested = sum(row['bucket'] in tested and len(s) > 1 for row, s in zip(rows, selections))
  out = []
  for row, selection in zip(rows, selections):
    per_seed = [[pair_tests.corpus_bleu(s[k, selection].sum(0)) for k in range(len(s))] for s in stats]
    jack = [pair_tests.jackknife(s, selection) for s in stats] if len(selection) > 1 else None
    contrasts = {}
    if jack is None:
      summaries = [s | {'interval': s['ci']} for s in map(pair_tests.seed_summary, per_seed)]
    elif row['bucket'] in tested:
      kw = dict(contrasts=baseline, delta=delta, level=level / n_tested, plan=False, seeds=seeds)
      result = verdicts.compare_scores(names, per_seed, baseline, jack, **kw)
      summaries, contrasts = result['variants'], {p['a']: p for p in result['pairs']}
    else:
      summaries = [pair_tests.variant_summary(x, j) for x, j in zip(per_seed, jack)]
    bucket = []
    for m, summary in enumerate(summaries):
      entry = {'bucket': row['bucket'], 'lo': row['lo'], 'hi': row['hi'], 'sentences': int(len(selection))}
      entry |= {'bleu': summary['mean'], 'per_seed': per_seed[m], 'interval': summary['interval']}
      entry |= {'p_value': None, 'p_adjusted': None, 'decision': None}
      p = contrasts.get(names[m])
      if p is not None:
        entry |= {'p_value': p['p_value'], 'p_adjusted': p['p_adjusted'], 'decision': p['decision']}
        entry['contrast_interval'] = None if p['decision'] == family.UNRANKED else p['interval']
        entry['equivalence_interval'] = None if p['decision'] == family.UNRANKED else p['equivalence_interval']
      bucket.append(entry)
    out.append(bucket)
  return out


def analyze_runs(
  workdirs: list[str],
  out_dir: Optional[str],
  which: str = 'best',
  report_sentences: int = 200,
  baseline: Optional[str] = None,
  contrasts: str = 'all',
  delta: float = verdicts.DELTA,
  seeds_as_runs: bool = False,
  corpora: Optional[dict] = None,
  ahead: Optional[dict] = None,
  **options,
) -> list[dict]:
  """analyze_run for every directory, the significance of their differences (add_significance), the
  figure comparing them (BLEU by source length), and sentences.json: the sentences the HTML report embeds
  (select_sentences, at most `report_sentences` plus the heatmap sentences; embedded_sentences). With
  `out_dir` None the results are only returned (attnmt.compare): nothing is written. `seeds_as_runs`: the runs
  are seeds of variants trained a seed each: what is returned, and written as analysis.json, is the analysis of
  the variants they pool into (pool_runs), each run's own part is written to <out_dir>/<run>/analysis.json, and
  heatmaps are drawn for the first run of each pooled variant only, as a run of several seeds draws them for its
  first seed. `corpora` (data.prepare_once):
  corpora the caller prepared already (a sweep's); each data config's corpus is prepared once in any case.
  `ahead`: runs analysed earlier by analyze_ahead with the same arguments, reused (and taken out of it)."""
  results, texts, views = [], [], []
  corpora = {} if corpora is None else corpora
  if options.get('heatmap_sentences'):  # every run's split size, before anything is decoded
    for workdir in workdirs:
      config = checkpoints.load_config(workdir)
      sources, _ = data.raw_texts(data.prepare_once(config.data, corpora), options.get('split', 'test'))
      check_sentences(options['heatmap_sentences'], len(sources), options.get('split', 'test'), workdir)
  if options.get('pharaoh'):
    options['pharaoh'] = read_pharaoh(options['pharaoh'])  # once for every run
  with plots.Drawing(background=None if out_dir else False) as drawing:  # heatmaps drawn as the next run decodes
    drawing_runs = _drawing_runs(workdirs, seeds_as_runs)
    key = _ahead_key(out_dir, which, seeds_as_runs, options)
    for workdir in workdirs:
      done = (ahead or {}).pop(workdir, None)
      if done is not None and done[0] == key:
        result, run_texts, run_views = done[1]
      else:
        result, run_texts, run_views = _analyze_workdir(
          workdir, out_dir, which, corpora, drawing, workdir in drawing_runs, options
        )
      results.append(result)
      texts.append(run_texts)
      views.append(run_views)
    # The one analysis every surface shows: of the runs, or of the variants their seeds pool into
    analysis = pool_runs(results, texts, baseline, contrasts, delta) if seeds_as_runs else results
    if not seeds_as_runs:
      add_significance(results, texts, baseline, contrasts, delta)
    if out_dir is None:
      return analysis
    for result in results:
      _write_result(out_dir, result)  # each run's own part (its seeds, attention, heatmaps)
    write_figures(analysis, out_dir, options.get('split', 'test'))
    write_text(os.path.join(out_dir, 'analysis.json'), json.dumps(analysis, indent=1))
    stored.save(os.path.join(out_dir, stored.FILE), results, texts)  # recomputes the statistics without the runs
    heatmap_sentences = sorted({i for r in results for i in r.get('heatmap_sentences', [])})
    # runs trained a seed each are shown as the variants they pool into, by each one's first run (as its heatmaps)
    shown = [k for k, w in enumerate(workdirs) if not seeds_as_runs or w in drawing_runs]
    names = [stored.pooled_name(results[k]) if seeds_as_runs else results[k]['variant'] for k in shown]
    embedded = embedded_sentences(names, [views[k] for k in shown], heatmap_sentences, report_sentences)
    write_text(os.path.join(out_dir, SENTENCES_FILE), json.dumps(embedded, separators=(',', ':')))
    return analysis


SENTENCES_FILE = 'sentences.json'
# What a pooled variant gathers from its runs, seed by seed, beside what its translations give
PER_SEED = ('beam_bleu', 'beam_chrf', 'beam_chrfpp', 'beam_repetition', 'aer', 'attention_by_seed')


def pool_runs(
  results: list[dict], texts: list[dict], baseline=None, contrasts='all', delta=verdicts.DELTA
) -> list[dict]:
  """The analysis of runs trained a seed each (train.seeds as a sweep axis), one result per variant their seeds
  pool into (stored.pool_seeds): the statistics from their translations (analyze_document, so the same as
  --from_translations --pool_seeds gives), each seed's beam scores, AER and attention statistics gathered from
  its run (pooled as a run of several seeds pools them), the first run's heatmaps, and 'workdirs', the runs.
  Refused when the runs translated different sentences."""
  doc, left_out = stored.document(results, texts)
  if left_out:
    raise InputError(
      f"pooling seeds: {', '.join(left_out)} translated other sentences than {results[0]['variant']}: runs pooled into variants "
      'must share one test set; analyse runs of one test set together (or without pooling)'
    )
  pooled = analyze_document(doc, 'the runs', baseline, True, contrasts, delta)
  for variant in pooled:
    runs = [r for r in results if stored.pooled_name(r) == variant['variant']]
    variant['workdirs'] = [r['workdir'] for r in runs]
    variant['workdir'] = ', '.join(variant['workdirs'])
    for key in PER_SEED:
      if all(key in r for r in runs):
        variant[key] = [x for r in runs for x in r[key]]
    if 'attention_by_seed' in variant:
      variant['attention'] = pool_over_seeds(variant['attention_by_seed'])
    for key in ('heatmaps', 'heatmap_sentences', 'step'):
      if key in runs[0]:
        variant[key] = runs[0][key]
  return pooled


def _analyze_workdir(workdir, out_dir, which, corpora, drawing, draws_heatmaps, options) -> tuple:
  run = inspection.load_run(workdir, which, corpora)
  if not draws_heatmaps:
    options = {**options, 'num_heatmaps': 0, 'heatmap_sentences': ()}
  return _analyze_run(run, out_dir, drawing=drawing, **options)


def _drawing_runs(workdirs: list[str], seeds_as_runs: bool) -> set[str]:
  """The runs whose heatmaps are drawn: every run, or with `seeds_as_runs` the first run of each pooled variant
  (in `workdirs`' order), as a run of several seeds draws them for its first seed."""
  if not seeds_as_runs:
    return set(workdirs)
  first = {}
  for workdir in workdirs:
    first.setdefault(inspection.pool_name(checkpoints.load_config(workdir)), workdir)
  return set(first.values())


def _ahead_key(out_dir, which, seeds_as_runs, options) -> str:
  return repr((out_dir, which, seeds_as_runs, sorted(options.items())))


def analyze_ahead(
  ahead: dict,
  workdirs: list[str],
  finished: Collection[str],
  out_dir: str,
  which: str = 'best',
  seeds_as_runs: bool = False,
  corpora: Optional[dict] = None,
  stop: Callable[[], bool] = lambda: False,
  **options,
) -> list[str]:
  """analyze_runs' own part of each run (decoding, scores, heatmaps, the report's sentence views) for the
  `finished` runs of `workdirs` not yet in `ahead`, kept in `ahead` for analyze_runs(workdirs, ..., ahead=ahead)
  with the same arguments to reuse: a sweep runs it on a core that its training has left idle, until `stop()` (checked
  before each run) says the training has ended. Stops at the first run whose directory holds no config yet
  (whether an earlier run of its pool draws the heatmaps is not known before). Returns the runs analysed."""
  readable = []
  for workdir in workdirs:
    if not os.path.exists(os.path.join(workdir, checkpoints.CONFIG_FILE)):
      break
    readable.append(workdir)
  drawing_runs = _drawing_runs(readable, seeds_as_runs)
  key = _ahead_key(out_dir, which, seeds_as_runs, options)
  done = []
  with plots.Drawing() as drawing:
    for workdir in readable:
      if stop():
        break
      if workdir in finished and workdir not in ahead:
        parts = _analyze_workdir(workdir, out_dir, which, corpora, drawing, workdir in drawing_runs, options)
        ahead[workdir] = (key, parts)
        done.append(workdir)
  return done


def write_figures(results: list[dict], out_dir: str, split: str = 'test') -> list[str]:
  """bleu_by_length.png (length_figure) and bleu_by_seed.png (the seed strip) of `results` under `out_dir`: one
  line and one row per result, so results pooled over runs trained a seed each (analyze_translations with
  pool_seeds) draw one per variant."""
  return [
    plots.save(length_figure(results, split), os.path.join(out_dir, 'bleu_by_length.png')),
    plots.seed_strip(
      [r['significance']['corpus'] | {'variant': r['variant']} for r in results],
      os.path.join(out_dir, 'bleu_by_seed.png'),
      f'{split.capitalize()} BLEU (greedy) by seed',
    ),
  ]


def length_figure(results: list[dict], split: str = 'test'):
  """The figure comparing the runs: greedy BLEU by source length, mean over seeds, with the 95% intervals
  of add_significance (a matplotlib Figure)."""
  curves = {r['variant']: r['greedy_bleu_by_length'] for r in results}
  intervals = {r['variant']: [b['interval'] for b in r['significance']['by_length']] for r in results}
  seeds = sorted({len(r['seeds']) for r in results})
  return plots.bleu_by_length_figure(
    curves,
    f'BLEU by source length ({split}, greedy, mean over {"/".join(map(str, seeds))} seed(s))\n'
    "95% intervals: Student's t over seeds with the test set's variance\n(one seed: the test sentences alone)",
    intervals,
    dashed={r['variant'] for r in results if not stored.attends(r)},
  )


def shared_sentences(views: list[dict[int, dict]]) -> list[int]:
  """The sentences every run translated from the same source (sentence_views' indices)."""
  return sorted(i for i in views[0] if all(i in v and v[i]['source'] == views[0][i]['source'] for v in views))


def select_sentences(views: list[dict[int, dict]], must=(), limit: int = 200) -> list[int]:
  """The shared_sentences in `must`, and at most `limit` more: a quarter of them those on which the runs'
  sentence BLEU differs most, the rest spread evenly over source length."""
  shared = shared_sentences(views)
  chosen = [i for i in must if i in set(shared)]
  extra = []
  if len(views) > 1:
    spread = {i: max(v[i]['bleu'] for v in views) - min(v[i]['bleu'] for v in views) for i in shared}
    extra = [i for i in sorted(shared, key=lambda i: (-spread[i], i)) if i not in chosen][: limit // 4]
  taken = set(chosen) | set(extra)
  pool = sorted((i for i in shared if i not in taken), key=lambda i: (views[0][i]['words'], i))
  room = min(limit - len(extra), len(pool))
  if room > 0:
    extra += [pool[k] for k in np.unique(np.linspace(0, len(pool) - 1, room).round().astype(int))]
  return sorted(set(chosen) | set(extra))


def _thousandths(weights: np.ndarray) -> list[list[int]]:
  return np.rint(np.asarray(weights, float) * 1000).astype(int).tolist()


def bounded_heatmap(weights: np.ndarray, rows: list, cols: list, limit: int = plots.HEATMAP_MAX) -> dict:
  """The page's data of one heatmap: {'w': integer thousandths, 'rows', 'cols': labels}, cut to the first
  `limit` rows and columns, with 'truncated': [rows, columns] of the whole matrix when it was cut."""
  weights = np.asarray(weights)
  out = {'w': _thousandths(weights[:limit, :limit]), 'rows': list(rows[:limit]), 'cols': list(cols[:limit])}
  if weights.shape[0] > limit or weights.shape[1] > limit:
    out['truncated'] = [int(weights.shape[0]), int(weights.shape[1])]
  return out


def embedded_sentences(names: list[str], views: list[dict[int, dict]], must=(), limit: int = 200) -> dict:
  """The sentences of the HTML report as JSON-ready data: each named variant's view (sentence_views) of the sentences
  select_sentences picks, with attention weights rounded to 3 decimals and stored as integer thousandths, each
  heatmap cut to plots.HEATMAP_MAX rows and columns (bounded_heatmap)."""
  ids = select_sentences(views, must, limit)
  sentences = []
  for i in ids:
    first = views[0][i]
    entry = {'id': i, 'words': first['words'], 'source': first['source'], 'reference': first['reference'], 'runs': []}
    for v in views:
      view = {k: v[i][k] for k in ('output', 'bleu', 'beam')}
      shown = bounded_heatmap(v[i]['attention'], v[i]['out'], v[i]['src'])
      view.update(out=shown.pop('rows'), src=shown.pop('cols'), **shown)
      if 'forced' in v[i]:
        forced = v[i]['forced']
        weights = forced['attention'] if forced['attention'].size else np.zeros((0, 0))
        shown = bounded_heatmap(weights, forced['tgt'], forced['src'])
        view['forced'] = {'aer': forced['aer'], 'tgt': shown.pop('rows'), 'src': shown.pop('cols'), **shown}
        entry['gold'] = {'sure': [list(x) for x in forced['sure']], 'possible': [list(x) for x in forced['possible']]}
      entry['runs'].append(view)
    sentences.append(entry)
  return {
    'variants': list(names),
    'sentences': sentences,
    'shared': len(shared_sentences(views)),
    'limit': limit,
    'heatmap_sentences': [int(i) for i in must],
  }


def analyze_translations(
  path: str,
  baseline: Optional[str] = None,
  pool_seeds: bool = False,
  contrasts: str = 'all',
  delta: float = verdicts.DELTA,
) -> list[dict]:
  """The analysis results (as analyze_runs returns them, less what needs the model: attention, beam, AER)
  recomputed from a stored translations file (attnmt.analysis.stored); `pool_seeds`: single-seed runs of one
  variant pooled first (stored.pool_seeds)."""
  return analyze_document(stored.load(path), path, baseline, pool_seeds, contrasts, delta)


def analyze_document(
  doc: dict,
  source: str,
  baseline: Optional[str] = None,
  pool_seeds: bool = False,
  contrasts: str = 'all',
  delta: float = verdicts.DELTA,
) -> list[dict]:
  """analyze_translations of a translations document already in memory (stored.load's or stored.document's);
  `source` names where it came from."""
  if pool_seeds:
    doc = stored.pool_seeds(doc)
  refs, srcs = doc['references'], doc['sources']
  results, texts = [], []
  for v in doc['variants']:
    result = {'variant': v['variant'], 'seeds': v['seeds'], 'source': source, 'attends': stored.attends(v)}
    if pool_seeds:
      result['seeds_as_runs'] = True  # each seed trained as its own run (train.seeds as a sweep axis)
    for hyps in v['greedy']:
      scores = evaluation.bleu_chrf(hyps, refs)
      result.setdefault('greedy_bleu', []).append(scores['bleu'])
      result.setdefault('greedy_chrf', []).append(scores['chrf'])
      result.setdefault('greedy_chrfpp', []).append(scores['chrfpp'])
      result.setdefault('greedy_repetition', []).append(measures.repetition_rate(hyps))
      result.setdefault('greedy_bleu_by_length_by_seed', []).append(evaluation.bleu_by_length(hyps, refs, srcs))
      result['bleu_signature'] = scores['bleu_signature']
    result['greedy_bleu_by_length'] = pool_by_length(result['greedy_bleu_by_length_by_seed'])
    results.append(result)
    texts.append({'hypotheses': {'greedy': v['greedy']}, 'references': refs, 'sources': srcs})
  add_significance(results, texts, baseline, contrasts, delta)
  return results
