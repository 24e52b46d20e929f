"""Fills a folder with everything an offline host needs to run attnmt: wheels for its Python and platform,
and the SWORD module files of the embedded corpus. Run on a machine with network (./launch.sh wheelhouse),
then on the host, which may have no network: ATTNMT_WHEELHOUSE=DIR ./launch.sh main.

    ./launch.sh wheelhouse DIR [--python-version=3.12] [--platform=manylinux2014_x86_64] \
        [--skip=jax,jaxlib,flax,optax] [--dev]

The host's own packages are kept: launch.sh makes its environment with the host Python's packages visible
(a GPU image ships jax with CUDA) and pip installs only what they do not satisfy. `--skip` leaves out
packages the host already has, so the folder stays small. Packages published only as source (pysword) are
built here into wheels; those are pure Python and fit any platform.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import ssl
import subprocess
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from importlib import metadata

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MANIFEST = 'attnmt-wheelhouse.json'
SWORD_MODULES = ('engweb2015eb', 'sparv1909eb')  # lower-case names of the two Bible modules
_MISSING = re.compile(r'No matching distribution found for ([A-Za-z0-9_.\-]+)')


def _name(requirement: str) -> str:
  return re.split(r'[<>=!~;\[ ]', requirement, maxsplit=1)[0].strip().lower().replace('_', '-')


def requirements(dev: bool) -> list[str]:
  """attnmt's dependencies as installed here (its metadata), the dev extra's with `dev`."""
  out = []
  for req in metadata.requires('attnmt') or []:
    spec, _, marker = req.partition(';')
    if 'extra' in marker and not (dev and '"dev"' in marker.replace("'", '"')):
      continue
    out.append(spec.strip())
  return out


def _pip(*args, check=True) -> subprocess.CompletedProcess:
  return subprocess.run([sys.executable, '-m', 'pip', *args], capture_output=True, text=True, check=check)


def _target(python_version: str, platforms: list[str]) -> list[str]:
  args = ['--only-binary=:all:', '--python-version', python_version, '--implementation', 'cp']
  for p in platforms:
    args += ['--platform', p]
  return args


def build_source_only(reqs: list[str], wheels: str) -> list[str]:
  """Packages of the requirements' closure that pip would take as source here (no wheel published, e.g.
  pysword, promise), built into wheels in `wheels` (pure Python: they fit any target); their names."""
  with tempfile.TemporaryDirectory() as tmp:
    report = os.path.join(tmp, 'report.json')
    args = ['install', '--dry-run', '--ignore-installed', '--target', os.path.join(tmp, 't'), '--report', report]
    res = _pip(*args, *reqs, check=False)
    if res.returncode:
      sys.exit(f'wheelhouse: pip could not resolve the requirements here:\n{res.stderr[-2000:]}')
    with open(report) as f:
      items = json.load(f)['install']
  names = []
  for item in items:
    if not item['download_info']['url'].endswith('.whl'):
      name, version = item['metadata']['name'], item['metadata']['version']
      print(f'wheelhouse: {name} {version} is published as source only; building its wheel here')
      _pip('wheel', '--no-deps', '--quiet', '-w', wheels, f'{name}=={version}')
      names.append(_name(name))
  return names


def resolve(reqs: list[str], wheels: str, python_version: str, platforms: list[str]) -> list[dict]:
  """The packages pip would install on the target (pip's dry-run report, wheels only, `wheels` searched
  too); a requirement with no wheel for it is built here from source into `wheels` and the resolution tried
  again."""
  built = set(build_source_only(reqs, wheels))
  while True:
    with tempfile.TemporaryDirectory() as tmp:
      report = os.path.join(tmp, 'report.json')
      args = ['install', '--dry-run', '--ignore-installed', '--target', os.path.join(tmp, 't'), '--report', report]
      res = _pip(*args, '--find-links', wheels, *_target(python_version, platforms), *reqs, check=False)
      if res.returncode == 0:
        with open(report) as f:
          return json.load(f)['install']
    missing = _MISSING.search(res.stderr)
    name = missing and _name(missing.group(1))
    if not name or name in built:
      sys.exit(f'wheelhouse: pip could not resolve the requirements for Python {python_version}:\n{res.stderr[-2000:]}')
    spec = next((r for r in reqs if _name(r) == name), missing.group(1))
    print(f'wheelhouse: {name} has no wheel for the target; building one from its source here')
    _pip('wheel', '--no-deps', '--quiet', '-w', wheels, spec)
    built.add(name)


def copy_sword(out: str) -> str | None:
  """The two Bible modules (configuration and texts) from $SWORD_PATH or /usr/share/sword into out/sword."""
  src = os.environ.get('SWORD_PATH', '/usr/share/sword')
  confs = os.path.join(src, 'mods.d')
  texts = os.path.join(src, 'modules', 'texts', 'ztext')
  if not (os.path.isdir(confs) and os.path.isdir(texts)):
    return None
  dest = os.path.join(out, 'sword')
  for sub, folder in (('mods.d', confs), (os.path.join('modules', 'texts', 'ztext'), texts)):
    for entry in os.listdir(folder):
      if any(entry.lower().startswith(m) for m in SWORD_MODULES):
        target = os.path.join(dest, sub, entry)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        (shutil.copytree if os.path.isdir(os.path.join(folder, entry)) else shutil.copy2)(
          os.path.join(folder, entry), target
        )
  return dest


def fail(message: str):
  """Bad input or no network: one line on stderr, exit status 2."""
  print(f'error: {message}', file=sys.stderr)
  sys.exit(2)


def check_folder(path: str) -> None:
  """Fails in one line, writing nothing, when `path` (or a folder above it) is a file or cannot be written."""
  existing = os.path.abspath(path)
  while not os.path.exists(existing):
    existing = os.path.dirname(existing)
  if not os.path.isdir(existing):
    fail(f'wheelhouse DIR {path}: {existing} is a file, not a folder; pass a folder (it is made if missing)')
  try:  # os.access says yes to root on a read-only file system
    os.rmdir(tempfile.mkdtemp(dir=existing, prefix='.attnmt-wheelhouse-'))
  except OSError as e:
    fail(f'wheelhouse DIR {path}: cannot write into {existing} ({e.strerror}); pass a folder you can write to')


def index_url() -> str:
  """The package index pip will use: its index-url setting (the environment's wins), else PyPI."""
  res = _pip('config', 'list', check=False)
  found = re.findall(r"^[^\n]*\.index-url='([^']*)'", res.stdout, re.M)
  return found[-1] if found else 'https://pypi.org/simple/'


def check_network(url: str, timeout: float = 5.0) -> None:
  """Fails in one line when the package index does not answer within `timeout` seconds: the wheelhouse is made
  from it. Any HTTP answer (even an error status) counts as an answer."""
  if url.startswith('file:'):
    return
  parts = urllib.parse.urlsplit(url)
  if parts.username or parts.password:  # credentials neither probed with nor printed
    url = parts._replace(netloc=parts.netloc.rpartition('@')[2]).geturl()
  try:
    urllib.request.urlopen(urllib.request.Request(url, method='HEAD'), timeout=timeout).close()
  except urllib.error.HTTPError:
    return
  except (urllib.error.URLError, OSError, ValueError) as e:
    if isinstance(getattr(e, 'reason', e), ssl.SSLError):
      return  # it answered; pip checks certificates with its own settings
    reason = getattr(e, 'reason', None) or e
    reason = getattr(reason, 'strerror', None) or str(reason)
    fail(
      f'wheelhouse needs the network: the package index {url} did not answer ({reason}); run it on a machine with '
      'network (or set PIP_INDEX_URL to an index this machine reaches)'
    )


def main(argv=None):
  here = f'{sys.version_info.major}.{sys.version_info.minor}'
  arch = platform.machine()
  parser = argparse.ArgumentParser(prog='./launch.sh wheelhouse', description=__doc__.split('\n\n')[0])
  parser.add_argument('dir', help='the folder to fill (created; wheels/, sword/ and a manifest)')
  parser.add_argument('--python-version', default=here, help=f'the target Python, e.g. 3.12 (default {here})')
  parser.add_argument(
    '--platform',
    action='append',
    help=f'pip platform tag(s) of the target (default: manylinux2014/_2_17/_2_28 for {arch})',
  )
  parser.add_argument('--skip', default='', help='comma-separated packages the target already has (e.g. jax,jaxlib)')
  parser.add_argument('--dev', action='store_true', help="also the test tools (the dev extra), for './launch.sh test'")
  a = parser.parse_args(argv)
  if not re.fullmatch(r'3\.\d+', a.python_version):
    parser.error(f'--python-version {a.python_version} is not like 3.12')
  platforms = a.platform or [f'manylinux{t}_{arch}' for t in ('2014', '_2_17', '_2_28')]
  skip = {_name(s) for s in a.skip.split(',') if s.strip()}
  wheels = os.path.join(a.dir, 'wheels')
  check_folder(a.dir)
  check_network(index_url())
  os.makedirs(wheels, exist_ok=True)
  print(f'wheelhouse: building the attnmt wheel into {wheels}')
  _pip('wheel', '--no-deps', '--quiet', '-w', wheels, ROOT)
  installs = resolve(requirements(a.dev), wheels, a.python_version, platforms)
  kept = [i for i in installs if _name(i['metadata']['name']) not in skip]
  local = {f.split('-')[0].lower().replace('_', '-') for f in os.listdir(wheels)}
  fetch = [
    f"{i['metadata']['name']}=={i['metadata']['version']}" for i in kept if _name(i['metadata']['name']) not in local
  ]
  print(
    f'wheelhouse: {len(installs)} packages for Python {a.python_version}; {len(installs) - len(kept)} skipped, {len(fetch)} to download'
  )
  if fetch:
    res = _pip(
      'download', '--no-deps', '--quiet', '-d', wheels, *_target(a.python_version, platforms), *fetch, check=False
    )
    if res.returncode:
      sys.exit(f'wheelhouse: pip download failed:\n{res.stderr[-2000:]}')
  sword = copy_sword(a.dir)
  manifest = {
    'python_version': a.python_version,
    'platforms': platforms,
    'skipped': sorted(skip),
    'dev': a.dev,
    'sword': sword is not None,
  }
  with open(os.path.join(a.dir, MANIFEST), 'w') as f:
    json.dump(manifest, f, indent=1)
  size = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(a.dir) for f in fs)
  print(f'wheelhouse: {a.dir} holds {len(os.listdir(wheels))} wheels' + (' and the SWORD modules' if sword else ''))
  print(f'wheelhouse: {size / 1e6:.0f} MB; on the target: ATTNMT_WHEELHOUSE={a.dir} ./launch.sh main')
  if not sword:
    print('wheelhouse: no SWORD modules here (apt-get install sword-text-web sword-text-sparv, or set SWORD_PATH)')


if __name__ == '__main__':
  main()
