"""An analysis's per-seed test translations in one compressed file (scoring.analyze_translations recomputes its
statistics from it, without checkpoints, corpus or training).

Every analysis writes `translations.json.gz` beside analysis.md: the references, the sources and each
variant's greedy output per seed. A results page keeps that file under docs/results/<page>/, so that anyone
can recompute its tables (per-seed BLEU and chrF, intervals, the pair tests, BLEU by source length):

    ./launch.sh analyze --from_translations=docs/results/luong/translations.json.gz --out=/tmp/luong
"""

from __future__ import annotations

import gzip
import json
import os
import re

from attnmt.errors import InputError

FILE = 'translations.json.gz'
FORMAT = 1

_SEED_PART = re.compile(r'/seeds=[^/]+$')  # the name part of older runs trained one per seed (train.seeds swept)


def attends(result: dict) -> bool:
  """Whether the run of `result` (a results.json, an analysis result or a stored variant) has a score that
  attends; False marks the baseline without attention, drawn dashed and compared against. Results of runs
  written before the property was stored lack it, and attended."""
  return result.get('attends', True)


def pooled_name(result: dict) -> str:
  """The variant that the run of `result` (a results.json, an analysis result or a stored variant) pools into
  with the other runs of its seeds: its stored 'pool', the name without the seeds axis. Results of runs
  written before the property was stored lack it: their name less a final '/seeds=k' (the sweep's name part
  of train.seeds as an axis)."""
  if 'pool' in result:
    return result['pool']
  return _SEED_PART.sub('', result['variant'])


def document(results: list[dict], texts: list[dict]) -> tuple[dict, list[str]]:
  """The translations document of analyze_runs' results and texts (what `save` writes): the greedy translations
  of every seed of every run that translated the first run's test sentences. Returns it and the variants of the
  runs left out, which translated other sentences (one document holds one test set)."""
  first = texts[0]
  kept = [t['references'] == first['references'] and t['sources'] == first['sources'] for t in texts]
  variants = [
    {
      'variant': r['variant'],
      'seeds': list(r['seeds']),
      'attends': attends(r),  # False: the baseline without attention
      **({'pool': r['pool']} if 'pool' in r else {}),  # the variant its seeds pool into (pooled_name)
      'greedy': t['hypotheses']['greedy'],
    }
    for r, t, keep in zip(results, texts, kept)
    if keep
  ]
  left_out = [r['variant'] for r, keep in zip(results, kept) if not keep]
  doc = {'format': FORMAT, 'references': first['references'], 'sources': first['sources'], 'variants': variants}
  return doc, left_out


def save(path: str, results: list[dict], texts: list[dict]) -> str:
  """Writes the `document` of analyze_runs' results and texts; returns the path. Runs that translated other
  sentences are left out of it, and a line on stdout names them and says why (their rows stay in analysis.json
  and the table)."""
  doc, left_out = document(results, texts)
  if left_out:
    print(
      f'{path} leaves out {len(left_out)} of {len(results)} runs ({", ".join(left_out)}): they translated other test '
      f"sentences than {results[0]['variant']} and one file holds one test set; --from_translations recomputes only "
      'the others (analyse those runs apart to store theirs)',
      flush=True,
    )
  return save_doc(path, doc)


def load(path: str) -> dict:
  """The stored translations, checked: the shape of every field (one InputError line naming the file and the
  field), and one output per reference for every seed of every variant."""
  try:
    with gzip.open(path, 'rt', encoding='utf-8') as f:
      doc = json.load(f)
  except FileNotFoundError:
    raise InputError(f'{path} does not exist; give the translations.json.gz an analysis wrote') from None
  except (OSError, EOFError, json.JSONDecodeError, UnicodeDecodeError) as e:
    raise InputError(
      f'{path} is not a gzipped JSON file of translations ({e}); give the translations.json.gz an analysis wrote'
    ) from None
  if not isinstance(doc, dict) or doc.get('format') != FORMAT or not doc.get('variants'):
    raise InputError(f'{path} is not an attnmt translations file (format {FORMAT}) with at least one variant')
  _check_shape(path, doc)
  n = len(doc['references'])
  if len(doc['sources']) != n:
    raise InputError(f'{path} has {len(doc["sources"])} sources for {n} references; the file is damaged')
  for v in doc['variants']:
    if len(v['greedy']) != len(v['seeds']) or not v['seeds']:
      raise InputError(f"{path}: {v['variant']} lists {len(v['seeds'])} seeds but {len(v['greedy'])} translations")
    twice = sorted({s for s in v['seeds'] if v['seeds'].count(s) > 1})
    if twice:
      raise InputError(
        f"{path}: {v['variant']} lists seed(s) {twice} more than once; one model counted twice is not two seeds"
      )
    for seed, hyps in zip(v['seeds'], v['greedy']):
      if len(hyps) != n:
        raise InputError(f"{path}: {v['variant']} seed {seed} has {len(hyps)} outputs for {n} references")
  return doc


