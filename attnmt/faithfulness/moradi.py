"""Moradi, Kambhatla & Sarkar 2019, "Interrogating the Explanatory Power of Attention in Neural Machine
Translation": at each step, a counterfactual attention at that step only; is the most probable token unchanged?
Shares of preserved tokens, function and content words apart, per counterfactual and for "any of them".
Conventions: attnmt/faithfulness/measures.py.
"""

from __future__ import annotations

import os
import unicodedata

import functools
from collections.abc import Iterable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from attnmt.errors import ConfigError
from attnmt.model.config import ModelConfig
from attnmt.model.interventions import Intervention
from attnmt.model.seq2seq import EOS, PAD

from attnmt.faithfulness.measures import (
  most_probable,
  teacher_inputs,
  step_mask,
  encode,
  decode_step,
  keyed,
  share,
)


# Their list (function_words.txt in sfu-natlang/attention_explanation, read by onmt/utils/misc.py's
# is_function_word) is English: '</s>', punctuation and the clitics of Moses-escaped English ('&apos;s'), then
# English function words. attnmt translates into Spanish, so the words are this Spanish list (the closed classes);
# end of sentence and punctuation are function tokens as in theirs (`function_token_ids`).
# The counterfactuals their code pools for the abstract's figures ('uniform_or_zero_out_max' in translator.py).
ANY_OF = ('uniform', 'zero_max', 'permute_moved', 'permute')
FUNCTION_WORDS_FILE = os.path.join(os.path.dirname(__file__), 'data', 'function_words_es.txt')


@functools.lru_cache(maxsize=None)
def function_words(path: str = FUNCTION_WORDS_FILE) -> frozenset:
  """The function-word list: one lower-case word per line, '#' starts a comment."""
  with open(path, encoding='utf-8') as f:
    return frozenset(w for w in (line.split('#')[0].strip().lower() for line in f) if w)


def function_token_ids(tokenizer, words: frozenset) -> tuple[frozenset, frozenset]:
  """The target token ids Moradi et al.'s code counts as function tokens, as two sets: the tokens whose word is in
  `words` (a word tokenizer's word; a sentencepiece word-initial piece such as '▁de', which may also begin a longer
  word; none: the list does not cover the target language) and the marks, the end-of-sentence token and every
  punctuation token (all its characters Unicode punctuation, after a sentencepiece word-boundary mark). Their
  `is_function_word` looks a whole vocabulary entry up in their list, so a piece that continues a word (no '▁') is
  a content token unless it is punctuation."""
  pieces = getattr(tokenizer, 'kind', 'word') != 'word'
  listed, marks = set(), {EOS}
  for i in range(tokenizer.vocab_size):
    piece = tokenizer.id_to_piece(i)
    initial = not pieces or piece.startswith('▁')
    word = piece[1:] if pieces and initial else piece
    if word and all(unicodedata.category(c).startswith('P') for c in word):
      marks.add(i)
    elif initial and word.lower() in words:
      listed.add(i)
  return frozenset(listed), frozenset(marks)


@functools.partial(jax.jit, static_argnames=('cfg', 'chosen'))
def _moradi(cfg: ModelConfig, params, src_BxS, src_len_B, tokens_BxT, chosen: tuple):
  memory, state = encode(cfg, params, src_BxS, src_len_B)
  memories = [keyed(memory, iv, src_BxS) for iv in chosen]

  def body(st, token_B):
    new, logits_BxV, _ = decode_step(cfg, params, memory, st, token_B)
    best_B = most_probable(logits_BxV)
    same = [most_probable(decode_step(cfg, params, m, st, token_B, iv)[1]) == best_B for iv, m in zip(chosen, memories)]
    return new, (best_B, jnp.stack(same) if same else jnp.zeros((0,) + best_B.shape, bool))

  _, (best_TxB, same_TxIxB) = jax.lax.scan(body, state, teacher_inputs(tokens_BxT).T)
  return best_TxB.T, jnp.transpose(same_TxIxB, (1, 2, 0))


