"""TFDS catalogue translation datasets by name, read as array_record data sources.

`tfds.data_source` downloads and prepares a dataset in array_record format when it is not
there yet (which needs the network), then reads it without TensorFlow. The WMT builders
live in TFDS's legacy `translate` package, which `import tensorflow_datasets` loads lazily,
so it is imported here to register them. Datasets prepared earlier in TFRecord format
(by `tfds.load`) cannot be read as data sources: prepare them again into another data_dir.
Some catalogue builders import TensorFlow while generating (the WMT family does); install
the extra `attnmt[tensorflow]` for those.
"""

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


def language_keys(name: str, data_dir: str, source_lang: Optional[str],
                  target_lang: Optional[str]) -> tuple[str, str]:
    """The feature keys of the source and target text: the given codes, else the
    dataset's supervised keys (e.g. ('pt', 'en'))."""
    known_names()  # Registers the legacy translation builders.
    info = tfds.builder(name, data_dir=data_dir).info
    if source_lang and target_lang:
        keys = (source_lang, target_lang)
    else:
        keys = info.supervised_keys
        if not keys or len(keys) != 2:
            raise ValueError(f'{name} has no (source, target) supervised keys; set '
                             'data.source_lang and data.target_lang')
    available = list(info.features.keys())
    for key in keys:
        if key not in available:
            raise ValueError(f'{name} has no language {key!r}; it has {", ".join(available)}')
    return tuple(keys)


def data_sources(name: str, data_dir: str) -> dict:
    """{split: data source} for the train, validation and test splits of `name`."""
    sources = tfds.data_source(name, split=list(SPLITS), data_dir=data_dir)
    return dict(zip(SPLITS, sources))
