"""Deterministic train / validation / test assignment of groups (Bible chapters, source
sentences) by a hash of their key, so a group's split never depends on the run or seed."""

import hashlib
from typing import Hashable, Iterable

SPLITS = ('train', 'validation', 'test')


def unit_hash(key: str) -> float:
  """A stable number in [0, 1) for `key` (SHA-256, unlike Python's salted hash())."""
  return int(hashlib.sha256(key.encode('utf-8')).hexdigest()[:12], 16) / 16**12


def assign_splits(keys: Iterable[str], validation_fraction: float, test_fraction: float) -> dict[str, str]:
  """Maps each key to a split by its hash: [0, test) test, [test, test + val) validation.

  A split left empty by a small set of keys (a few books) takes the train keys with the
  smallest hashes, so every split has at least one group whenever there are three keys.
  """
  keys = sorted(set(keys), key=unit_hash)
  split_of = {}
  for key in keys:
    u = unit_hash(key)
    split_of[key] = (
      'test' if u < test_fraction else 'validation' if u < test_fraction + validation_fraction else 'train'
    )
  for split, fraction in (('test', test_fraction), ('validation', validation_fraction)):
    train_keys = [k for k in keys if split_of[k] == 'train']
    if fraction > 0 and split not in split_of.values() and len(train_keys) > 1:
      split_of[train_keys[0]] = split
  return split_of


def group_by_split(items: Iterable[dict], key_of, split_of: dict[Hashable, str]) -> dict[str, list[dict]]:
  """Lists `items` per split, keeping their order, using `split_of[key_of(item)]`."""
  out = {s: [] for s in SPLITS}
  for item in items:
    out[split_of[key_of(item)]].append(item)
  return out
