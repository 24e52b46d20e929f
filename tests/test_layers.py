"""The package layering holds: attnmt.api -> attnmt.faithfulness -> attnmt.analysis -> attnmt.compare -> attnmt.training -> attnmt.model, attnmt.data
beside them, attnmt.errors, attnmt.schema, attnmt.plots and attnmt.progress under all; no import cycle among
attnmt's modules. Read from the source with `ast`, every import counted, including those inside functions."""

import ast
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# What each part may import from attnmt (besides itself).
ALLOWED = {
  'errors': set(),
  'plots': set(),
  'progress': set(),
  'schema': {'errors'},
  'data': {'errors', 'schema', 'progress'},
  'model': {'errors', 'schema'},
  'training': {'errors', 'schema', 'plots', 'progress', 'model', 'data'},
  'compare': {'errors', 'schema', 'progress', 'training'},
  'analysis': {'errors', 'schema', 'plots', 'progress', 'model', 'data', 'training', 'compare'},
  'faithfulness': {'errors', 'schema', 'plots', 'progress', 'model', 'data', 'training', 'compare', 'analysis'},
  'api': {'errors', 'schema', 'plots', 'progress', 'model', 'data', 'training', 'compare', 'analysis', 'faithfulness'},
  '': {'api'},  # attnmt/__init__.py: re-exports the API, imported on first use
}
# The one import against the layers: calling the package attnmt.compare is the API's compare(run_dirs), which
# attnmt/compare/__init__.py imports when called (both answer "which variant is better").
UPWARD = {('attnmt.compare', 'attnmt.api')}


def _modules():
  out = {}
  for folder, _, files in os.walk(os.path.join(ROOT, 'attnmt')):
    for name in files:
      if name.endswith('.py'):
        path = os.path.join(folder, name)
        module = os.path.relpath(path, ROOT)[:-3].replace(os.sep, '.').removesuffix('.__init__')
        out[module] = path
  return out


def _imports(path: str, modules) -> set[str]:
  """The attnmt modules a file imports (`from attnmt.x import y` counts attnmt.x.y when that is a module)."""
  found = set()
  for node in ast.walk(ast.parse(open(path).read())):
    names = []
    if isinstance(node, ast.Import):
      names = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
      names = [f'{node.module}.{a.name}' if f'{node.module}.{a.name}' in modules else node.module for a in node.names]
    found.update(n for n in names if n.split('.')[0] == 'attnmt')
  return found


def _part(module: str) -> str:
  return module.split('.')[1] if module.count('.') else ''


def test_the_layers_import_one_way():
  modules = _modules()
  assert {_part(m) for m in modules} == set(ALLOWED) | {''}, 'a new top-level part of attnmt needs a layer here'
  wrong = []
  for module, path in modules.items():
    part = _part(module)
    for imported in _imports(path, modules) - {i for m, i in UPWARD if m == module}:
      other = _part(imported)
      if other and other != part and other not in ALLOWED.get(part, set()):
        wrong.append(f'{module} imports {imported}')
  assert not wrong, wrong


def test_no_import_cycles():
  modules = _modules()
  graph = {
    m: {i for i in _imports(p, modules) if i in modules and i != m and (m, i) not in UPWARD} for m, p in modules.items()
  }
  # Package __init__ files are entered by every import of their modules; they import nothing here.
  state, cycles = {}, []

  def visit(m, stack):
    state[m] = 'open'
    for n in sorted(graph[m]):
      if state.get(n) == 'open':
        cycles.append(stack[stack.index(n) :] + [n])
      elif n not in state:
        visit(n, stack + [n])
    state[m] = 'done'

  for m in sorted(graph):
    if m not in state:
      visit(m, [m])
  assert not cycles, cycles


def test_the_check_sees_an_upward_import(tmp_path):
  """The checker itself: a model module importing analysis is found."""
  path = tmp_path / 'bad.py'
  path.write_text('from attnmt.analysis import report\nimport attnmt.training.trainer\n')
  modules = _modules()
  assert _imports(str(path), modules) == {'attnmt.analysis.report', 'attnmt.training.trainer'}
