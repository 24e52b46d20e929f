"""report.html: the analysis as one self-contained page (no network: data inline as JSON, vanilla JS, SVG).

The page is three package files, page/report.html, page/report.css and page/report.js, assembled here with
the data. It holds the sortable results table with its notes and pairwise verdicts, the seed strip (every
variant's seeds, mean and interval, ordered by mean), the BLEU-by-length chart with 95% intervals,
a sentence picker (by id, by source length, or by the sentence-BLEU difference between two chosen
variants) and, for the chosen sentence, every variant's greedy attention heatmap side by side (hovering a
cell shows the source token, the output token and the weight), its beam hypotheses with their scores and,
where gold alignments exist, the forced-decoding attention of the reference with the gold links drawn
over it and the sentence's AER.

The page embeds the sentences of sentences.embedded_sentences (a subset of the split), their attention
weights rounded to 3 decimals and stored as integer thousandths.
"""

from __future__ import annotations

import importlib.resources
import json
import math
import os
import re

from attnmt.analysis import files, pair_table, tables


def sort_key(cell: str):
  """The number a table cell sorts by: its first number ('< 0.001' sorts as 0), or None."""
  if cell.startswith('<'):
    return 0.0
  m = re.search(r'-?\d+(?:\.\d+)?', cell)
  return float(m.group()) if m else None


def page_data(results: list[dict], table: dict, sentences: dict) -> dict:
  """Everything the page shows, JSON-ready."""

  def finite(x):
    return x if x is None or math.isfinite(x) else None

  curves = {}
  for r in results:
    bars = {b['bucket']: b.get('interval') or [None, None] for b in r.get('significance', {}).get('by_length', [])}
    curves[r['variant']] = [
      {
        'bucket': b['bucket'],
        'sentences': b['sentences'],
        'bleu': b['bleu'],
        'lo': finite(bars.get(b['bucket'], [None, None])[0]),
        'hi': finite(bars.get(b['bucket'], [None, None])[1]),
      }
      for b in r['greedy_bleu_by_length']
    ]
  strip = []
  for r in results:
    corpus = r.get('significance', {}).get('corpus', {})
    per_seed = corpus.get('per_seed', r['greedy_bleu'])
    interval = corpus.get('interval') if len(per_seed) > 1 else None
    strip.append(
      {
        'variant': r['variant'],
        'per_seed': per_seed,
        'seeds_list': r.get('seeds'),
        'mean': float(sum(per_seed) / len(per_seed)),
        'interval': interval,
      }
    )
  return {
    'table': {
      'headers': table['headers'],
      'rows': [[[cell, sort_key(cell)] for cell in row] for row in table['rows']],
      'notes': table.get('notes', []),
      'verdict': table.get('verdict', ''),
      'pairs': table.get('pairs', {'headers': [], 'rows': [], 'note': '', 'plan': ''}),
    },
    'bleu_by_length': curves,
    'seed_strip': strip,
    'seeds_text': '/'.join(str(n) for n in sorted({len(r['seeds']) for r in results})),
    'bleu_signature': results[0].get('bleu_signature', '') if results else '',
    **sentences,
  }


def _page_file(name: str) -> str:
  return (importlib.resources.files('attnmt.analysis') / 'page' / name).read_text(encoding='utf-8')


def render(data: dict) -> str:
  """The page (page/report.html with page/report.css and page/report.js inlined), with `data` inline. Every
  '<', '>' and '&' of the JSON is written as a \\u escape, which JSON.parse reads back unchanged: no corpus
  text ('</script>', '<!--<script>', '<img onerror=...>') can end the data element or send the HTML
  tokenizer into another state."""
  payload = json.dumps(data, separators=(',', ':'), ensure_ascii=False)
  payload = payload.replace('<', '\\u003c').replace('>', '\\u003e').replace('&', '\\u0026')
  page = _page_file('report.html')
  for marker, name in (('/*CSS*/\n', 'report.css'), ('/*JS*/\n', 'report.js')):
    page = page.replace(marker, _page_file(name), 1)
  return page.replace('/*DATA*/', payload, 1)


def write(path: str, results: list[dict], table: dict, sentences: dict) -> str:
  """Writes report.html at `path` whole, so a browser open on the old page never sees half a new one (table:
  analysis headers, rows of cells, notes, pairs, verdict; sentences: the JSON that sentences.embedded_sentences
  returns)."""
  files.write_text(path, render(page_data(results, table, sentences)))
  return path


def write_report(results: list[dict], out_dir: str, sentences_file: str = 'sentences.json') -> str:
  """<out_dir>/report.html from analyze_runs' results and the sentences file it wrote beside them: the
  analysis table's columns and notes, the table of pairs with its note and seed plan, the attention verdict, the seed strip,
  BLEU by length, the sentences."""
  headers, rows, notes = tables.analysis_cells(results)
  with open(os.path.join(out_dir, sentences_file)) as f:
    sentences = json.load(f)
  pair_rows = pair_table.pair_cells(results)
  note = pair_table.pairs_note(results) if pair_rows else ''
  pairs = {'headers': pair_table.PAIR_HEADERS, 'rows': pair_rows, 'note': note}
  pairs['plan'] = pair_table.seed_plan_text(results)
  table = {
    'headers': headers,
    'rows': rows,
    'notes': notes,
    'pairs': pairs,
    'verdict': tables.attention_verdict(results).strip(),
  }
  return write(os.path.join(out_dir, 'report.html'), results, table, sentences)
