"""Seeds until decided: the sweep with `sweep.rounds` > 0 trains its variants in rounds of
`sweep.seeds_per_round` seeds each, looks at the data after every round (attnmt.compare.sequential), and stops
when every contrast of the family is ranked or equivalent, or after `sweep.rounds` rounds.

    ./launch.sh sweep --config=experiments/configs/decided.py --workdir=runs/decided \
        --config.sweep.rounds=4 --config.sweep.seeds_per_round=5

Round r is an ordinary sweep of seeds (r - 1) * n .. r * n - 1 in <workdir>/round-r (its own tables and
analysis, the same command with that workdir and those seeds, so a killed round resumes where it stopped);
the looks, which pool every round so far, are written to <workdir>/rounds.md and rounds.json. The design
is declared in <workdir>/design.json before the first round; running again with another design there is
refused.
"""

import json
import os
import signal
import subprocess
import sys

from attnmt.analysis import files, formatting, pair_table, stored
from attnmt.compare import family, sequential
from attnmt.errors import ConfigError
from attnmt.model.config import canonical_section
from attnmt.training import trainer
from experiments import cores

DONE = 'round.json'  # written in a round's directory once its sweep and analysis have finished


def design_of(config) -> sequential.Design:
  s = config.sweep
  return sequential.Design(
    seeds_per_round=int(s.seeds_per_round),
    rounds=int(s.rounds),
    spending=str(s.spending),
    delta=float(s.delta),
    contrasts=str(s.contrasts),
    first_seed=int(s.first_seed),
  )


def run(config, root: str) -> list[dict]:
  """Every round still needed, then the looks; returns them. Nothing is written before the design and every
  setting pass their checks."""
  design = design_of(config)
  _check(config, root, design)
  sequential.declare(root, design, training(config), write=not config.sweep.report_only)
  print(
    f'seeds until decided: up to {design.rounds} round(s) of {design.seeds_per_round} seeds per variant '
    f'(looks at {design.schedule} seeds), alpha {design.alpha:g} spent {design.spending} '
    f"({', '.join(f'{x:.4f}' for x in design.levels)}), margin ±{design.delta:g} BLEU, contrasts {design.contrasts}"
  )
  looks = []
  for r in range(design.rounds):
    directory = os.path.join(root, f'round-{r + 1}')
    seeds = design.round_seeds(r)
    if config.sweep.report_only and not os.path.exists(os.path.join(directory, DONE)):
      print(f'\n(report only: round {r + 1} was not trained; the looks end at round {r})')
      break
    if not os.path.exists(os.path.join(directory, DONE)):
      print(f'\n=== round {r + 1}: seeds {seeds[0]}..{seeds[-1]} -> {directory}', flush=True)
      _train_round(directory, seeds)
      if not os.path.exists(os.path.join(directory, 'analysis', stored.FILE)):  # what the next look reads
        raise ConfigError(
          f'round {r + 1} trained but {directory}/analysis/{stored.FILE} is missing: the looks read its '
          'translations; run the same command again to write them'
        )
      files.write_text(os.path.join(directory, DONE), json.dumps({'seeds': seeds}) + '\n')
    else:
      print(f'\n=== round {r + 1}: finished earlier ({directory})')
    looks = sequential.replay(design, [_round(os.path.join(root, f'round-{i + 1}'), design, i) for i in range(r + 1)])
    page = rounds_page(design, looks, [_minutes(os.path.join(root, f'round-{i + 1}')) for i in range(r + 1)])
    files.write_text(os.path.join(root, 'rounds.md'), page)
    files.write_text(os.path.join(root, 'rounds.json'), json.dumps(looks, indent=1) + '\n')
    print('\n' + page)
    if not sequential.open_contrasts(looks[-1]):
      print(f'Every contrast decided after round {r + 1}; no more rounds.')
      break
  else:
    print(
      f'Cap reached: {len(sequential.open_contrasts(looks[-1]))} contrast(s) undecided after {design.rounds} rounds.'
    )
  print(f'Wrote {os.path.join(root, "rounds.md")} and rounds.json')
  return looks


def _check(config, root: str, design: sequential.Design) -> None:
  """What a rounds sweep refuses before it writes anything: a report of no finished round, rounds without the
  analysis their looks read, train.seeds on the command line (the design names the seeds), and any setting
  training would refuse (trainer.check_config, on round 1's seeds)."""
  if config.sweep.report_only and not os.path.exists(os.path.join(root, 'round-1', DONE)):
    raise ConfigError(f'sweep.report_only: no finished round under {root}; train first (without report_only)')
  if not config.sweep.analyze:
    raise ConfigError(
      "sweep.analyze=false: the rounds' looks read each round's translations from its analysis; drop it, or set "
      'sweep.rounds=0 for a sweep without looks'
    )
  given = [a for a in sys.argv[1:] if a.lstrip('-').split('=')[0] == 'config.train.seeds']  # absl: -f or --f
  if given:
    raise ConfigError(
      f'{given[0]}: a rounds sweep trains the seeds its design names (round r: sweep.first_seed + '
      '(r - 1) x sweep.seeds_per_round on); drop it, or set --config.sweep.first_seed'
    )
  first = config.copy_and_resolve_references()
  with first.unlocked():
    first.train.seeds = ','.join(map(str, design.round_seeds(0)))
  trainer.check_config(first)


def training(config) -> dict:
  """What each round trains beside its seeds, as design.json binds it: the model (every component option
  written out), data (but the cache folder data.data_dir) and train sections without train.seeds, and the sweep's
  variants (its axes and their shorthands)."""
  train = {k: v for k, v in config.train.to_dict().items() if k != 'seeds'}
  variants = ('scores', 'query_timings', 'windows', 'axes', 'cases')
  bound = {
    'model': canonical_section(config.model.to_dict()),
    'data': {k: v for k, v in config.data.to_dict().items() if k != 'data_dir'},  # where the corpus is cached
    'train': train,
    'sweep': {k: config.sweep[k] for k in variants if k in config.sweep},
  }
  return json.loads(json.dumps(bound))  # as design.json holds it (tuples as lists)


