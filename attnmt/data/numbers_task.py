"""A translation task with exact word alignments: digits to German number words.

German says the units before the tens ("42" is "zwei und vierzig"), so the gold alignment
crosses: source "4 2", target "zwei und vierzig", alignment "0-2 1-0" (Pharaoh format,
source-target, 0-based). Rules, chosen so each alignment link means "this word expresses
this digit":

* units 1-9 align to their digit ("eins" alone, "ein" before "und" or "hundert");
* "und" expresses no digit and is unaligned;
* tens words (zwanzig ... neunzig) align to the tens digit;
* teens (zehn ... neunzehn) express both digits and align to both;
* "hundert" and the hundreds word align to the hundreds digit;
* a zero that is not spoken (the 0s of "20", "105", "300") is unaligned; "0" alone is
  "null" and aligned.

A sentence is several numbers separated by ",", which is aligned to ",".
"""

import numpy as np

UNITS = ('null', 'eins', 'zwei', 'drei', 'vier', 'fünf', 'sechs', 'sieben', 'acht', 'neun')
TEENS = ('zehn', 'elf', 'zwölf', 'dreizehn', 'vierzehn', 'fünfzehn', 'sechzehn', 'siebzehn', 'achtzehn', 'neunzehn')
TENS = {2: 'zwanzig', 3: 'dreißig', 4: 'vierzig', 5: 'fünfzig', 6: 'sechzig', 7: 'siebzig', 8: 'achtzig', 9: 'neunzig'}
SEPARATOR = ','

Word = tuple[str, tuple[int, ...]]  # a target word and the source digit positions it expresses


def _unit_in_compound(digit: int) -> str:
  return 'ein' if digit == 1 else UNITS[digit]


def _below_hundred(tens: int, units: int, tens_pos: int, units_pos: int) -> list[Word]:
  if tens == 0:
    return [(UNITS[units], (units_pos,))] if units else []
  if tens == 1:
    return [(TEENS[units], (tens_pos, units_pos))]
  if units == 0:
    return [(TENS[tens], (tens_pos,))]
  return [(_unit_in_compound(units), (units_pos,)), ('und', ()), (TENS[tens], (tens_pos,))]


def number_words(digits: str) -> list[Word]:
  """German words for a number of 1-3 digits, each with the digit positions it aligns to."""
  values = [int(d) for d in digits]
  if len(values) == 1:
    return [(UNITS[values[0]], (0,))]
  if len(values) == 2:
    return _below_hundred(values[0], values[1], 0, 1)
  if len(values) == 3:
    hundreds = [(_unit_in_compound(values[0]), (0,)), ('hundert', (0,))]
    return hundreds + _below_hundred(values[1], values[2], 1, 2)
  raise ValueError(f'numbers of 1 to 3 digits only, got {digits!r}')


def translate(numbers: list[str]) -> tuple[str, str, str]:
  """(source, target, Pharaoh alignment) for a sentence of numbers given as digit strings."""
  source, target, links = [], [], []
  for k, digits in enumerate(numbers):
    if k:
      links.append((len(source), len(target)))
      source.append(SEPARATOR)
      target.append(SEPARATOR)
    offset = len(source)
    source.extend(digits)
    for word, positions in number_words(digits):
      links.extend((offset + p, len(target)) for p in positions)
      target.append(word)
  alignment = ' '.join(f'{i}-{j}' for i, j in sorted(links))
  return ' '.join(source), ' '.join(target), alignment


def random_numbers(rng: np.random.Generator, min_numbers: int, max_numbers: int, max_digits: int) -> list[str]:
  """Digit strings of a random sentence: a uniform count of numbers, each with a uniform
  number of digits and no leading zero."""
  count = int(rng.integers(min_numbers, max_numbers + 1))
  numbers = []
  for _ in range(count):
    width = int(rng.integers(1, max_digits + 1))
    low = 0 if width == 1 else 10 ** (width - 1)
    numbers.append(str(int(rng.integers(low, 10**width))))
  return numbers


def generate_split(
  size: int,
  seed: int,
  split_index: int,
  min_numbers: int,
  max_numbers: int,
  max_digits: int,
  exclude: frozenset = frozenset(),
) -> list[dict]:
  """`size` examples {'digits', 'de', 'alignment'} drawn from the stream of
  (seed, split_index); sources in `exclude` (the training sources) are skipped."""
  rng = np.random.default_rng([seed, split_index])
  examples = []
  attempts = 0
  while len(examples) < size:
    attempts += 1
    if attempts > 100 * size + 1000:
      raise ValueError('cannot draw enough distinct sentences; allow more numbers per sentence or more digits')
    source, target, alignment = translate(random_numbers(rng, min_numbers, max_numbers, max_digits))
    if source not in exclude:
      examples.append({'digits': source, 'de': target, 'alignment': alignment})
  return examples
