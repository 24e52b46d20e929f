"""What the analysis shows of single sentences: the heatmap PNGs of chosen or random ones (draw_heatmaps), each
run's view of every sentence it translated (sentence_views), and the sentences report.html embeds, picked and
bounded (embedded_sentences, written as sentences.json)."""

from __future__ import annotations

import os

import numpy as np

from attnmt import data, plots
from attnmt.analysis import inspection
from attnmt.compare import pair_tests
from attnmt.data.tokenizers import token_labels

SENTENCES_FILE = 'sentences.json'


def check_sentences(chosen, size: int, split: str, workdir: str) -> None:
  """Refuses heatmap sentence indices (--sentences) outside the `split` of `size` sentences, naming them."""
  bad = [i for i in chosen if not 0 <= i < size]
  if bad:
    raise ValueError(
      f'--sentences {",".join(map(str, bad))}: the {split} split of {workdir} has {size} sentences; '
      f'pass indices from 0 to {size - 1}'
    )


def _labelled(run, x, source: str) -> tuple[np.ndarray, list[str], list[str]]:
  """A translation's attention (output tokens x source tokens, EOS included) with the source's and the output's
  token labels."""
  src_tok = run.prepared.src_tokenizer
  src = token_labels(src_tok, src_tok.encode(source)[: x.attention.shape[1] - 1] + [data.EOS_ID])
  return x.attention[:, : len(src)], src, token_labels(run.prepared.tgt_tokenizer, x.ids)


def draw_heatmaps(run, trans, sources, run_dir, chosen, count, seed, min_words=0, drawing=None) -> tuple[list, list]:
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
  paths = []
  for i in picks:
    attention, src_labels, out_labels = _labelled(run, by_index[i], sources[i])
    weights, cols, rows, title = plots.bounded_panel(attention, src_labels, out_labels, f'{run.name} | test #{i}')
    path = os.path.join(run_dir, f'heatmap_{i}.png')
    (drawing or plots.Drawing(background=False)).draw(
      plots.attention_heatmap, weights, cols, rows, path, f'{title}\n{sources[i][:90]}'
    )
    paths.append(path)
  return paths, [int(i) for i in picks]


def sentence_views(run, trans, sources, references, n_best=None, gold=None) -> dict[int, dict]:
  """What the HTML report shows of each translated sentence, by example index: source and reference, the
  greedy output with its sentence BLEU (sacrebleu.sentence_bleu's, pair_tests.sentence_bleus), its attention (output tokens x source
  tokens, EOS included) and both sides' token labels, the beam hypotheses with their scores (`n_best`),
  and where `gold` alignments exist the forced-decoding attention pooled to words with the gold links
  and the sentence's AER."""
  views = {}
  bleus = pair_tests.sentence_bleus([x.text for x in trans], [references[x.index] for x in trans])
  for x, bleu in zip(trans, bleus):
    i = x.index
    attention, src_labels, out_labels = _labelled(run, x, sources[i])
    view = {
      'source': sources[i],
      'reference': references[i],
      'words': len(sources[i].split()),
      'output': x.text,
      'bleu': bleu,
      'src': src_labels,
      'out': out_labels,
      'beam': (n_best or {}).get(i, []),
      'attention': attention,
    }
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
