"""report.html: the analysis as one self-contained page (no network: data inline as JSON, vanilla JS, SVG).

It holds the sortable results table with its notes, the BLEU-by-length chart with 95% bootstrap intervals,
a sentence picker (by id, by source length, or by the sentence-BLEU difference between two chosen
variants) and, for the chosen sentence, every variant's greedy attention heatmap side by side (hovering a
cell shows the source token, the output token and the weight), its beam hypotheses with their scores and,
where gold alignments exist, the forced-decoding attention of the reference with the gold links drawn
over it and the sentence's AER.

The page embeds the sentences of report.embedded_sentences (a subset of the split), their attention
weights rounded to 3 decimals and stored as integer thousandths.
"""

from __future__ import annotations

import json
import math
import os
import re


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
    cis = {b['bucket']: b.get('ci') for b in r.get('significance', {}).get('by_length', [])}
    curves[r['variant']] = [
      {'bucket': b['bucket'], 'sentences': b['sentences'], 'bleu': b['bleu'], 'ci': finite(cis.get(b['bucket']))}
      for b in r['greedy_bleu_by_length']
    ]
  return {
    'table': {
      'headers': table['headers'],
      'rows': [[[cell, sort_key(cell)] for cell in row] for row in table['rows']],
      'notes': table.get('notes', []),
      'verdict': table.get('verdict', ''),
    },
    'bleu_by_length': curves,
    'bleu_signature': results[0].get('bleu_signature', '') if results else '',
    **sentences,
  }


def render(data: dict) -> str:
  """The page, with `data` inline ('</' escaped so that no string can close the script element)."""
  payload = json.dumps(data, separators=(',', ':'), ensure_ascii=False).replace('</', '<\\/')
  return _PAGE.replace('/*DATA*/', payload)


def write(path: str, results: list[dict], table: dict, sentences: dict) -> str:
  """Writes report.html at `path` (table: analysis headers, rows of cells, notes, verdict; sentences: the
  JSON that report.embedded_sentences returns)."""
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  with open(path, 'w', encoding='utf-8') as f:
    f.write(render(page_data(results, table, sentences)))
  return path


_PAGE = r"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>attnmt analysis</title>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.2em 2em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 1.6em; border-bottom: 1px solid #ddd; }
h3 { font-size: 1em; margin: 0 0 .3em; }
table { border-collapse: collapse; }
#results th, #results td { border: 1px solid #ccc; padding: 3px 7px; text-align: right; }
#results th { background: #f3f3f3; cursor: pointer; user-select: none; }
#results td:first-child, #results th:first-child { text-align: left; }
.notes, .meta { color: #555; font-size: .9em; max-width: 70em; }
#picker { display: flex; flex-wrap: wrap; gap: .6em 1.2em; align-items: flex-start; }
#picker select[size] { min-width: 34em; font-family: monospace; }
#sentence-head { margin: .8em 0; }
.panels { display: flex; flex-wrap: wrap; gap: 1.5em; align-items: flex-start; }
.panel { border: 1px solid #ddd; padding: .6em; border-radius: 4px; max-width: 46em; }
.panel .output { margin-bottom: .4em; }
svg text { font: 11px monospace; fill: #222; }
.beam td, .beam th { padding: 1px 6px; font-size: .9em; text-align: left; }
#tooltip { position: fixed; pointer-events: none; background: #fffbe6; border: 1px solid #aa8;
  padding: 3px 6px; font: 12px monospace; display: none; z-index: 10; }
.muted { color: #888; }
</style>
</head>
<body>
<h1>Attention analysis</h1>
<p class="meta" id="meta"></p>
<h2>Results</h2>
<table id="results"><thead></thead><tbody></tbody></table>
<div class="notes" id="notes"></div>
<h2>BLEU by source length</h2>
<div id="length-chart"></div>
<h2>Sentences</h2>
<div id="picker">
  <div>
    <label>order by <select id="order">
      <option value="id">id</option><option value="length">source length</option>
      <option value="diff">BLEU difference</option></select></label>
    <span id="diff-pair"> <select id="diff-a"></select> minus <select id="diff-b"></select></span><br>
    <select id="sentence-list" size="9"></select>
  </div>
  <div>
    <label>sentence id <input id="sentence-id" type="number" min="0" style="width:6em"></label>
    <button id="prev">previous</button> <button id="next">next</button>
    <p class="muted" id="picker-message"></p>
  </div>
</div>
<div id="sentence-head"></div>
<div class="panels" id="panels"></div>
<div id="tooltip"></div>
<script type="application/json" id="data">/*DATA*/</script>
<script>
'use strict';
const DATA = JSON.parse(document.getElementById('data').textContent);
const SVG = 'http://www.w3.org/2000/svg';
const COLORS = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b', '#e377c2', '#7f7f7f',
  '#bcbd22', '#17becf'];
const byId = id => document.getElementById(id);

function el(tag, attrs, text) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}
function svgEl(tag, attrs, text) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}
const fmt = (x, d) => (x === null || x === undefined) ? '–' : Number(x).toFixed(d);

