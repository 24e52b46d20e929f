"""Plain text from the OSIS markup of the SWORD Bible modules.

pysword's own cleaner deletes tags without leaving a space, which glues words together
wherever a footnote sat between them ("only born</q><note>..</note><q>Son" becomes
"only bornSon"), drops canonical psalm titles (which the Spanish module keeps as part of
verse 1) and keeps non-canonical headings such as the speaker labels of the Song of Songs.
This cleaner works on the raw markup instead:

* everything after the end-of-book marker is dropped (the English module appends its
  glossary to Revelation 22:21);
* notes (footnotes and cross references, with their markers), speaker labels,
  non-canonical titles and alternate readings are removed with their content, leaving a
  space;
* structural tags (line groups, paragraphs, lists, chapter and milestone markers) become a
  space; inline tags (words, quotations, added words, names, canonical titles) are removed
  and their text kept;
* words the Spanish module adds in italics (`<transChange>`) often touch their neighbours
  ("es</w><transChange>le</transChange><w>Dios"); they get a space on both sides, except an
  enclitic pronoun after a verb form, which is written joined as the 1909 text does
  ("díjole Dios", "sácalo"). A verb form here is a lower-case word that carries an acute
  accent or ends in -r or -d; accented interrogatives ("cuánto") take no enclitic.
* whitespace is collapsed, spaces before closing punctuation and after opening quotes
  are removed.
"""

import html
import re

_BOOK_END = re.compile(r'<div\b(?=[^>]*\btype="book")(?=[^>]*\beID=)[^>]*/>.*', re.S)
_DROPPED_ELEMENTS = ('note', 'speaker', 'rdg', 'catchWord')
_DROP_WITH_CONTENT = [re.compile(rf'<{tag}\b[^>]*(?<!/)>.*?</{tag}>', re.S) for tag in _DROPPED_ELEMENTS] + [
  re.compile(r'<title\b(?![^>]*canonical="true")[^>]*(?<!/)>.*?</title>', re.S)
]
_STRUCTURAL = re.compile(r'</?(?:l|lg|lb|p|div|chapter|milestone|list|item|br|verse|table|row|cell|head)\b[^>]*>')
_ANY_TAG = re.compile(r'<[^>]*>')
_ADDED_OPEN, _ADDED_CLOSE = '\x01', '\x02'
_ADDED_TAGS = re.compile(r'<(/?)transChange\b[^>]*>')
_PRONOUN = r'(?:me|te|se|le|les|lo|los|la|las|nos|os)'  # "díjole", also doubled: "dámelo"
_ENCLITIC = re.compile(rf'\b([a-záéíóúüñ]+)\x01({_PRONOUN}?{_PRONOUN})\x02')
_INTERROGATIVES = frozenset(['cuánto', 'cuánta', 'cuántos', 'cuántas', 'qué', 'cómo', 'dónde', 'cuándo', 'quién'])
_SPACE_BEFORE_CLOSING = re.compile(r'\s+([,.;:!?)\]”’»])')
_SPACE_AFTER_OPENING = re.compile(r'([(\[“‘«¡¿])\s+')
_SPACES = re.compile(r'\s+')


def clean_osis(raw: str) -> str:
  """Returns the plain text of one verse of OSIS markup (see the module docstring)."""
  text = _BOOK_END.sub(' ', raw)
  for pattern in _DROP_WITH_CONTENT:
    text = pattern.sub(' ', text)
  text = _STRUCTURAL.sub(' ', text)
  text = _ADDED_TAGS.sub(lambda m: _ADDED_CLOSE if m.group(1) else _ADDED_OPEN, text)
  text = _ANY_TAG.sub('', text)
  text = _ENCLITIC.sub(_join_enclitic, text)
  text = text.replace(_ADDED_OPEN, ' ').replace(_ADDED_CLOSE, ' ')
  text = html.unescape(text)
  text = _SPACES.sub(' ', text)
  text = _SPACE_BEFORE_CLOSING.sub(r'\1', text)
  text = _SPACE_AFTER_OPENING.sub(r'\1', text)
  return text.strip()


def _join_enclitic(match: re.Match) -> str:
  """Joins an added enclitic pronoun to a preceding verb form, else keeps them apart."""
  word, pronoun = match.group(1), match.group(2)
  accented = any(ch in 'áéíóú' for ch in word)
  is_verb = (accented or word[-1] in 'rd') and word not in _INTERROGATIVES
  return f'{word}{pronoun} ' if is_verb else f'{word} {pronoun} '
