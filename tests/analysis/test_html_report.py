"""report.html from a real (tiny) analysis, checked as data and in a real browser: headless Debian chromium
driven by Selenium (no console errors, one heatmap per variant, hovering a cell shows its weight, the
picker changes the sentence, the table sorts, the pairs are a table within the page's width).

`./launch.sh test` installs chromium and chromium-driver where it can (root or sudo) and then sets
ATTNMT_REQUIRE_BROWSER=1: the browser test fails instead of skipping when the browser is missing."""

import json
import os
import re
import time

import matplotlib.image
import numpy as np
import pytest
import sacrebleu

from attnmt import plots
from attnmt.analysis import html_report, pair_table, report, scoring, sentences, stored, tables
from attnmt.training import trainer
from experiments.configs import tiny
from browser import browser_or_skip

SCREENSHOT = '/tmp/attnmt_report_screenshot.png'
VARIANTS = ('none', 'additive')


@pytest.fixture(scope='session')  # with xdist_group: built once, though xdist interleaves modules
def analysis(tmp_path_factory):
  """Two tiny variants of two seeds trained for a few steps, analysed with beam 2: (report path, results, page
  data)."""
  root = str(tmp_path_factory.mktemp('report'))
  dirs = []
  for score in VARIANTS:
    config = tiny.get_config()
    config.data.data_dir = os.path.join(root, 'data')
    config.model.score = score
    config.train.seeds = '0,1'
    config.train.num_steps = 4
    config.train.checkpoint_every = 4
    trainer.train_and_evaluate(config, os.path.join(root, score))
    dirs.append(os.path.join(root, score))
  out = os.path.join(root, 'analysis')
  results = report.analyze_runs(dirs, out, beam_size=2, num_heatmaps=2)
  path = html_report.write_report(results, out)
  with open(path, encoding='utf-8') as f:
    page = f.read()
  blob = re.search(r'<script type="application/json" id="data">(.*?)</script>', page, re.S).group(1)
  return path, results, json.loads(blob), page


@pytest.mark.xdist_group('html_report_analysis')  # one worker builds the shared sweep
@pytest.mark.slow
def test_the_report_is_self_contained_and_embeds_the_analysis(analysis):
  path, results, data, page = analysis
  assert not re.search(r'<link|<script[^>]*\bsrc=|<img|@import|url\(', page)  # nothing is fetched
  # The page is assembled from its package files: the style and the script are inlined whole.
  for name in ('report.css', 'report.js'):
    assert html_report._page_file(name) in page
  assert '/*CSS*/' not in page and '/*JS*/' not in page
  assert [r['per_seed'] for r in data['seed_strip']] == [r['greedy_bleu'] for r in results]
  assert data['variants'] == [r['variant'] for r in results] and data['variants'][0].startswith('none/')
  assert [row[0][0] for row in data['table']['rows']] == data['variants']
  headers, rows, _ = tables.analysis_cells(results)
  assert data['table']['headers'] == headers and 'AER' in headers and 'beam BLEU' in headers
  for column in ('monotonicity', 'entropy (norm.)', 'max weight', 'coverage dev.'):  # the attention statistics
    cells = [row[headers.index(column)] for row in rows]
    assert all(re.match(r'-?\d+\.\d\d', c) for c in cells), (column, cells)
  assert [[c[0] for c in row] for row in data['table']['rows']] == rows
  pairs = data['table']['pairs']
  assert pairs['headers'] == pair_table.PAIR_HEADERS and pairs['rows'] == pair_table.pair_cells(results)
  (pair,) = [p for r in results for p in r['significance']['pairs']]  # two variants: one pair
  verdict = pair_table.PAIR_HEADERS.index('verdict')
  assert pairs['rows'][0][0] == f"{pair['a']} − {pair['b']}" and pairs['rows'][0][verdict] == pair['verdict']
  assert (
    pair['decision'] in ('greater', 'equivalent', 'undecided') and pair['level'] == results[0]['significance']['level']
  )
  assert '2 seed(s) per variant' in pairs['note'] and 'every pair of the variants (1 contrast(s))' in pairs['note']
  assert 'Bonferroni' in pairs['note'] and 'Holm' not in pairs['note'] and 'bootstrap' not in pairs['note']
  # the seed plan is embedded, and there is one exactly when the pair is undecided
  assert pairs['plan'] == pair_table.seed_plan_text(results) and bool(pairs['plan']) == (
    pair['decision'] == 'undecided'
  )
  # The split has 40 sentences, under the limit of 200: all are embedded, the heatmap sentences among them.
  ids = [s['id'] for s in data['sentences']]
  assert ids == list(range(40)) and data['shared'] == 40
  assert set(results[0]['heatmap_sentences']) <= set(ids)
  for s in data['sentences']:
    for run in s['runs']:
      assert run['bleu'] == pytest.approx(sacrebleu.sentence_bleu(run['output'], [s['reference']]).score)
      w = np.array(run['w'])
      assert w.shape == (len(run['out']), len(run['src'])) and run['src'][-1] == '</s>'
      assert w.dtype.kind == 'i' and np.all(np.abs(w.sum(1) - 1000) <= len(run['src']))  # rows of thousandths
      assert 1 <= len(run['beam']) <= 2 and [b[1] for b in run['beam']] == sorted(
        (b[1] for b in run['beam']), reverse=True
      )
      forced = run['forced']  # the synthetic task has gold alignments
      assert np.array(forced['w']).shape == (len(forced['tgt']), len(forced['src'])) and 0 <= forced['aer'] <= 1
    assert s['gold']['sure'] and all(0 <= a < len(s['runs'][0]['forced']['src']) for a, _ in s['gold']['sure'])
  print(f'report.html: {os.path.getsize(path)} bytes for {len(ids)} sentences x {len(data["variants"])} variants')