// Results table, sortable by any column.
function drawTable() {
  const t = DATA.table, head = document.querySelector('#results thead'), body = document.querySelector('#results tbody');
  const tr = el('tr');
  let sorted = {col: -1, dir: 1};
  t.headers.forEach((h, c) => {
    const th = el('th', {'data-col': c}, h);
    th.addEventListener('click', () => {
      sorted = {col: c, dir: sorted.col === c ? -sorted.dir : 1};
      head.querySelectorAll('th').forEach((x, k) => x.textContent = t.headers[k] + (k === c ? (sorted.dir > 0 ? ' ▲' : ' ▼') : ''));
      fill(sorted);
    });
    tr.appendChild(th);
  });
  head.appendChild(tr);
  function fill(s) {
    const rows = t.rows.slice();
    if (s.col >= 0) rows.sort((a, b) => {
      const x = a[s.col], y = b[s.col];
      if (x[1] === null && y[1] === null) return s.dir * x[0].localeCompare(y[0]);
      if (x[1] === null) return 1;
      if (y[1] === null) return -1;
      return s.dir * (x[1] - y[1]);
    });
    body.replaceChildren(...rows.map(r => { const row = el('tr'); r.forEach(c => row.appendChild(el('td', {}, c[0]))); return row; }));
  }
  fill(sorted);
  const notes = byId('notes');
  t.notes.forEach(n => notes.appendChild(el('p', {}, n + '.')));
  if (t.verdict) notes.appendChild(el('pre', {}, t.verdict));
}

// BLEU by source length: one line per variant, 95% bootstrap intervals as error bars.
function drawLengthChart() {
  const curves = DATA.bleu_by_length, names = Object.keys(curves);
  const buckets = [];
  names.forEach(n => curves[n].forEach(b => { if (!buckets.includes(b.bucket)) buckets.push(b.bucket); }));
  const counts = {};
  curves[names[0]].forEach(b => counts[b.bucket] = b.sentences);
  let top = 1;
  names.forEach(n => curves[n].forEach(b => top = Math.max(top, b.bleu + (b.ci || 0))));
  top = Math.ceil(top * 1.1 / 5) * 5;
  const R = 50 + 6.6 * Math.max(...names.map(n => n.length)), W = 450 + R, H = 300, L = 50, T = 12, B = 46;
  const x = k => L + (buckets.length === 1 ? (W - L - R) / 2 : k * (W - L - R) / (buckets.length - 1));
  const y = v => T + (H - T - B) * (1 - v / top);
  const svg = svgEl('svg', {width: W, height: H, id: 'length-svg'});
  for (let v = 0; v <= top; v += top / 5) {
    svg.appendChild(svgEl('line', {x1: L, x2: W - R, y1: y(v), y2: y(v), stroke: '#eee'}));
    svg.appendChild(svgEl('text', {x: L - 6, y: y(v) + 4, 'text-anchor': 'end'}, v.toFixed(0)));
  }
  buckets.forEach((b, k) => {
    svg.appendChild(svgEl('text', {x: x(k), y: H - B + 16, 'text-anchor': 'middle'}, b));
    svg.appendChild(svgEl('text', {x: x(k), y: H - B + 29, 'text-anchor': 'middle', fill: '#777'}, counts[b] !== undefined ? '(' + counts[b] + ')' : ''));
  });
  svg.appendChild(svgEl('text', {x: (L + W - R) / 2, y: H - 4, 'text-anchor': 'middle'}, 'source length in words (sentences)'));
  svg.appendChild(svgEl('text', {x: 12, y: (T + H - B) / 2, 'text-anchor': 'middle', transform: `rotate(-90 12 ${(T + H - B) / 2})`}, 'BLEU'));
  names.forEach((n, i) => {
    const color = COLORS[i % COLORS.length], pts = curves[n].map(b => [x(buckets.indexOf(b.bucket)), y(b.bleu), b]);
    const g = svgEl('g', {class: 'curve', 'data-variant': n});
    g.appendChild(svgEl('polyline', {points: pts.map(p => p[0] + ',' + p[1]).join(' '), fill: 'none', stroke: color,
      'stroke-width': 2, 'stroke-dasharray': n.startsWith('none') ? '5,3' : ''}));
    pts.forEach(([px, py, b]) => {
      if (b.ci !== null) g.appendChild(svgEl('line', {x1: px, x2: px, y1: y(b.bleu - b.ci), y2: y(b.bleu + b.ci), stroke: color}));
      const c = svgEl('circle', {cx: px, cy: py, r: 3.5, fill: color});
      c.appendChild(svgEl('title', {}, `${n}, ${b.bucket} words: BLEU ${fmt(b.bleu, 2)}` + (b.ci !== null ? ` ± ${fmt(b.ci, 2)}` : '')));
      g.appendChild(c);
    });
    svg.appendChild(g);
    svg.appendChild(svgEl('line', {x1: W - R + 12, x2: W - R + 32, y1: T + 10 + 16 * i, y2: T + 10 + 16 * i, stroke: color, 'stroke-width': 2}));
    svg.appendChild(svgEl('text', {x: W - R + 38, y: T + 14 + 16 * i}, n));
  });
  byId('length-chart').appendChild(svg);
  byId('length-chart').appendChild(el('p', {class: 'notes'}, 'Greedy output of the first seed; error bars: 95% paired-bootstrap intervals. ' + DATA.bleu_signature));
}

