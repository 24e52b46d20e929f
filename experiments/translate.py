"""Translate sentences with a trained run, from a file or stdin; optionally show each output word's attention.

    echo "In the beginning God created the heavens and the earth." | \
        python -m experiments.translate --run=runs/main/additive-bahdanau-global-seeds=0 --show_attention

With --show_attention every output word gets a row of bars over the source tokens (one column per source
token, darker block = more weight) and the source token it attends to most.
"""

import sys

from absl import app, flags

from attnmt import api
from attnmt.analysis import settings as analysis_settings
from experiments import common

flags.DEFINE_string('run', None, 'Run directory (written by train.py or sweep.py).', required=True)
flags.DEFINE_string('input', '-', "File with one sentence per line, or '-' for stdin.")
flags.DEFINE_integer(
  'seed_index',
  0,
  "Which training seed's parameters translate: an index into the run's seeds (runs train several together).",
)
DECLARED = (analysis_settings.WHICH, analysis_settings.BEAM_SIZE)  # analyze's and the sweep's, declared once
common.define_flags(DECLARED, beam_size='beam width of the output (0: greedy search, as Run.translate)')
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

  common.flag_values(DECLARED)  # --beam_size >= 0
  if FLAGS.max_source_tokens < 0:
    raise ValueError(f'--max_source_tokens ({FLAGS.max_source_tokens}) must be >= 0 (0: no limit)')
  if FLAGS.input == '-':
    stream = sys.stdin
    if stream is None or stream.closed:
      raise ValueError("standard input is closed; pipe sentences in, or pass --input FILE (one sentence per line)")
    stream = stream.buffer
  else:  # opened before the run loads: a wrong path fails at once
    try:
      stream = open(FLAGS.input, 'rb')
    except OSError as e:
      raise ValueError(
        f'cannot read --input {FLAGS.input} ({e.strerror}); pass a text file with one sentence '
        "per line, or '-' for stdin"
      ) from None
  run = api.load(FLAGS.run, FLAGS.which)  # the run directory alone: no corpus is read
  if not 0 <= FLAGS.seed_index < len(run.seeds):
    raise ValueError(
      f'--seed_index={FLAGS.seed_index} but the run has {len(run.seeds)} seed(s) ({", ".join(map(str, run.seeds))}); '
      f'pass an index from 0 to {len(run.seeds) - 1}'
    )
  limit = FLAGS.max_source_tokens or run.max_source_tokens
  first_empty = None  # empty lines are an error only when a sentence follows them (a trailing one is fine)
  for lineno, line in _decoded_lines(stream, 'standard input' if FLAGS.input == '-' else f'--input {FLAGS.input}'):
    text = line.lstrip('\ufeff').strip() if lineno == 1 else line.strip()  # a byte-order mark is dropped
    if not text:
      first_empty = first_empty or lineno
      continue
    if first_empty:
      raise ValueError(f'input line {first_empty} is empty; give one non-empty sentence per line')
    n = len(run.tokenize(text))
    if limit and n > limit:
      raise ValueError(
        f'input line {lineno} has {n} tokens (with EOS), more than the limit {limit}; '
        'split the sentence or raise --max_source_tokens'
      )
    (out,) = run.translate([text], FLAGS.beam_size, run.seeds[FLAGS.seed_index])
    print(out.text, flush=True)
    if FLAGS.show_attention:
      print('\n'.join(attention_rows(out.attention, out.source_tokens, out.tokens)))


def _decoded_lines(stream, name: str):
  """(line number, text) of every line of a binary stream, each decoded as UTF-8 on its own, so that a
  binary or mis-encoded file is refused naming its line."""
  for lineno, raw in enumerate(stream, 1):
    try:
      yield lineno, raw.decode('utf-8')
    except UnicodeDecodeError as e:
      raise ValueError(
        f'{name} line {lineno} is not UTF-8 text (byte {raw[e.start]:#04x} at column {e.start + 1}); give a UTF-8 '
        'text file with one sentence per line (iconv -t UTF-8 converts one)'
      ) from None


if __name__ == '__main__':
  app.run(main, flags_parser=common.parse_flags)