@pytest.mark.xdist_group('html_report_analysis')  # one worker builds the shared sweep
def test_the_stored_translations_give_the_analysis_again(analysis):
  path, results, _, _ = analysis
  again = scoring.analyze_translations(os.path.join(os.path.dirname(path), stored.FILE))
  assert [r['variant'] for r in again] == [r['variant'] for r in results]
  for r, a in zip(results, again):
    assert a['greedy_bleu'] == pytest.approx(r['greedy_bleu']) and a['greedy_chrf'] == pytest.approx(r['greedy_chrf'])
    # The jackknife over sentences has no random seed: the same translations give every statistic again, exactly.
    assert a['significance'] == r['significance']


def test_select_sentences_keeps_the_must_ones_the_largest_differences_and_spreads_over_length():
  views = [
    {i: {'source': f's{i}', 'words': i % 10, 'bleu': 0.0} for i in range(100)},
    {i: {'source': f's{i}', 'words': i % 10, 'bleu': float(i == 57) * 50 + float(i == 3) * 20} for i in range(100)},
  ]
  views[1][99]['source'] = 'another sentence'  # not the same source in both runs: never shown
  chosen = sentences.select_sentences(views, must=[98, 99], limit=8)
  assert 99 not in chosen and 98 in chosen and {57, 3} <= set(chosen) and len(chosen) == 9
  words = sorted(views[0][i]['words'] for i in chosen if i not in (98, 57, 3))
  assert words[0] == 0 and words[-1] == 9  # the rest spans the lengths
  assert sentences.select_sentences(views[:1], limit=500) == list(range(100))