// The sentence picker.
const SENTENCES = DATA.sentences;
let current = SENTENCES.length ? SENTENCES[0].id : null;

function difference(s) {
  return s.runs[byId('diff-a').value].bleu - s.runs[byId('diff-b').value].bleu;
}
function ordered() {
  const order = byId('order').value, list = SENTENCES.slice();
  if (order === 'length') list.sort((a, b) => a.words - b.words || a.id - b.id);
  else if (order === 'diff') list.sort((a, b) => difference(b) - difference(a) || a.id - b.id);
  else list.sort((a, b) => a.id - b.id);
  return list;
}
function fillList() {
  const order = byId('order').value, select = byId('sentence-list');
  byId('diff-pair').style.visibility = order === 'diff' ? 'visible' : 'hidden';
  select.replaceChildren(...ordered().map(s => {
    const d = order === 'diff' ? ` Δ${difference(s) >= 0 ? '+' : ''}${difference(s).toFixed(1)}` : '';
    const o = el('option', {value: s.id}, `#${s.id} · ${s.words} w${d} · ${s.source.slice(0, 48)}`);
    if (s.id === current) o.selected = true;
    return o;
  }));
}
function choose(id) {
  const s = SENTENCES.find(x => x.id === id);
  if (!s) { byId('picker-message').textContent = `sentence ${id} is not embedded in this report`; return; }
  byId('picker-message').textContent = '';
  current = id;
  byId('sentence-id').value = id;
  byId('sentence-list').value = String(id);
  drawSentence(s);
}
function step(delta) {
  const list = ordered(), k = list.findIndex(s => s.id === current);
  if (k + delta >= 0 && k + delta < list.length) choose(list[k + delta].id);
}

function setupPicker() {
  ['diff-a', 'diff-b'].forEach((id, k) => {
    DATA.variants.forEach((v, i) => byId(id).appendChild(el('option', {value: i}, v)));
    byId(id).value = String(Math.min(DATA.variants.length - 1, k === 0 ? 1 : 0));
    byId(id).addEventListener('change', fillList);
  });
  byId('order').addEventListener('change', fillList);
  byId('sentence-list').addEventListener('change', e => choose(Number(e.target.value)));
  byId('sentence-id').addEventListener('change', e => choose(Number(e.target.value)));
  byId('prev').addEventListener('click', () => step(-1));
  byId('next').addEventListener('click', () => step(1));
  fillList();
  if (current !== null) choose(current);
  else byId('picker-message').textContent = 'no sentences are embedded in this report';
}

