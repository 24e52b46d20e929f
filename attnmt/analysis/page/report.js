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
  drawPairs(t.pairs);
  if (t.verdict) notes.appendChild(el('pre', {}, t.verdict));
}

// The pairs: one row each (pair, difference, interval, p, adjusted p, verdict, seeds needed), the test and its
// family below, then the seed plan.
function drawPairs(pairs) {
  const box = byId('pairs');
  if (!pairs || !pairs.rows.length) return;
  const table = el('table', {id: 'pairs-table'}), head = el('tr');
  pairs.headers.forEach(h => head.appendChild(el('th', {}, h)));
  table.appendChild(el('thead')).appendChild(head);
  const body = table.appendChild(el('tbody'));
  pairs.rows.forEach(r => { const row = el('tr'); r.forEach(c => row.appendChild(el('td', {}, c))); body.appendChild(row); });
  box.appendChild(el('h3', {}, 'Pairs'));
  box.appendChild(table);
  if (pairs.note) box.appendChild(el('p', {class: 'notes'}, pairs.note));
  if (pairs.plan) box.appendChild(el('pre', {}, pairs.plan));
}

// The ranking at a glance: one row per variant ordered by mean BLEU, its seeds as dots, the mean as a bar,
// the 95% interval (t over seeds, test set's variance added) as a line; one seed: no line, and no ranking.
function drawSeedStrip() {
  const rows = DATA.seed_strip.slice().sort((a, b) => a.mean - b.mean);
  let lo = Infinity, hi = -Infinity;
  rows.forEach(r => { r.per_seed.concat(r.interval || []).forEach(v => { lo = Math.min(lo, v); hi = Math.max(hi, v); }); });
  lo = Math.floor(lo - 1); hi = Math.ceil(hi + 1);
  const L = 20 + 6.6 * Math.max(...rows.map(r => r.variant.length)), W = L + 460, T = 10, rowH = 24, H = T + rowH * rows.length + 36;
  const x = v => L + (W - L - 20) * (v - lo) / (hi - lo), y = k => T + rowH * (rows.length - 1 - k) + rowH / 2;
  const svg = svgEl('svg', {width: W, height: H, id: 'seed-svg'});
  const step = Math.max(1, Math.ceil((hi - lo) / 8));
  for (let v = Math.ceil(lo); v <= hi; v += step) {
    svg.appendChild(svgEl('line', {x1: x(v), x2: x(v), y1: T, y2: H - 30, stroke: '#eee'}));
    svg.appendChild(svgEl('text', {x: x(v), y: H - 16, 'text-anchor': 'middle'}, String(v)));
  }
  svg.appendChild(svgEl('text', {x: (L + W) / 2, y: H - 2, 'text-anchor': 'middle'}, 'test BLEU (greedy)'));
  rows.forEach((r, k) => {
    const g = svgEl('g', {class: 'strip', 'data-variant': r.variant});
    g.appendChild(svgEl('text', {x: L - 8, y: y(k) + 4, 'text-anchor': 'end'}, r.variant));
    if (r.interval && r.per_seed.length > 1) g.appendChild(svgEl('line', {x1: x(r.interval[0]), x2: x(r.interval[1]), y1: y(k), y2: y(k), stroke: '#4a7ab5', 'stroke-width': 3}));
    g.appendChild(svgEl('line', {x1: x(r.mean), x2: x(r.mean), y1: y(k) - 8, y2: y(k) + 8, stroke: '#1f3b63', 'stroke-width': 3}));
    r.per_seed.forEach((v, j) => {
      const c = svgEl('circle', {cx: x(v), cy: y(k) + (j % 3 - 1) * 3, r: 4, fill: '#d9822b', stroke: '#000', 'stroke-width': 0.5, class: 'seed'});
      c.appendChild(svgEl('title', {}, `${r.variant}, seed ${r.seeds_list ? r.seeds_list[j] : j}: BLEU ${fmt(v, 2)}`));
      g.appendChild(c);
    });
    svg.appendChild(g);
  });
  byId('seed-chart').appendChild(svg);
  const one = rows.every(r => r.per_seed.length < 2);
  byId('seed-chart').appendChild(el('p', {class: 'notes'}, one
    ? 'One seed per variant: the variants are not ranked (no seed variance is measured). Train with train.seeds=0,1,2 to rank them.'
    : "Dots: seeds; bar: mean; line: 95% interval (Student's t over seeds, the test set's variance added). The pairs are under the table."));
}

// BLEU by source length: one line per variant, 95% bootstrap intervals as error bars.
function drawLengthChart() {
  const curves = DATA.bleu_by_length, names = Object.keys(curves);
  const buckets = [];
  names.forEach(n => curves[n].forEach(b => { if (!buckets.includes(b.bucket)) buckets.push(b.bucket); }));
  const counts = {};
  curves[names[0]].forEach(b => counts[b.bucket] = b.sentences);
  let top = 1;
  names.forEach(n => curves[n].forEach(b => top = Math.max(top, b.hi !== null ? b.hi : b.bleu)));
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
      if (b.lo !== null) g.appendChild(svgEl('line', {x1: px, x2: px, y1: y(b.lo), y2: y(b.hi), stroke: color}));
      const c = svgEl('circle', {cx: px, cy: py, r: 3.5, fill: color});
      c.appendChild(svgEl('title', {}, `${n}, ${b.bucket} words: BLEU ${fmt(b.bleu, 2)}` + (b.lo !== null ? ` [${fmt(b.lo, 2)}, ${fmt(b.hi, 2)}]` : '')));
      g.appendChild(c);
    });
    svg.appendChild(g);
    svg.appendChild(svgEl('line', {x1: W - R + 12, x2: W - R + 32, y1: T + 10 + 16 * i, y2: T + 10 + 16 * i, stroke: color, 'stroke-width': 2}));
    svg.appendChild(svgEl('text', {x: W - R + 38, y: T + 14 + 16 * i}, n));
  });
  byId('length-chart').appendChild(svg);
  byId('length-chart').appendChild(el('p', {class: 'notes'}, `Greedy output, mean over ${DATA.seeds_text} seed(s); error bars: 95% intervals, Student's t over seeds with the test set's variance (one seed: the test sentences alone). ` + DATA.bleu_signature));
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

function truncation([rows, cols], shown) {
  // A long sentence's heatmap is cut to its first rows and columns (plots.HEATMAP_MAX) to keep the page small.
  const shownCols = shown.length ? shown[0].length : 0;
  return el('p', {class: 'truncated muted'}, `heatmap truncated: the first ${shown.length} of ${rows} output ` +
    `tokens and ${shownCols} of ${cols} source tokens are drawn`);
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
    if (r.truncated) panel.appendChild(truncation(r.truncated, r.w));
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
      if (r.forced.truncated) panel.appendChild(truncation(r.forced.truncated, r.forced.w));
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
    'spread over source length. Sentences: greedy output of the first seed; attention weights rounded to 3 decimals.';
}

drawMeta();
drawTable();
drawSeedStrip();
drawLengthChart();
setupPicker();
