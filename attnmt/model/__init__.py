"""The model: the encoder-decoder and its attention, as the equations read (docs/design.md).

Scores, windows and normalisers are registries (`registry.py`): a new one is one class, selected by name or
by import path. `seq2seq.Seq2Seq` is the Flax module; `decoding` holds greedy and beam search under `jit`.
Nothing here knows about training or analysis.
"""
