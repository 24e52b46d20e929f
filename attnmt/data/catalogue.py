"""TFDS catalogue translation datasets by name, read as array_record data sources.

`tfds.data_source` downloads and prepares a dataset in array_record format when it is not
there yet (which needs the network), then reads it without TensorFlow. The WMT builders
live in TFDS's legacy `translate` package, which `import tensorflow_datasets` loads lazily,
so it is imported here to register them. Datasets prepared earlier in TFRecord format
(by `tfds.load`) cannot be read as data sources: prepare them again into another data_dir.
Some catalogue builders import TensorFlow while generating (the WMT family does); install
the extra `attnmt[tensorflow]` for those.
"""

import os
import socket
from typing import Optional

import tensorflow_datasets as tfds

SPLITS = ('train', 'validation', 'test')


def known_names() -> list[str]:
  """Names of the registered TFDS builders, including the legacy translation ones."""
  import tensorflow_datasets.translate  # noqa: F401  Registers wmt*_translate.

  return tfds.list_builders(with_community_datasets=False)


def is_catalogue_name(name: str) -> bool:
  """Whether `name` ('ted_hrlr_translate/pt_to_en', 'wmt14_translate/de-en') names a
  registered TFDS builder."""
  return name.split('/')[0].split(':')[0] in known_names()


def language_keys(name: str, data_dir: str, source_lang: Optional[str], target_lang: Optional[str]) -> tuple[str, str]:
  """The feature keys of the source and target text: the given codes, else the
  dataset's supervised keys (e.g. ('pt', 'en'))."""
  known_names()  # Registers the legacy translation builders.
  info = tfds.builder(name, data_dir=data_dir).info
  if source_lang and target_lang:
    keys = (source_lang, target_lang)
  else:
    keys = info.supervised_keys
    if not keys or len(keys) != 2:
      raise ValueError(f'{name} has no (source, target) supervised keys; set data.source_lang and data.target_lang')
  available = list(info.features.keys())
  for key in keys:
    if key not in available:
      raise ValueError(f'{name} has no language {key!r}; it has {", ".join(available)}')
  return tuple(keys)


def network_reachable(host: str = 'storage.googleapis.com', timeout: float = 5.0) -> bool:
  """Whether a download could start: $ATTNMT_OFFLINE set means no; a proxy in the environment
  means yes (it is not probed); else whether `host` accepts a connection within `timeout`."""
  if os.environ.get('ATTNMT_OFFLINE'):
    return False
  if any(os.environ.get(v) for v in ('HTTPS_PROXY', 'https_proxy', 'ALL_PROXY', 'all_proxy')):
    return True
  try:
    socket.create_connection((host, 443), timeout=timeout).close()
    return True
  except OSError:
    return False


def data_sources(name: str, data_dir: str) -> dict:
  """{split: data source} for the train, validation and test splits of `name`. A dataset not yet
  prepared in `data_dir` needs the network: without it, a ValueError says how to prepare it
  elsewhere (instead of TFDS retrying its downloads for minutes)."""
  builder = tfds.builder(name, data_dir=data_dir, file_format='array_record')
  ours = os.path.abspath(str(builder.data_dir)).startswith(os.path.abspath(data_dir))  # else TFDS mock data
  if ours and not builder.is_prepared() and not network_reachable():
    raise ValueError(
      f'TFDS dataset {name} is not prepared in {data_dir} and the network is unreachable; '
      f"prepare it on a machine with network access (python -c \"import tensorflow_datasets as "
      f"tfds; tfds.data_source('{name}', data_dir='DIR')\") and copy DIR here as "
      f'data.data_dir/tfds, or use a local dataset (tsv_pairs)'
    )
  sources = tfds.data_source(name, split=list(SPLITS), data_dir=data_dir)
  return dict(zip(SPLITS, sources))