def _train_round(directory: str, seeds: list[int]) -> None:
  """The same sweep command on the round's directory and seeds, as a child process (SIGTERM and SIGINT
  passed on: the round stops as a sweep does and resumes when the command runs again)."""
  command = [sys.executable, '-m', 'experiments.sweep', *sys.argv[1:], f'--workdir={directory}']
  command += [f'--config.train.seeds={",".join(map(str, seeds))}', '--config.sweep.rounds=0']
  with cores.fork_quietly():
    child = subprocess.Popen(command)

  def forward(signum, frame):
    del frame
    if child.poll() is None:
      child.send_signal(signum)

  previous = {s: signal.signal(s, forward) for s in (signal.SIGTERM, signal.SIGINT)}
  try:
    status = child.wait()
  finally:
    for s, handler in previous.items():
      signal.signal(s, handler)
  if status != 0:
    print(f'round in {directory} stopped (status {status}); run the same command again to resume it', file=sys.stderr)
    sys.exit(status if status > 0 else 128 - status)


def _round(directory: str, design: sequential.Design, r: int) -> dict:
  """One finished round's translations: names, references, each variant's per-seed outputs."""
  doc = stored.load(os.path.join(directory, 'analysis', stored.FILE))
  for v in doc['variants']:
    if list(v['seeds']) != design.round_seeds(r):
      raise ConfigError(
        f"{directory}: {v['variant']} holds seeds {v['seeds']}, not round {r + 1}'s {design.round_seeds(r)}; "
        'move that directory aside and run the same command again'
      )
  return {
    'names': [v['variant'] for v in doc['variants']],
    'references': doc['references'],
    'greedy': [v['greedy'] for v in doc['variants']],
  }


def _minutes(directory: str):
  """The round's training time, summed over its variants (results.json's train_seconds), in minutes; None
  where the runs are not there (a results page keeps only the translations)."""
  seconds = []
  for name in sorted(os.listdir(directory)):
    path = os.path.join(directory, name, 'results.json')
    if os.path.exists(path):
      with open(path) as f:
        seconds.append(json.load(f).get('train_seconds', 0.0))
  return sum(seconds) / 60 if seconds else None


def rounds_page(design: sequential.Design, looks: list[dict], minutes: list[float]) -> str:
  """Markdown: the design, then per look the seeds, the alpha it spent and every contrast's verdict."""
  lines = [
    '# Seeds until decided',
    '',
    f'Design, declared before round 1: up to {design.rounds} rounds of {design.seeds_per_round} seeds per '
    f'variant; alpha {design.alpha:g} spent by {design.spending} (Lan-DeMets) at the looks after '
    f"{', '.join(map(str, design.schedule))} seeds: {', '.join(f'{x:.4g}' for x in design.levels)}; "
    f'equivalence margin ±{design.delta:g} BLEU; contrasts: {design.contrasts}. '
    + pair_table.family_text(looks[-1]['comparison'] | {'alpha': design.alpha, 'length_level': 0})
    + " over all looks: each contrast spends each look's increment / contrasts (Bonferroni over contrasts), at "
    "exact group-sequential boundaries over the looks (the looks' joint distribution; a look's level exceeds the "
    'alpha it spends, which a bound over looks would give away), one-sided ones for the tests of equivalence. '
    f'Seeds {design.round_seeds(0)[0]} onward, the same numbers in every variant, so the contrasts are paired by '
    "seed. Seeds to decide: seeds per variant at which a contrast would be decided with 80 % probability at the "
    "last look's level.",
  ]
  for look, spent in zip(looks, minutes):
    c = look['comparison']
    open_ = sequential.open_contrasts(look)
    per_contrast = look['level'] / max(c['family_size'], 1)
    lines += [
      '',
      f"## Look {look['look']}: {look['seeds']} seeds per variant, level {per_contrast:.4g} per contrast",
      '',
    ]
    lines += ['| variant | seeds | BLEU per seed | mean ± sd |', '|---|---|---|---|']
    for v in c['variants']:
      scores = v['per_seed']
      lines.append(f"| {v['variant']} | {v['seeds']} | {formatting.per_seed(scores)} | {formatting.mean_sd(scores)} |")
    lines += ['', '| ' + ' | '.join(pair_table.PAIR_HEADERS) + ' |', '|' + '---|' * len(pair_table.PAIR_HEADERS)]
    lines += ['| ' + ' | '.join(pair_table.contrast_cells(p)) + ' |' for p in c['pairs']]
    decided = len(c['pairs']) - len(open_)
    lines += ['', f'{decided} of {len(c["pairs"])} contrasts decided.']
    if spent is not None:
      lines[-1] += f' This round trained in {spent:.1f} min (train_seconds summed over its variants)'
      more = open_ and look['look'] < design.rounds
      lines[-1] += (
        f'; the next round ({design.seeds_per_round} seeds per variant) would cost about as much.' if more else '.'
      )
  counts = {
    k: sum(p['decision'] == k for p in looks[-1]['comparison']['pairs']) for k in (family.GREATER, family.EQUIVALENT)
  }
  lines += [
    '',
    f"After {len(looks)} look(s): {counts[family.GREATER]} ranked, {counts[family.EQUIVALENT]} equivalent within "
    f'±{design.delta:g}, {len(sequential.open_contrasts(looks[-1]))} undecided.',
  ]
  return '\n'.join(lines) + '\n'
