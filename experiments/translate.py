"""Translate sentences with a trained run, from a file or stdin; optionally show each output word's attention.

    echo "In the beginning God created the heavens and the earth." | \
        python -m experiments.translate --run=runs/main/additive-bahdanau-global --show_attention

With --show_attention every output word gets a row of bars over the source tokens (one column per source
token, darker block = more weight) and the source token it attends to most.
"""

import sys

from absl import app, flags

from experiments import common
import jax.numpy as jnp
import numpy as np
from attnmt.analysis import inspection
from attnmt import data
from attnmt.model import decoding, normalizers
from attnmt.training import evaluation

flags.DEFINE_string('run', None, 'Run directory (written by train.py or sweep.py).', required=True)
flags.DEFINE_string('input', '-', "File with one sentence per line, or '-' for stdin.")
flags.DEFINE_enum('which', 'best', ['best', 'latest'], 'Which checkpoint.')
flags.DEFINE_integer('seed_index', 0, 'Which seed of the run (runs train several seeds together).')
flags.DEFINE_integer('beam_size', 5, 'Beam size (0 = greedy).')
flags.DEFINE_integer('max_source_tokens', 0, 'Refuse longer inputs (0: the model limit, if it has one).')
flags.DEFINE_bool('show_attention', False, 'Print attention bars for every output word.')
FLAGS = flags.FLAGS

BLOCKS = ' ▁▂▃▄▅▆▇█'


def attention_rows(weights, src_pieces, out_pieces) -> list[str]:
  """One line per output token: bars over the source tokens and the most attended source token."""
  width = max(len(p) for p in out_pieces)
  lines = ['  ' + ' ' * width + ' | ' + ' '.join(src_pieces)]
  for row, piece in zip(weights, out_pieces):
    cells = [
      BLOCKS[min(int(round(w * (len(BLOCKS) - 1))), len(BLOCKS) - 1)] * max(len(p), 1) for w, p in zip(row, src_pieces)
    ]
    top = int(row.argmax())
    lines.append(f'  {piece:>{width}} | ' + ' '.join(cells) + f'   <- {src_pieces[top]} ({row[top]:.2f})')
  return lines


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f'unexpected arguments {argv[1:]}')
  common.run_guarded(_translate)


def _translate():

  if FLAGS.beam_size < 0 or FLAGS.max_source_tokens < 0:
    raise ValueError(
      f'--beam_size ({FLAGS.beam_size}) and --max_source_tokens ({FLAGS.max_source_tokens}) must be '
      '>= 0 (0: greedy; 0: no limit)'
    )
  if FLAGS.input == '-':
    stream = sys.stdin
    if stream is None or stream.closed:
      raise ValueError("standard input is closed; pipe sentences in, or pass --input FILE (one sentence per line)")
  else:  # opened before the run loads: a wrong path fails at once
    try:
      stream = open(FLAGS.input, encoding='utf-8-sig')  # a byte-order mark is dropped
    except OSError as e:
      raise ValueError(
        f'cannot read --input {FLAGS.input} ({e.strerror}); pass a text file with one sentence '
        "per line, or '-' for stdin"
      ) from None
  run = inspection.load_model(FLAGS.run, FLAGS.which)  # the run directory alone: no corpus is read
  if not 0 <= FLAGS.seed_index < len(run.seeds):
    raise ValueError(f'--seed_index={FLAGS.seed_index} but the run has {len(run.seeds)} seed(s)')
  params = evaluation.seed_params(run.params, FLAGS.seed_index)
  src_tok, tgt_tok = run.src_tokenizer, run.tgt_tokenizer
  limit = FLAGS.max_source_tokens or (run.cfg.max_source_length if run.cfg.score == 'location' else 0)
  first_empty = None  # empty lines are an error only when a sentence follows them (a trailing one is fine)
  for lineno, line in enumerate(stream, 1):
    text = line.lstrip('\ufeff').strip() if lineno == 1 else line.strip()
    if not text:
      first_empty = first_empty or lineno
      continue
    if first_empty:
      raise ValueError(f'input line {first_empty} is empty; give one non-empty sentence per line')
    ids = src_tok.encode(text) + [data.EOS_ID]
    if limit and len(ids) > limit:
      raise ValueError(
        f'input line {lineno} has {len(ids)} tokens (with EOS), more than the limit {limit}; '
        'split the sentence or raise --max_source_tokens'
      )
    src = jnp.asarray([ids], jnp.int32)
    src_len = jnp.asarray([len(ids)], jnp.int32)
    max_len = evaluation.decode_length(len(ids), run.config.train.max_decode_factor)
    if FLAGS.beam_size:
      # The best hypothesis's attention is recomputed by forced decoding: the beam's K attention histories,
      # reordered at every step, grew with the square of the length (not for a recurrent normaliser).
      recurrent = normalizers.build(run.cfg).recurrent
      out = decoding.beam_search(
        run.cfg,
        params,
        src,
        src_len,
        beam_size=FLAGS.beam_size,
        max_len=max_len,
        alpha=run.config.train.beam_alpha,
        keep_attention=FLAGS.show_attention and recurrent,
        beta=run.config.train.get('beam_coverage_penalty', 0.0),  # absent from runs made before it existed
      )
      out = decoding.Decoded(*(x[:, 0] for x in out))
      if FLAGS.show_attention and not recurrent:
        n = int(out.lengths[0])
        out = out._replace(weights=decoding.forced_attention(run.cfg, params, src, src_len, out.tokens[:, :n]))
    else:
      out = decoding.greedy(run.cfg, params, src, src_len, max_len=max_len, keep_attention=FLAGS.show_attention)
    n = int(out.lengths[0])
    out_ids = np.asarray(out.tokens[0, :n]).tolist()
    print(tgt_tok.decode(out_ids), flush=True)
    if FLAGS.show_attention:
      src_pieces = [src_tok.id_to_piece(i) for i in ids[:-1]] + ['</s>']
      out_pieces = [tgt_tok.id_to_piece(i) if i != data.EOS_ID else '</s>' for i in out_ids]
      print('\n'.join(attention_rows(np.asarray(out.weights[0, :n, : len(ids)]), src_pieces, out_pieces)))


if __name__ == '__main__':
  app.run(main, flags_parser=common.parse_flags)