@pytest.mark.xdist_group('html_report_analysis')  # one worker builds the shared sweep
def test_the_report_in_a_real_browser(analysis):
  from selenium.webdriver.common.action_chains import ActionChains
  from selenium.webdriver.common.by import By
  from selenium.webdriver.support.ui import Select

  path, _, data, _ = analysis
  browser = browser_or_skip()
  start = time.perf_counter()
  try:
    browser.get('file://' + os.path.abspath(path))
    css = browser.find_elements
    first = data['sentences'][0]
    assert browser.find_element(By.ID, 'current-sentence').get_attribute('data-id') == str(first['id'])
    heatmaps = css(By.CSS_SELECTOR, 'svg.heatmap[data-kind="output"]')
    assert [h.get_attribute('data-variant') for h in heatmaps] == data['variants']
    assert len(css(By.CSS_SELECTOR, 'svg.heatmap[data-kind="forced"]')) == len(data['variants'])
    assert len(css(By.CSS_SELECTOR, 'svg.heatmap[data-kind="forced"] .gold-sure')) == 2 * len(first['gold']['sure'])
    assert len(css(By.CSS_SELECTOR, '.beam')) == len(data['variants'])
    assert len(css(By.CSS_SELECTOR, '#length-svg .curve')) == len(data['variants'])
    # The seed strip: one row per variant, ordered by mean BLEU (bottom to top), a dot per seed.
    strips = css(By.CSS_SELECTOR, '#seed-svg g.strip')
    by_mean = sorted(data['seed_strip'], key=lambda r: r['mean'])
    assert [g.get_attribute('data-variant') for g in strips] == [r['variant'] for r in by_mean]
    assert all(len(g.find_elements(By.CSS_SELECTOR, 'circle.seed')) == 2 for g in strips)

    # Hovering a known cell of the second variant shows its tokens and weight.
    run, row, col = first['runs'][1], 1, len(first['runs'][1]['src']) - 2
    cell = heatmaps[1].find_element(By.CSS_SELECTOR, f'rect.cell[data-row="{row}"][data-col="{col}"]')
    ActionChains(browser).move_to_element(cell).perform()
    tooltip = browser.find_element(By.ID, 'tooltip').text
    assert tooltip == f'source: {run["src"][col]} | output: {run["out"][row]} | weight: {run["w"][row][col] / 1000:.3f}'

    # The picker changes the sentence: by id, then by the BLEU difference between the two variants.
    last = data['sentences'][-1]
    Select(browser.find_element(By.ID, 'sentence-list')).select_by_value(str(last['id']))
    assert browser.find_element(By.ID, 'current-sentence').get_attribute('data-id') == str(last['id'])
    labels = [
      t.text for t in css(By.CSS_SELECTOR, 'svg.heatmap[data-kind="output"]')[0].find_elements(By.TAG_NAME, 'text')
    ]
    assert labels[: len(last['runs'][0]['src'])] == last['runs'][0]['src']
    Select(browser.find_element(By.ID, 'order')).select_by_value('diff')
    options = Select(browser.find_element(By.ID, 'sentence-list')).options
    diff = {s['id']: s['runs'][1]['bleu'] - s['runs'][0]['bleu'] for s in data['sentences']}
    top = max(diff, key=lambda i: (diff[i], -i))
    assert options[0].get_attribute('value') == str(top)
    Select(browser.find_element(By.ID, 'sentence-list')).select_by_index(0)
    assert browser.find_element(By.ID, 'current-sentence').get_attribute('data-id') == str(top)

    # The results table sorts by a column: AER, ascending.
    headers = css(By.CSS_SELECTOR, '#results th')
    aer = [h.text for h in headers].index('AER')
    headers[aer].click()
    cells = [r.find_elements(By.TAG_NAME, 'td')[aer].text for r in css(By.CSS_SELECTOR, '#results tbody tr')]
    means = [float(c.split(' ± ')[0]) for c in cells]  # two seeds: mean ± sd
    assert means == sorted(means)

    # The pairs are a table, one row per pair with its cells, inside the page's width (not a block of text
    # running off its right edge); the test and its family are stated under it.
    pair_rows = css(By.CSS_SELECTOR, '#pairs-table tbody tr')
    want = data['table']['pairs']['rows']
    assert [[td.text for td in r.find_elements(By.TAG_NAME, 'td')] for r in pair_rows] == want and len(want) == 1
    assert [th.text for th in css(By.CSS_SELECTOR, '#pairs-table th')] == pair_table.PAIR_HEADERS
    page_width = browser.execute_script('return document.documentElement.clientWidth')
    right = browser.execute_script("return document.getElementById('pairs-table').getBoundingClientRect().right")
    assert right <= page_width, (right, page_width)
    notes = browser.find_element(By.CSS_SELECTOR, '#pairs p.notes').text
    assert 'Bonferroni' in notes and 'Holm' not in notes

    browser.execute_script('window.scrollTo(0, 0)')
    ActionChains(browser).move_to_element(
      css(By.CSS_SELECTOR, 'svg.heatmap[data-kind="output"]')[1].find_elements(By.CSS_SELECTOR, 'rect.cell')[8]
    ).perform()
    browser.save_screenshot(SCREENSHOT)
    severe = [e for e in browser.get_log('browser') if e['level'] == 'SEVERE']
    assert not severe, severe
  finally:
    browser.quit()
  print(f'browser part: {time.perf_counter() - start:.1f} s; screenshot {SCREENSHOT}')


HOSTILE = '<!--<script> </script><img src=x onerror="document.title=\'owned\'"> &amp; a</b>'