def _strings(x) -> bool:
  return isinstance(x, list) and all(isinstance(s, str) for s in x)


def _check_shape(path: str, doc: dict) -> None:
  """Refuses a valid JSON document of another shape, naming the first field that is not what `save` writes."""

  def bad(field: str, what: str):
    return InputError(
      f'{path}: {field} must be {what}; this is not a translations file an analysis wrote (or it is damaged)'
    )

  for field in ('references', 'sources'):
    if not _strings(doc.get(field)):
      raise bad(field, 'a list of strings, one per test sentence')
  if not isinstance(doc['variants'], list):
    raise bad('variants', 'a list of variants')
  for k, v in enumerate(doc['variants']):
    if not isinstance(v, dict):
      raise bad(f'variants[{k}]', "an object with 'variant', 'seeds' and 'greedy'")
    if not isinstance(v.get('variant'), str):
      raise bad(f'variants[{k}].variant', 'a string (the variant name)')
    where = f"variants[{k}] ({v['variant']})"
    seeds = v.get('seeds')
    if not isinstance(seeds, list) or not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds):
      raise bad(f'{where}.seeds', 'a list of integer seeds')
    if not isinstance(v.get('greedy'), list) or not all(_strings(h) for h in v['greedy']):
      raise bad(f'{where}.greedy', 'a list (one per seed) of lists of output strings')
    if not isinstance(attends(v), bool):
      raise bad(f'{where}.attends', 'true or false')
    if not isinstance(pooled_name(v), str):
      raise bad(f'{where}.pool', 'a string (the variant its seeds pool into)')


def pool_seeds(doc: dict) -> dict:
  """The variants of a loaded translations file (`load`) with seeds trained as separate runs (`train.seeds`
  as a sweep axis) pooled into one variant per `pooled_name`, seeds and outputs in the order they appear.
  Variants whose pooled name is their own are kept as they are.

  What is checked: the runs pooled into one variant translated the same sentences (the file holds one list of
  references and sources, and every seed of every run must have one output per reference: a run with another
  count is refused, naming it), agree on whether the score attends, and have distinct seeds (a seed found twice
  is an error, not a silent duplicate). What is not, because the file does not store it: how each run was
  trained (number of steps, checkpoint, any setting its name does not carry); runs of one pooled name are
  taken to be trained alike (a sweep gives a setting it varies its own name part)."""
  n = len(doc['references'])
  pooled: dict[str, dict] = {}
  for v in doc['variants']:
    name = pooled_name(v)
    into = pooled.setdefault(name, {'variant': name, 'seeds': [], 'attends': attends(v), 'greedy': []})
    if into['attends'] != attends(v):
      raise InputError(f"{v['variant']}: its runs disagree on whether the score attends; they are not one variant")
    counts = sorted({len(h) for h in v['greedy']} - {n})
    if counts:
      raise InputError(
        f"{v['variant']}: {counts[0]} outputs for the {n} stored references, so it translated other sentences than "
        f'the runs it would pool with into {name}; pool only runs that translated the same test set'
      )
    add_seeds(name, into['seeds'], v['seeds'])
    into['greedy'] += list(v['greedy'])
  return {**doc, 'variants': list(pooled.values())}


def add_seeds(name: str, seeds: list, more) -> None:
  """Appends one run's `more` seeds to variant `name`'s pooled `seeds`; a seed found twice is an error, not a
  silent duplicate (every pooling of runs trained one per seed checks it here)."""
  twice = set(seeds) & set(more)
  if twice:
    raise InputError(f'{name}: seed(s) {sorted(twice)} appear in more than one run; pool runs of distinct seeds')
  seeds += list(more)


def save_doc(path: str, doc: dict) -> str:
  """Writes a translations document (`save`'s, or a loaded and pooled one) whole: a temporary file renamed
  over `path`; returns the path."""
  tmp = f'{path}.tmp-{os.getpid()}'
  with gzip.open(tmp, 'wt', encoding='utf-8', compresslevel=9) as f:
    json.dump(doc, f, ensure_ascii=False, separators=(',', ':'))
  os.replace(tmp, path)
  return path
