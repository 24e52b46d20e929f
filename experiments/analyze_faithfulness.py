"""`analyze` on whether the output follows the attention (--interventions) and whether attention is an explanation
(--explanations), per seed of each run; and their tables and verdicts again from a stored faithfulness.json
(--from_faithfulness) or explanations.json files (--from_explanations), no run read."""

import json
import os
import time

from attnmt.analysis import files, inspection
from attnmt.faithfulness import contrasts, counterfactual, figures, page, runner
from attnmt.model import interventions
from experiments import analyze_inputs


def faithfulness(runs: list[str], names: list[str], out, max_sentences: int, which: str, pool_seeds: bool, baseline):
  chosen = interventions.parse(','.join(names))  # a bad name fails before any run is loaded
  if max_sentences < 0:
    raise ValueError(f'--faithfulness_sentences ({max_sentences}) must be >= 0')
  out = analyze_inputs.output_dir(out, runs)
  if pool_seeds:
    inspection.check_pooled_runs(runs)
  os.makedirs(out, exist_ok=True)
  start, results, corpora = time.time(), [], {}
  for workdir in runs:
    run = inspection.load_run(workdir, which, corpora)
    results.append(counterfactual.analyze_run(run, chosen, max_sentences=max_sentences))
  if pool_seeds:
    files.write_text(os.path.join(out, 'faithfulness_runs.json'), json.dumps(results, indent=1) + '\n')
    results = counterfactual.pool_seeds(results)
  files.write_text(os.path.join(out, 'faithfulness.json'), json.dumps(results, indent=1) + '\n')  # kept first
  table = _faithfulness_page(results, baseline)
  files.write_text(os.path.join(out, 'faithfulness.md'), table)
  figures.counterfactual_plot(results, os.path.join(out, 'faithfulness.png'))
  print(table)
  print(f'Wrote faithfulness.md, faithfulness.json and faithfulness.png under {out} in {time.time() - start:.0f} s')


def explanations(runs: list[str], names: list[str], out, which: str, baseline, frozen_attention: bool, **settings):
  """The papers' tests (runner.analyze_run, whose max_sentences, adversarial_sentences, adversarial_steps,
  trained_steps and train_sentences are `settings`) of every run, with Wiegreffe & Pinter's frozen attention
  between runs of one vocabulary where `frozen_attention`."""
  tests = runner.parse_tests(names)  # a bad name fails before any run is loaded
  s = settings
  if min(s['max_sentences'], s['adversarial_sentences'], s['trained_steps'] or 0) < 0 or (
    min(s['adversarial_steps'], s['train_sentences']) < 1
  ):
    raise ValueError(
      f"--explanation_sentences ({s['max_sentences']}), --adversarial_sentences ({s['adversarial_sentences']}) and "
      f"--trained_steps ({s['trained_steps']}) must be >= 0, --adversarial_steps ({s['adversarial_steps']}) and "
      f"--train_sentences ({s['train_sentences']}) >= 1"
    )
  out = analyze_inputs.output_dir(out, runs)
  start, loaded, results, corpora = time.time(), [], [], {}
  for workdir in runs:
    loaded.append(inspection.load_run(workdir, which, corpora))
    results.append(runner.analyze_run(loaded[-1], tests, **settings))
  frozen = []
  if 'wiegreffe_pinter' in tests and frozen_attention:
    for a in loaded:
      for b in loaded:
        if a is not b and runner.attends(a) and runner.same_vocabulary(a, b):
          frozen.append(runner.frozen(a, b, max_sentences=s['max_sentences']))
  paths = page.write(results, out, frozen)  # kept before the verdicts, which may refuse the cells
  if baseline:
    paths = page.write(results, out, frozen, page.contrasts(results, baseline, tests))
  with open(paths[1], encoding='utf-8') as f:
    print(f.read())
  print(f'Wrote explanations.md, explanations.json and explanations.png under {out} in {time.time() - start:.0f} s')


def _faithfulness_page(results: list, reference) -> str:
  """faithfulness.md: the tables, and with a reference the verdicts of every cell against it (one family over
  contrasts.MEASURES x cells)."""
  if not reference:
    return page.counterfactual_markdown(results) + '\nNo reference cell (--baseline): no verdicts.\n'
  return page.counterfactual_markdown(results, contrasts.contrasts(results, contrasts.MEASURES, reference))


def from_explanations(paths: list[str], out, reference) -> None:
  results, frozen, seen = [], [], {}
  for path in paths:
    try:
      with open(path, encoding='utf-8') as f:
        doc = json.load(f)
    except (OSError, ValueError) as e:
      raise ValueError(
        f'{path}: not a readable explanations.json ({e}); give one written by analyze --explanations'
      ) from None
    runs = doc.get('runs') if isinstance(doc, dict) else None
    if not isinstance(runs, list) or not all(isinstance(r, dict) and {'variant', 'tests'} <= set(r) for r in runs):
      raise ValueError(f'{path} has no list of runs; give an explanations.json written by analyze --explanations')
    for r in doc['runs']:
      tests = r['tests'] if isinstance(r['tests'], dict) else {'tests': None}
      damaged = [f"{r['variant']}'s {t}" for t, v in tests.items() if not isinstance(v, dict)]
      if damaged:
        raise ValueError(f'{path}: {damaged[0]} holds no results (the file is damaged); write it again with analyze')
      if r['variant'] in seen:
        raise ValueError(f"{r['variant']} is in both {seen[r['variant']]} and {path}; give each variant once")
      seen[r['variant']] = path
    results += doc['runs']
    frozen += doc.get('frozen') or []
  contrasts.same_test_set(results)  # parts of one analysis: the same sentences, or no merge
  tests = [t for t in runner.TESTS if any(t in r['tests'] for r in results)]
  if not out:
    raise ValueError('--from_explanations needs --out (a directory for the merged explanations.json, .md and .png)')
  analyze_inputs.output_dir(out)
  verdicts = page.contrasts(results, reference, tests) if reference else None
  written = page.write(results, out, frozen, verdicts)
  with open(written[1], encoding='utf-8') as f:
    print(f'From {", ".join(paths)} ({len(results)} run(s); no runs read):\n' + f.read())
  print(f'Wrote explanations.md, explanations.json and explanations.png under {out}')


def from_faithfulness(path: str, out, reference) -> None:
  with open(path, encoding='utf-8') as f:
    results = json.load(f)
  table = _faithfulness_page(results, reference)
  print(f'From {path} ({len(results)} cell(s); no runs read):\n' + table)
  if analyze_inputs.output_dir(out):
    files.write_text(os.path.join(out, 'faithfulness.md'), table)
    print(f'Wrote faithfulness.md under {out}')
