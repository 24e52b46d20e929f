r"""Waits that XLA's buffer reuse adds between ops that do not depend on each other.

    python -m benchmarks.buffer_waits                          # the bench-config training step
    python -m benchmarks.buffer_waits --computation='region_'  # only computations whose name matches

XLA assigns buffers for one sequential order of the ops (its schedule): once a value's last reader has
run in that order, a later op may take its bytes. XLA:CPU's runtime then runs ops as their inputs
become ready, on several threads, and orders an op that writes bytes after every op that still reads
or writes them. When the two ops share no data path, that is a wait the program does not need: the
runtime may hold back a kernel that an idle thread could have run. Session 7 found one such wait in
the decoder step (benchmarks/README.md, "Session 7"): the output of one half of a split product was
given the buffer that the other half was reading, so the halves ran one after the other.

This tool compiles the step with XLA's dumps switched on for that compilation only, reads the buffer
assignment back, and lists every pair of ops in one computation where one op's output overlaps bytes
that the other op writes or reads, and neither op is reachable from the other along operands. Each line reads "L waits for E": L comes later in XLA's schedule and shares bytes with E,
so the runtime runs L only after E, though no data path asks for that. Ops that do not run
(parameters, constants, bitcasts, tuples) are left out.
"""
from __future__ import annotations

import collections
import dataclasses
import glob
import os
import re
import tempfile

from absl import app, flags

_COMPUTATION = flags.DEFINE_string('computation', '', 'regex: only report computations whose name matches')
_MIN_BYTES = flags.DEFINE_integer('min_bytes', 4096, 'only report overlaps of at least this many bytes')

_NOT_RUN = ('parameter', 'constant', 'bitcast', 'get-tuple-element', 'tuple')


@dataclasses.dataclass(frozen=True)
class Instruction:
  name: str
  opcode: str
  operands: tuple[str, ...]
  computation: str
  position: int      # place in the printed module: XLA prints a scheduled module in schedule order


@dataclasses.dataclass(frozen=True)
class Wait:
  computation: str
  later: str         # comes later in XLA's schedule, so the runtime holds it back ...
  earlier: str       # ... until this op, with which it shares bytes and no data path, has run
  overlap_bytes: int
  values: tuple[str, str]   # the two values that share the bytes, e.g. '<3331 ynn_fusion.2 @0>'


def _closing(line: str, start: int) -> int:
  """The index just past the ')' that closes a '(' opened right before `start`."""
  depth, end = 1, start
  while end < len(line) and depth:
    depth += {'(': 1, ')': -1}.get(line[end], 0)
    end += 1
  return end


def parse_hlo(text: str) -> dict[str, Instruction]:
  """Instructions of an HLO module's text by name, with their operands and computation."""
  out, computation = {}, None
  for line in text.splitlines():
    head = re.match(r'^(?:ENTRY )?%(\S+) .*\{\s*$', line)
    if head and not line.startswith(' '):
      computation = head.group(1)
      continue
    m = re.match(r'^\s+(?:ROOT )?%(\S+) = ', line)
    if not m or computation is None:
      continue
    shape_end = _closing(line, m.end() + 1) if line[m.end():m.end() + 1] == '(' else line.find(' ', m.end())
    op = re.match(r'\s*([\w-]+)\(', line[shape_end:])
    if shape_end < 0 or not op:
      continue
    start = shape_end + op.end()
    operands = tuple(re.findall(r'%([\w.\-]+)', line[start:_closing(line, start) - 1]))
    out[m.group(1)] = Instruction(m.group(1), op.group(1), operands, computation, len(out))
  return out


def parse_assignment(text: str) -> dict[str, tuple[int, int, int]]:
  """Each assigned value ('<id name @index>') -> (allocation, offset, size) in bytes."""
  out, allocation = {}, None
  for line in text.splitlines():
    a = re.match(r'^allocation (\d+):', line)
    if a:
      allocation = int(a.group(1))
      continue
    v = re.match(r'^ value: (<[^>]+>) \(size=(\d+),offset=(\d+)\)', line)
    if v and allocation is not None:
      out[v.group(1)] = (allocation, int(v.group(3)), int(v.group(2)))
  return out


def parse_values(text: str) -> dict[str, list[str]]:
  """Each value ('<id name @index>') -> the instructions that use it (through bitcasts as well)."""
  out, current, in_uses = {}, None, False
  for line in text.splitlines():
    v = re.match(r'^(<\d+ \S+ @[^>]*>)\s*$', line)
    if v:
      current, in_uses = v.group(1), False
      out[current] = []
    elif current and line.strip() in ('positions:', 'uses:'):
      in_uses = line.strip() == 'uses:'
    elif current and in_uses and line.startswith('  ') and line.strip() != '(none)':
      out[current].append(line.strip().split(',')[0].split('{')[0].strip())
    elif line.startswith(' from instruction'):
      in_uses = False
  return out


def _definer(value: str) -> str:
  """The instruction that defines a value named '<id name @index>' or '<id name{shape index} @index>'."""
  return value.split(' ')[1].split('{')[0]


