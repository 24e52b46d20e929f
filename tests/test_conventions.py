"""The conventions a researcher looks for: the license pyproject.toml names is the LICENSE file, CITATION.cff is
valid and agrees with the package's version, and launch.sh asks for the Python that pyproject.toml requires."""

import os
import re
import tomllib

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def read(name: str) -> str:
  with open(os.path.join(ROOT, name), encoding='utf-8') as f:
    return f.read()


def test_license_citation_and_python_agree_with_pyproject():
  project = tomllib.loads(read('pyproject.toml'))['project']
  assert project['license'] == 'Apache-2.0'
  license_text = read('LICENSE')
  assert 'Apache License' in license_text and 'Version 2.0, January 2004' in license_text
  cff = yaml.safe_load(read('CITATION.cff'))
  assert cff['cff-version'] == '1.2.0' and cff['license'] == project['license']
  assert cff['version'] == project['version'] and cff['authors'] and cff['title'].startswith('attnmt')
  assert {r['year'] for r in cff['references']} == {2015}
  minimum = re.fullmatch(r'>=3\.(\d+)', project['requires-python'].strip()).group(1)
  assert f'sys.version_info < (3, {minimum})' in read('launch.sh')
  assert f'Python 3.{minimum}+' in read('README.md')