// A heatmap: rows are output tokens, columns source tokens; weights are integer thousandths.
function heatmap(kind, variant, rows, cols, weights, gold) {
  const n = Math.max(rows.length, cols.length), cell = Math.max(9, Math.min(18, Math.floor(520 / Math.max(n, 1))));
  const width = labels => 8 + 6.6 * Math.max(1, ...labels.map(l => l.length));
  const left = width(rows), top = width(cols);
  const svg = svgEl('svg', {class: 'heatmap', 'data-kind': kind, 'data-variant': variant,
    width: left + cell * cols.length + 4, height: top + cell * rows.length + 4});
  cols.forEach((c, j) => {
    const cx = left + cell * j + cell / 2 + 4, cy = top - 4;
    svg.appendChild(svgEl('text', {x: cx, y: cy, transform: `rotate(-90 ${cx} ${cy})`}, c));
  });
  rows.forEach((r, i) => svg.appendChild(svgEl('text', {x: left - 4, y: top + cell * i + cell / 2 + 4, 'text-anchor': 'end'}, r)));
  weights.forEach((row, i) => row.forEach((w, j) => {
    const g = Math.round(255 * (1 - w / 1000));
    svg.appendChild(svgEl('rect', {class: 'cell', x: left + cell * j, y: top + cell * i, width: cell, height: cell,
      fill: `rgb(${g},${g},${g})`, stroke: '#f4f4f4', 'stroke-width': 0.5, 'data-row': i, 'data-col': j, 'data-weight': w}));
  }));
  if (gold) {
    const box = (pairs, cls, attrs) => pairs.forEach(([s, t]) => {
      if (s < cols.length && t < rows.length) svg.appendChild(svgEl('rect', {class: cls, x: left + cell * s + 1.5, y: top + cell * t + 1.5,
        width: cell - 3, height: cell - 3, fill: 'none', 'pointer-events': 'none', ...attrs}));
    });
    box(gold.sure, 'gold-sure', {stroke: '#d62728', 'stroke-width': 2});
    box(gold.possible, 'gold-possible', {stroke: '#ff7f0e', 'stroke-width': 1.5, 'stroke-dasharray': '3,2'});
  }
  const tip = byId('tooltip');
  svg.addEventListener('mouseover', e => {
    const d = e.target.dataset;
    if (d.row === undefined) return;
    tip.textContent = `source: ${cols[d.col]} | output: ${rows[d.row]} | weight: ${(Number(d.weight) / 1000).toFixed(3)}`;
    tip.style.display = 'block';
  });
  svg.addEventListener('mousemove', e => { tip.style.left = (e.clientX + 14) + 'px'; tip.style.top = (e.clientY + 14) + 'px'; });
  svg.addEventListener('mouseleave', () => { tip.style.display = 'none'; });
  return svg;
}

function drawSentence(s) {
  const head = byId('sentence-head');
  head.replaceChildren(el('div', {id: 'current-sentence', 'data-id': s.id}, `Sentence #${s.id} (${s.words} source words)`));
  head.appendChild(el('div', {}, 'source: ' + s.source));
  head.appendChild(el('div', {}, 'reference: ' + s.reference));
  const panels = byId('panels');
  panels.replaceChildren();
  s.runs.forEach((r, i) => {
    const panel = el('div', {class: 'panel', 'data-variant': DATA.variants[i]});
    panel.appendChild(el('h3', {style: `color:${COLORS[i % COLORS.length]}`}, DATA.variants[i]));
    panel.appendChild(el('div', {class: 'output'}, `greedy output (sentence BLEU ${fmt(r.bleu, 1)}): ${r.output}`));
    panel.appendChild(heatmap('output', DATA.variants[i], r.out, r.src, r.w, null));
    if (r.beam && r.beam.length) {
      const table = el('table', {class: 'beam'});
      table.appendChild(el('tr')).append(el('th', {}, 'beam'), el('th', {}, 'score'), el('th', {}, 'hypothesis'));
      r.beam.forEach(([text, score], k) => table.appendChild(el('tr')).append(el('td', {}, k + 1), el('td', {}, fmt(score, 3)), el('td', {}, text)));
      panel.appendChild(table);
    } else panel.appendChild(el('p', {class: 'muted'}, 'no beam search in this analysis'));
    if (r.forced) {
      panel.appendChild(el('p', {class: 'forced-caption'},
        `Reference, forced decoding (words); gold links: solid red (sure), dashed orange (possible); AER ${fmt(r.forced.aer, 3)}`));
      panel.appendChild(heatmap('forced', DATA.variants[i], r.forced.tgt, r.forced.src, r.forced.w, s.gold));
    }
    panels.appendChild(panel);
  });
}

function drawMeta() {
  const n = SENTENCES.length;
  const most = DATA.variants.length > 1 ? `the ${Math.floor(DATA.limit / 4)} on which the variants' sentence BLEU differs most, ` : '';
  byId('meta').textContent = `${DATA.variants.length} variant(s): ${DATA.variants.join(', ')}. The sentence view embeds ${n} of the ` +
    `${DATA.shared} test sentences every variant translated: the heatmap sentences, ${most}the rest of at most ${DATA.limit} ` +
    'spread over source length. Greedy output of the first seed; attention weights rounded to 3 decimals.';
}

drawMeta();
drawTable();
drawLengthChart();
setupPicker();
</script>
</body>
</html>
"""