def _reachable(instructions: dict[str, Instruction], computation: str) -> dict[str, set[str]]:
  """For each instruction of the computation, every instruction it reaches backwards along operands."""
  members = {n: i for n, i in instructions.items() if i.computation == computation}
  memo: dict[str, set[str]] = {}
  for root in members:
    stack = [(root, False)]
    while stack:
      name, expanded = stack.pop()
      if name in memo:
        continue
      deps = [o for o in members[name].operands if o in members]
      if expanded:
        memo[name] = set(deps).union(*(memo[d] for d in deps))
      else:
        stack.append((name, True))
        stack.extend((d, False) for d in deps if d not in memo)
  return memo


def find_waits(instructions: dict[str, Instruction], assignment: dict, values: dict,
               computation_regex: str = '', min_bytes: int = 1) -> list[Wait]:
  """Every ordering that buffer reuse alone imposes, as defined in the module docstring.

  Two ops of one computation are ordered when one writes a value and the other writes or reads a
  value whose bytes overlap it, and neither op is reachable from the other along operands; the one
  later in the schedule waits.
  """
  users = collections.defaultdict(set)      # value -> the ops that run and write or read it
  for value, uses in values.items():
    if value not in assignment:
      continue
    defining = instructions.get(_definer(value))
    if defining is not None and defining.opcode not in _NOT_RUN:
      users[value].add(defining.name)
    users[value].update(u for u in uses if u in instructions and instructions[u].opcode not in _NOT_RUN)
  by_allocation = collections.defaultdict(list)
  for value, (alloc, offset, size) in assignment.items():
    if users.get(value):
      by_allocation[alloc].append((offset, offset + size, value))
  reach_cache: dict[str, dict[str, set[str]]] = {}
  waits: dict[tuple[str, str], Wait] = {}
  for spans in by_allocation.values():
    spans.sort()
    for i, (start, end, first) in enumerate(spans):
      for start2, end2, second in spans[i + 1:]:
        if start2 >= end:
          break
        overlap = min(end, end2) - start2
        if overlap < min_bytes:
          continue
        for written, shared in ((first, second), (second, first)):
          w = _definer(written)
          if w not in users[written]:          # defined by an op that does not run (e.g. a parameter)
            continue
          comp = instructions[w].computation
          if computation_regex and not re.search(computation_regex, comp):
            continue
          if comp not in reach_cache:
            reach_cache[comp] = _reachable(instructions, comp)
          reach = reach_cache[comp]
          for other in users[shared]:
            if other == w or instructions[other].computation != comp:
              continue
            if other in reach.get(w, ()) or w in reach.get(other, ()):
              continue
            earlier, later = sorted((w, other), key=lambda n: instructions[n].position)
            key = (later, earlier)
            if key not in waits or waits[key].overlap_bytes < overlap:
              waits[key] = Wait(comp, later, earlier, overlap, (first, second))
  return sorted(waits.values(), key=lambda x: (x.computation, -x.overlap_bytes, x.later, x.earlier))


def dumped_assignment(compile_fn) -> tuple[str, str, str]:
  """Runs `compile_fn(options)` with XLA's dumps for that compilation; returns the optimised HLO text,
  the buffer assignment and the values' uses of the module it compiled."""
  with tempfile.TemporaryDirectory() as tmp:
    compiled = compile_fn({'xla_dump_to': tmp})
    hlo = compiled.as_text()
    def read(suffix):
      paths = sorted(glob.glob(os.path.join(tmp, f'*{suffix}')), key=os.path.getmtime)
      if not paths:
        raise RuntimeError(f'XLA wrote no *{suffix} into its dump folder; this jaxlib does not dump buffer '
                           'assignments for CPU programs')
      with open(paths[-1]) as f:
        return f.read()
    return hlo, read('cpu_after_optimizations-buffer-assignment.txt'), \
        read('cpu_after_optimizations-buffer-assignment-values.txt')


def train_step_waits(computation_regex: str = '', min_bytes: int = 4096, sizes=None) -> list[Wait]:
  """`find_waits` for the bench-config training step (or the given `cases.Sizes`)."""
  from benchmarks import cases
  jitted, state, batch = cases.train_program(cases.BENCH_MODEL, sizes or cases.Sizes())
  lowered = jitted.lower(state, batch)
  hlo, assignment, values = dumped_assignment(lambda options: lowered.compile(compiler_options=options))
  return find_waits(parse_hlo(hlo), parse_assignment(assignment), parse_values(values), computation_regex,
                    min_bytes)


def main(argv):
  del argv
  try:
    re.compile(_COMPUTATION.value)
  except re.error as e:
    raise SystemExit(f'--computation is not a valid regular expression ({e}); pass e.g. --computation=region_')
  waits = train_step_waits(_COMPUTATION.value, _MIN_BYTES.value)
  for w in waits:
    print(f'{w.computation}: {w.later} waits for {w.earlier} ({w.overlap_bytes:,} bytes shared by {w.values[0]} '
          f'and {w.values[1]})')
  print(f'{len(waits)} waits that no data path needs')


if __name__ == '__main__':
  app.run(main)