def moradi_one_step(
  cfg: ModelConfig,
  params,
  src_BxS,
  src_len_B,
  tokens_BxT,
  tgt_len_B,
  intervention: Intervention | Sequence[Intervention],
  function_words: Iterable[int] | None = None,
  zero_out: bool = False,
) -> dict:
  """Moradi, Kambhatla & Sarkar 2019, "Interrogating the Explanatory Power of Attention in Neural Machine
  Translation": does the model produce the same token when, at that step only, its attention is replaced
  by a counterfactual? At every step t < tgt_len of `tokens_BxT` the original step and the counterfactual step run
  from the same state s_{t-1} (the state the model's own attention led to); the token is preserved when the
  counterfactual step's most probable token is the original step's. As in the paper, tokens are counted by the
  original step's most probable token (the model's own output along its greedy path), split into function words
  (`function_words`: a set of target token ids; their list is a word list) and content words (the rest).

  `intervention`: one counterfactual or several (attnmt/model/interventions.py: their Uniform, ZeroOutMax,
  RandomPermute, LastEncoderState, OnlyMax and KeepMaxUniformOthers are 'uniform', 'zero_max', 'permute_moved'
  (a new order at every step, redrawn up to 10 times until the largest weight moves, as their code), 'last',
  'only_max' and 'keep_max_uniform_others'; 'permute' keeps one order per sentence). With several, 'any' counts a
  token preserved by at least one of ANY_OF (uniform, zero_max and a permute) among them, as their code's
  'uniform_or_zero_out_max' branch counts for the abstract's figures (68 % of function words and 21 % of content
  words preserved, German-English); by all of them where none of ANY_OF is chosen. `zero_out` adds their ZeroOut
  (global_attention.py: `attn_h = torch.zeros(...)`, the attentional vector the generator reads zeroed at that
  step): the output layer's hidden vector (Luong's h~_t; the Bahdanau form's pre-projection vector, the analogue)
  is 0, so the step's logits are the output bias b_out and the token is preserved where it is the bias's most
  probable token; label 'zero_out', not pooled in 'any'.

  Returns {'mask': B x T, 'original': B x T most probable tokens, 'same': {label: B x T}, 'counts': {label:
  {'kept', 'tokens'[, 'function_kept', 'function_tokens', 'content_kept', 'content_tokens']}}}: sums over the
  batch. Cost per sentence: (1 + number of interventions) decoder steps per target position."""
  chosen = tuple(intervention) if isinstance(intervention, (tuple, list)) else (intervention,)
  labels = [iv.label for iv in chosen]
  if len(set(labels)) < len(labels) or {'any', 'zero_out'} & set(labels):
    raise ConfigError(f'interventions {labels}: give each a different label (one per name and options)')
  best_BxT, same_IxBxT = (np.asarray(x) for x in _moradi(cfg, params, src_BxS, src_len_B, tokens_BxT, chosen))
  mask = step_mask(tokens_BxT, tgt_len_B)
  same = {label: same_IxBxT[i] & mask for i, label in enumerate(labels)}
  if len(chosen) > 1:
    pooled = [i for i, iv in enumerate(chosen) if iv.name in ANY_OF] or list(range(len(chosen)))
    same['any'] = same_IxBxT[pooled].any(0) & mask
  if zero_out:
    same['zero_out'] = (best_BxT == int(most_probable(params['decoder']['b_out']))) & mask
  function = None if function_words is None else np.isin(best_BxT, np.fromiter(function_words, np.int64))
  counts = {}
  for label, s in same.items():
    c = {'kept': int(s.sum()), 'tokens': int(mask.sum())}
    if function is not None:
      c.update(
        function_kept=int((s & function).sum()),
        function_tokens=int((mask & function).sum()),
        content_kept=int((s & ~function).sum()),
        content_tokens=int((mask & ~function).sum()),
      )
    counts[label] = c
  return {'mask': mask, 'original': np.where(mask, best_BxT, PAD), 'same': same, 'counts': counts}


def moradi_shares(counts: dict) -> dict:
  """The shares of preserved tokens (and function and content words) from `moradi_one_step`'s counts, pooled
  counts included: {label: {'tokens': share[, 'function': share, 'content': share]}} (NaN where nothing counted)."""
  out = {}
  for label, c in counts.items():
    out[label] = {'tokens': share(c['kept'], c['tokens'])}
    if 'function_tokens' in c:
      out[label]['function'] = share(c['function_kept'], c['function_tokens'])
      out[label]['content'] = share(c['content_kept'], c['content_tokens'])
  return out