@pytest.mark.xdist_group('html_report_analysis')  # one worker builds the shared sweep
def test_corpus_text_cannot_end_or_escape_the_inline_data(analysis):
  """Hostile corpus text in every string the page embeds: the data element stays whole and parses back to
  the same strings, in Python and in the browser; nothing from the corpus becomes an element."""
  _, _, data, _ = analysis
  hostile = json.loads(json.dumps(data))
  first = hostile['sentences'][0]
  first['source'], first['reference'] = HOSTILE + ' source', HOSTILE + ' reference'
  first['runs'][0]['output'] = HOSTILE + ' output'
  page = html_report.render(hostile)
  blob = re.search(r'<script type="application/json" id="data">(.*?)</script>', page, re.S).group(1)
  assert json.loads(blob) == hostile and '<' not in blob and '&' not in blob
  path = os.path.join(os.path.dirname(SCREENSHOT), 'attnmt_hostile_report.html')
  with open(path, 'w', encoding='utf-8') as f:
    f.write(page)
  from selenium.webdriver.common.by import By

  browser = browser_or_skip()
  try:
    browser.get('file://' + path)
    assert browser.title == 'attnmt analysis'  # no handler from the corpus ran
    assert len(browser.find_elements(By.CSS_SELECTOR, '#results tbody tr')) == len(hostile['variants'])
    assert not browser.find_elements(By.TAG_NAME, 'img') and not browser.find_elements(By.TAG_NAME, 'b')
    head = browser.find_element(By.ID, 'sentence-head').text
    assert HOSTILE + ' source' in head and HOSTILE + ' reference' in head
    assert HOSTILE + ' output' in browser.find_element(By.CSS_SELECTOR, '.panel .output').text
    assert len(browser.find_elements(By.CSS_SELECTOR, 'svg.heatmap[data-kind="output"]')) == len(hostile['variants'])
    severe = [e for e in browser.get_log('browser') if e['level'] == 'SEVERE']
    assert not severe, severe
  finally:
    browser.quit()


def test_a_long_sentence_heatmap_is_truncated_and_the_page_says_so():
  """A 300 x 250 attention matrix is embedded as its first 200 x 200 cells, labels cut alike, with the full
  size for the page's note; a small one whole."""
  weights = np.full((300, 250), 0.004)
  rows, cols = [f'o{i}' for i in range(300)], [f's{j}' for j in range(250)]
  shown = sentences.bounded_heatmap(weights, rows, cols)
  assert np.asarray(shown['w']).shape == (200, 200) and shown['w'][0][0] == 4
  assert shown['rows'] == rows[:200] and shown['cols'] == cols[:200] and shown['truncated'] == [300, 250]
  small = sentences.bounded_heatmap(weights[:3, :2], rows[:3], cols[:2])
  assert np.asarray(small['w']).shape == (3, 2) and 'truncated' not in small
  view = {
    'words': 250,
    'source': 'x',
    'reference': 'y',
    'output': 'z',
    'bleu': 0.0,
    'beam': [],
    'src': cols,
    'out': rows,
    'attention': weights,
  }
  entry = sentences.embedded_sentences(['v'], [{0: view}])['sentences'][0]['runs'][0]
  assert entry['truncated'] == [300, 250] and len(entry['w']) == 200 and len(entry['src']) == 200
  script = open(os.path.join(os.path.dirname(html_report.__file__), 'page', 'report.js')).read()
  assert 'heatmap truncated: the first ${shown.length} of ${rows} output' in script


def test_a_long_sentence_heatmap_png_is_truncated_and_its_title_says_so(tmp_path):
  """The analysis's heatmap PNG of a 6,001-token source is drawn from its first 200 columns (the figure
  of all of them took 3.5 GB), its title naming the cut; a short one whole, its title unchanged."""
  weights = np.full((3, 6001), 1 / 6001)
  cols, rows = [f's{j}' for j in range(6001)], ['a', 'b', '</s>']
  cut, shown_cols, shown_rows, title = plots.bounded_panel(weights, cols, rows, 'run | test #4')
  assert cut.shape == (3, 200) and shown_cols == cols[:200] and shown_rows == rows
  assert title == 'run | test #4 (truncated: the first 3 of 3 output and 200 of 6001 source tokens)'
  path = plots.attention_heatmap(cut, shown_cols, shown_rows, str(tmp_path / 'h.png'), title)
  assert matplotlib.image.imread(path).shape[1] < 10_000  # pixels wide: 200 columns' worth, not 6,001
  whole = plots.bounded_panel(weights[:, :5], cols[:5], rows, 'run | test #4')
  assert whole[0].shape == (3, 5) and whole[3] == 'run | test #4'
