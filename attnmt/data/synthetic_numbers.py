"""TFDS builder `synthetic_numbers`: digits to German number words with gold alignments
(see numbers_task), so the synthetic task goes through the same pipeline as real data."""

import dataclasses

import tensorflow_datasets as tfds

from attnmt.data import numbers_task


@dataclasses.dataclass(eq=False)
class NumbersConfig(tfds.core.BuilderConfig):
  """Size and shape of the task; the examples are a function of these values."""

  train_size: int = 20000
  eval_size: int = 1000  # each of validation and test
  min_numbers: int = 1  # numbers per sentence
  max_numbers: int = 4
  max_digits: int = 3  # 1 to 3
  seed: int = 0


def _config(train_size, eval_size, min_numbers, max_numbers, max_digits, seed) -> NumbersConfig:
  name = f'n{train_size}_e{eval_size}_k{min_numbers}-{max_numbers}_d{max_digits}_s{seed}'
  return NumbersConfig(
    name=name,
    train_size=train_size,
    eval_size=eval_size,
    min_numbers=min_numbers,
    max_numbers=max_numbers,
    max_digits=max_digits,
    seed=seed,
  )


DEFAULT = _config(20000, 1000, 1, 4, 3, 0)


def numbers_config(train_size: int, eval_size: int, min_numbers: int, max_numbers: int, max_digits: int, seed: int):
  """A config named after its values, so each setting gets its own directory (the
  default setting by name, as TFDS wants for a config it already knows)."""
  config = _config(train_size, eval_size, min_numbers, max_numbers, max_digits, seed)
  return config.name if config.name == DEFAULT.name else config


class SyntheticNumbers(tfds.core.GeneratorBasedBuilder):
  """Digit sequences ('digits') to German number words ('de'), Pharaoh 'alignment'."""

  VERSION = tfds.core.Version('1.0.0')
  RELEASE_NOTES = {'1.0.0': 'First version.'}
  BUILDER_CONFIGS = [DEFAULT]

  def _info(self) -> tfds.core.DatasetInfo:
    return self.dataset_info_from_configs(
      features=tfds.features.FeaturesDict(
        {
          'digits': tfds.features.Text(),
          'de': tfds.features.Text(),
          'alignment': tfds.features.Text(),  # Pharaoh 'i-j' pairs, source-target
        }
      ),
      supervised_keys=('digits', 'de'),
    )

  def _split_generators(self, dl_manager):
    del dl_manager  # Generated, nothing to download.
    c = self.builder_config
    shape = (c.min_numbers, c.max_numbers, c.max_digits)
    train = numbers_task.generate_split(c.train_size, c.seed, 0, *shape)
    seen = frozenset(e['digits'] for e in train)
    validation = numbers_task.generate_split(c.eval_size, c.seed, 1, *shape, exclude=seen)
    test = numbers_task.generate_split(c.eval_size, c.seed, 2, *shape, exclude=seen)
    return {
      'train': self._generate_examples(train),
      'validation': self._generate_examples(validation),
      'test': self._generate_examples(test),
    }

  def _generate_examples(self, examples):
    for i, example in enumerate(examples):
      yield i, example
