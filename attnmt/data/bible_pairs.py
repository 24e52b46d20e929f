"""English-Spanish verse pairs from the raw markup of the two SWORD modules.

From raw OSIS to pairs: clean the markup (osis_clean), remove the Spanish module's
subscriptions to the epistles, keep references present in both modules, drop verses that
are empty in either (omitted, or merged into a neighbour), realign each book by verse
length to drop verses whose numbering differs (verse_align), assign whole chapters to
splits by a hash of the chapter, and remove evaluation pairs whose English text also
occurs in training ("Yahweh spoke to Moses, saying," ...). Every drop is counted.
"""

import collections
import re

from attnmt.data import osis_clean, splits as splits_lib, verse_align

# "Amén. Fué escrita de Corinto á los Romanos, ..." closes some epistles in the 1909
# module; the English module has no such subscription.
_SUBSCRIPTION = re.compile(r'(Amén\.)\s+[^.]*\b(?:[Ee]scrita|[Ee]nviada)\b.*$')


def clean_spanish(raw: str) -> str:
  """Plain text of a Spanish verse, without the epistles' subscriptions."""
  return _SUBSCRIPTION.sub(r'\1', osis_clean.clean_osis(raw))


def _chapter_key(ref) -> str:
  return f'{ref[0]}.{ref[1]}'


def _aligned_refs(en: dict, es: dict, c: float, s2: float) -> set:
  """References whose verses the length alignment pairs one-to-one with each other."""
  kept = set()
  for book in dict.fromkeys(ref[0] for ref in en if ref in es):
    en_refs = [r for r in en if r[0] == book]
    es_refs = [r for r in es if r[0] == book]
    beads = verse_align.align_lengths([len(en[r]) for r in en_refs], [len(es[r]) for r in es_refs], c, s2)
    for src, tgt in beads:
      if len(src) == len(tgt) == 1 and en_refs[src[0]] == es_refs[tgt[0]]:
        kept.add(en_refs[src[0]])
  return kept


def build_pairs(
  en_raw: dict, es_raw: dict, validation_fraction: float, test_fraction: float
) -> tuple[dict[str, list[dict]], dict[str, int]]:
  """Splits of {'en', 'es', 'ref'} pairs and the count of verses dropped per reason.

  `en_raw` and `es_raw` map (book, chapter, verse) to raw markup, in canonical order.
  """
  en = {ref: osis_clean.clean_osis(t) for ref, t in en_raw.items()}
  es = {ref: clean_spanish(t) for ref, t in es_raw.items()}
  dropped = collections.Counter()
  dropped['only_in_english_module'] = sum(ref not in es for ref in en)
  dropped['only_in_spanish_module'] = sum(ref not in en for ref in es)
  common = [ref for ref in en if ref in es]
  non_empty = [ref for ref in common if en[ref] and es[ref]]
  dropped['empty_in_one_module'] = len(common) - len(non_empty)
  c, s2 = verse_align.fit_length_model([len(en[r]) for r in non_empty], [len(es[r]) for r in non_empty])
  aligned = _aligned_refs(en, es, c, s2)
  kept = [ref for ref in non_empty if ref in aligned]
  dropped['versification_mismatch'] = len(non_empty) - len(kept)
  pairs = [{'en': en[r], 'es': es[r], 'ref': '.'.join(map(str, r))} for r in kept]
  split_of = splits_lib.assign_splits((_chapter_key(r) for r in kept), validation_fraction, test_fraction)
  by_split = splits_lib.group_by_split(pairs, lambda p: p['ref'].rsplit('.', 1)[0], split_of)
  train_sources = {p['en'] for p in by_split['train']}
  for split in ('validation', 'test'):
    unique = [p for p in by_split[split] if p['en'] not in train_sources]
    dropped[f'{split}_source_seen_in_train'] = len(by_split[split]) - len(unique)
    by_split[split] = unique
  return by_split, dict(dropped)
