"""Supervised attention (train.alignment_loss_weight): the loss against NumPy, its gradient against finite
differences, weight 0 = no supervision, sparse normalisers, gold alignments from Pharaoh files beside a
tsv_pairs corpus (word links to token links, filtering, errors), refused settings, and a training run."""

import json
import os
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnmt.training import checkpoints, train_step, trainer, settings
from attnmt.training import seeds as seed_axis
from attnmt.analysis import inspection
from attnmt.model import normalizers, toy
from attnmt.errors import ConfigError
from attnmt.model.config import ModelConfig
from attnmt.data import batches, get_data_config, pharaoh, pipeline, prepare, tokenizers
from attnmt.model.seq2seq import Seq2Seq
from experiments.configs import tiny

EPS = train_step.ALIGNMENT_EPS
REVERSE_MODEL = dict(  # sized for the toy reversal task (toy.reverse_batch, 14 ids), which it must learn in 40 updates
  dropout=0.0,
  source_vocab_size=14,
  target_vocab_size=14,
  embed_size=8,
  encoder_hidden_size=8,
  decoder_hidden_size=16,
  score='additive(size=8)',
  query_timing='bahdanau(deep_output_size=8)',
)


def reference_alignment_loss(weights, gold, src_len, tgt_len):
  """NumPy, one output position at a time: (sum over linked positions of -sum_i g_i log(a_i + eps), count)."""
  total, count = 0.0, 0
  for b in range(weights.shape[0]):
    for t in range(int(tgt_len[b])):
      links = np.asarray(gold[b, t, : int(src_len[b])], np.float64)
      if links.sum() == 0:
        continue
      g = links / links.sum()
      total += -np.sum(g * np.log(np.asarray(weights[b, t, : int(src_len[b])], np.float64) + EPS))
      count += 1
  return total, count


def hand_made():
  """Two sentences (source lengths 3 and 5, target lengths 3 and 2) with links into padding that must not count."""
  rng = np.random.default_rng(0)
  weights = rng.dirichlet(np.ones(5), size=(2, 4)).astype(np.float32)
  gold = np.zeros((2, 4, 5), np.int32)
  gold[0, 0, 0] = 1  # one link
  gold[0, 1, [1, 2]] = 1  # two links: g = (0, 1/2, 1/2)
  gold[0, 1, 4] = 1  # beyond source length 3: ignored
  # gold[0, 2] has no link (an unaligned word such as "und"): counts for nothing
  gold[0, 3, 1] = 1  # beyond target length 3 (padding): ignored
  gold[1, 0, [4, 0]] = 1
  gold[1, 1, 2] = 1
  return weights, gold, np.array([3, 5]), np.array([3, 2])


def test_alignment_loss_equals_numpy_and_a_hand_worked_row():
  weights, gold, src_len, tgt_len = hand_made()
  total, count = train_step.alignment_loss(*map(jnp.asarray, (weights, gold, src_len, tgt_len)))
  want_total, want_count = reference_alignment_loss(weights, gold, src_len, tgt_len)
  assert int(count) == want_count == 4
  np.testing.assert_allclose(float(total), want_total, rtol=1e-6)
  # By hand: a = (0.5, 0.25, 0.25), links to source words 0 and 1 -> g = (1/2, 1/2, 0),
  # L = -(log 0.5 + log 0.25) / 2 = (0.6931 + 1.3863) / 2 = 1.0397.
  row = jnp.array([[[0.5, 0.25, 0.25]]])
  total, count = train_step.alignment_loss(row, jnp.array([[[1, 1, 0]]]), jnp.array([3]), jnp.array([1]))
  assert int(count) == 1 and float(total) == pytest.approx(1.0397, abs=1e-4)


def test_alignment_loss_gradient_matches_finite_differences():
  """d loss / d weights against central differences of the NumPy reference (float64); zero on padding."""
  weights, gold, src_len, tgt_len = hand_made()
  grad = np.asarray(
    jax.grad(lambda w: train_step.alignment_loss(w, jnp.asarray(gold), jnp.asarray(src_len), jnp.asarray(tgt_len))[0])(
      jnp.asarray(weights)
    )
  )
  h, w64 = 1e-6, weights.astype(np.float64)
  numeric = np.zeros_like(w64)
  for idx in np.ndindex(w64.shape):
    up, down = w64.copy(), w64.copy()
    up[idx] += h
    down[idx] -= h
    numeric[idx] = (
      reference_alignment_loss(up, gold, src_len, tgt_len)[0]
      - reference_alignment_loss(down, gold, src_len, tgt_len)[0]
    ) / (2 * h)
  np.testing.assert_allclose(grad, numeric, rtol=1e-4, atol=1e-6)
  assert np.all(grad[0, :, 3:] == 0) and np.all(grad[0, 3] == 0) and np.all(grad[1, 2:] == 0)  # padding
  assert np.all(grad[0, 2] == 0)  # the unlinked position
  # Through the softmax, d loss / d scores = a - g for a linked row, up to terms of order eps / a_i.
  scores = jnp.array([0.3, -1.0, 2.0, 0.5])
  g = np.array([0.0, 0.5, 0.5, 0.0])
  row_loss = lambda e: train_step.alignment_loss(
    jax.nn.softmax(e)[None, None], jnp.array([[[0, 1, 1, 0]]]), jnp.array([4]), jnp.array([1])
  )[0]
  np.testing.assert_allclose(jax.grad(row_loss)(scores), np.asarray(jax.nn.softmax(scores)) - g, atol=5e-5)


def reverse_batch_with_gold(batch_size=6, seed=0):
  """The copy-and-reverse task with its gold alignment: output position t links to source L - 1 - t."""
  batch = toy.reverse_batch(np.random.default_rng(seed), batch_size, 10, np.ones(6) / 6)
  gold = np.zeros(batch['tgt_out'].shape + batch['src'].shape[1:], np.int32)
  for row, n in enumerate(batch['src_len'] - 1):  # lengths count the EOS, which has no link
    gold[row, np.arange(n), n - 1 - np.arange(n)] = 1
  return {**batch, 'alignment': gold}


def test_zero_weight_is_no_supervision_and_a_weight_adds_the_alignment_loss():
  cfg = ModelConfig(**REVERSE_MODEL)
  params = train_step.init_train_state(cfg, train_step.make_optimizer(1e-3), 0).params
  batch = jax.tree.map(jnp.asarray, reverse_batch_with_gold())
  plain = {k: v for k, v in batch.items() if k != 'alignment'}
  grad = jax.jit(jax.value_and_grad(train_step.loss_fn, argnums=1, has_aux=True), static_argnums=(0, 4, 5, 6, 7))
  (loss0, parts0), grads0 = grad(cfg, params, batch, None, False, 0.1, 0.0, 0.0)
  (loss_plain, _), grads_plain = grad(cfg, params, plain, None, False, 0.1)
  assert float(loss0) == float(loss_plain) and parts0.terms == {}
  jax.tree.map(lambda a, b: np.testing.assert_array_equal(a, b), grads0, grads_plain)
  # Weight 0.5: the objective is the translation loss + 0.5 x the NumPy alignment loss of the model's weights.
  (loss, parts), grads = grad(cfg, params, batch, None, False, 0.1, 0.0, 0.5)
  weights = np.asarray(
    jax.jit(Seq2Seq(cfg).apply)({'params': params}, batch['src'], batch['src_len'], batch['tgt_in'])[1]
  )
  total, count = reference_alignment_loss(weights, np.asarray(batch['alignment']), batch['src_len'], batch['tgt_len'])
  assert count == int(np.sum(batch['src_len'] - 1))  # every output token but EOS is linked
  np.testing.assert_allclose(float(parts.terms['alignment_loss']), total / count, rtol=1e-5)
  np.testing.assert_allclose(float(loss), float(loss0) + 0.5 * total / count, rtol=1e-5)
  assert float(parts.total) == float(parts0.total)  # the translation part is unchanged
  assert not np.allclose(grads['encoder']['embed'], grads0['encoder']['embed'])
  with pytest.raises(ValueError, match=r'needs gold alignments in the batch'):  # when traced: nothing need run
    jax.eval_shape(lambda p: train_step.loss_fn(cfg, p, plain, None, False, 0.0, alignment_loss_weight=0.5), params)


@pytest.mark.slow
def test_supervision_moves_attention_to_the_gold_positions():
  """A few updates with the weight > 0 bring the attention much closer to the gold than the same updates without."""
  cfg = ModelConfig(**REVERSE_MODEL)
  optimizer = train_step.make_optimizer(3e-2)
  batch = jax.tree.map(jnp.asarray, reverse_batch_with_gold(16, seed=1))
  alignment_after = {}
  alignment_loss = jax.jit(  # one program measures both runs
    lambda p: train_step.loss_fn(cfg, p, batch, None, False, 0.0, alignment_loss_weight=1.0)[1].terms['alignment_loss']
  )
  for weight in (0.0, 5.0):
    state = train_step.init_train_state(cfg, optimizer, 0)
    step = jax.jit(lambda s, b, w=weight: train_step.train_step(cfg, optimizer, s, b, 0.0, alignment_loss_weight=w))
    for _ in range(40):
      state, metrics = step(state, batch)
    alignment_after[weight] = float(alignment_loss(state.params))
    assert ('alignment_loss' in metrics) == (weight > 0)
  assert alignment_after[5.0] < 0.25 * alignment_after[0.0], alignment_after  # measured: 0.11 against 1.76


def test_seeds_batches_stack_with_their_gold_padded_to_the_common_widths():
  a, b = reverse_batch_with_gold(3, seed=0), reverse_batch_with_gold(2, seed=1)
  b = {
    k: v[:, :4] if k in ('src', 'tgt_in', 'tgt_out') else v[:, :4, :4] if k == 'alignment' else v for k, v in b.items()
  }
  b['src_len'] = b['tgt_len'] = np.minimum(b['src_len'], 4)
  stacked = seed_axis.stack_batches([a, b], seed_axis.BATCH_KEYS + ('alignment',))
  width_t, width_s = a['tgt_out'].shape[1], a['src'].shape[1]
  assert stacked['alignment'].shape == (2, 3, width_t, width_s)
  np.testing.assert_array_equal(stacked['alignment'][0], a['alignment'])
  np.testing.assert_array_equal(stacked['alignment'][1, :2, :4, :4], b['alignment'])
  assert stacked['alignment'][1, 2:].sum() == 0 and stacked['alignment'][1, :, 4:].sum() == 0
  assert 'alignment' not in seed_axis.stack_batches([a, b])  # unsupervised runs leave it on the host


@pytest.mark.parametrize('normalizer', ['sparsemax', 'entmax15'])
@pytest.mark.slow
def test_sparse_normalizers_give_a_finite_loss_and_gradient(normalizer):
  # A gold position with exactly zero weight: the loss is -log(eps), its gradient finite (zero, off the support).
  norm = normalizers.build(ModelConfig(normalizer=normalizer)).normalize
  mask = jnp.ones(4, bool)
  row_loss = lambda e: train_step.alignment_loss(
    norm(e, mask)[None, None], jnp.array([[[0, 0, 1, 1]]]), jnp.array([4]), jnp.array([1])
  )[0]
  scores = jnp.array([3.0, 2.9, -4.0, 0.0])
  assert float(norm(scores, mask)[2]) == 0.0 and float(norm(scores, mask)[3]) == 0.0
  assert float(row_loss(scores)) == pytest.approx(-np.log(EPS), rel=1e-6)
  assert np.all(np.isfinite(np.asarray(jax.grad(row_loss)(scores))))
  # The whole model: finite objective and gradients where the sparse weights have exact zeros.
  cfg = ModelConfig(**{**REVERSE_MODEL, 'normalizer': normalizer})
  params = train_step.init_train_state(cfg, train_step.make_optimizer(1e-3), 0).params
  params = jax.tree.map(lambda p: p * 4.0, params)  # sharper scores: more exact zeros
  batch = jax.tree.map(jnp.asarray, reverse_batch_with_gold())
  weights = np.asarray(
    jax.jit(Seq2Seq(cfg).apply)({'params': params}, batch['src'], batch['src_len'], batch['tgt_in'])[1]
  )
  gold = np.asarray(batch['alignment']).astype(bool)
  assert np.any(weights[gold] == 0.0)  # some gold links get no weight at all
  grad = jax.jit(jax.value_and_grad(train_step.loss_fn, argnums=1, has_aux=True), static_argnums=(0, 4, 5, 6, 7))
  (loss, parts), grads = grad(cfg, params, batch, None, False, 0.0, 0.0, 1.0)
  assert np.isfinite(float(loss)) and np.isfinite(float(parts.terms['alignment_loss']))
  assert all(np.all(np.isfinite(np.asarray(g))) for g in jax.tree.leaves(grads))


def test_pharaoh_links_by_hand():
  assert pharaoh.parse_links('0-0 2-1 1p1') == {(0, 0), (2, 1), (1, 1)}
  assert pharaoh.parse_links('  ') == set()
  assert pharaoh.format_links({(2, 1), (0, 0), (10, 3)}) == '0-0 2-1 10-3'
  for bad in ('0-', '1:2', '-1-2', 'a-b', '0-1-2'):
    with pytest.raises(pharaoh.PharaohFormatError, match=r"^gold\.align:7: '.+' is not a Pharaoh link; write"):
      pharaoh.parse_links(f'0-0 {bad}', 'gold.align', 7)


class PieceTokenizer:
  """Words cut into known pieces, one id per piece: a stand-in for sentencepiece whose output is known."""

  def __init__(self, pieces):
    self.pieces = pieces

  def encode(self, word):
    return list(self.pieces[word])


def test_word_links_become_token_links_by_hand():
  src = PieceTokenizer({'the': [10], 'old': [11], 'houses': [12, 13]})
  tgt = PieceTokenizer({'las': [20], 'casas': [21, 22, 23], 'viejas': [24]})
  src_ids, src_words = pipeline.encode_words(src, 'the old houses')
  tgt_ids, tgt_words = pipeline.encode_words(tgt, 'las casas viejas')
  assert (src_ids, src_words) == ([10, 11, 12, 13], [0, 1, 2, 2])
  assert (tgt_ids, tgt_words) == ([20, 21, 22, 23, 24], [0, 1, 1, 1, 2])
  links = pipeline.token_links('0-0 1-2 2-1', src_words, tgt_words)
  # the-las: (0, 0); old-viejas: (1, 4); houses (tokens 2, 3) - casas (tokens 1, 2, 3): 2 x 3 links.
  want = {(0, 0), (1, 4), (2, 1), (2, 2), (2, 3), (3, 1), (3, 2), (3, 3)}
  assert {tuple(r) for r in links.tolist()} == want and len(links) == len(want)
  # The word tokenizer: 'well-known' is two tokens, a lone ',' none (its links go).
  words = tokenizers.WordTokenizer.train(['a well known , word'], 20)
  ids, word_of = pipeline.encode_words(words, 'a well-known , word')
  assert len(ids) == 4 and word_of == [0, 1, 1, 3]
  links = pipeline.token_links('1-0 2-1 3-2', word_of, [0, 1, 2])
  assert {tuple(r) for r in links.tolist()} == {(1, 0), (2, 0), (3, 2)}


SRC_WORDS = 'a b c d e f g h'.split()
TGT_WORDS = 'p q r s t u v w'.split()


def aligned_corpus(tmp_path, n=60):
  """A TSV corpus (plus a blank line and a bad line) and its Pharaoh file; sentence i has 1 + i % 9 words and
  crossing links, except every 7th target word, which is unaligned. Returns (tsv, align, {line: links})."""
  rng = np.random.default_rng(3)
  tsv, align, gold = [], [], {}
  for i in range(n):
    k = 1 + i % 9
    src = ' '.join(rng.choice(SRC_WORDS, k)) + f' n{i}'  # a distinct source: the splits hash sources
    tgt = ' '.join(rng.choice(TGT_WORDS, k)) + f' m{i}'
    links = {(k - 1 - j, j) for j in range(k) if (i + j) % 7} | {(k, k)}
    tsv.append(f'{src}\t{tgt}')
    align.append(pharaoh.format_links(links))
    gold[len(tsv)] = links
    if i == 10:
      tsv += ['', 'not a pair']  # a blank line and a bad line (skipped): their Pharaoh lines are not used
      align += ['', '99-99']
  (tmp_path / 'pairs.tsv').write_text('\n'.join(tsv) + '\n')
  (tmp_path / 'gold.align').write_text('\n'.join(align) + '\n')
  return str(tmp_path / 'pairs.tsv'), str(tmp_path / 'gold.align'), gold


def aligned_cfg(tmp_path, tsv, align, tokenizer='word', vocab_size=60):
  cfg = get_data_config()
  cfg.name, cfg.data_dir, cfg.tsv_path, cfg.alignment_path = 'tsv_pairs', str(tmp_path / 'data'), tsv, align
  cfg.skip_bad_lines, cfg.tokenizer, cfg.vocab_size = True, tokenizer, vocab_size
  cfg.validation_fraction = cfg.test_fraction = 0.15
  cfg.batch_size = 8
  return cfg


def test_tsv_alignments_reach_the_batches_in_step_with_filtered_pairs(tmp_path):
  tsv, align, gold = aligned_corpus(tmp_path)
  cfg = aligned_cfg(tmp_path, tsv, align)
  cfg.max_source_length = 6  # sources of 6+ words (7+ tokens with EOS) leave the training batches
  prepared = prepare(cfg)
  seen = 0
  for split in ('train', 'validation', 'test'):
    raw = prepared.corpus.splits[split]
    assert raw.alignment == [pharaoh.format_links(gold[int(line)]) for line in raw.ids]
    kept = set()
    for batch in batches(prepared, split, cfg, num_epochs=1):
      for row, index in enumerate(batch['index']):
        line = int(raw.ids[index])
        n_src, n_tgt = batch['src_len'][row] - 1, batch['tgt_len'][row] - 1
        assert n_src == len(raw.source[index].split()) and n_tgt == len(raw.target[index].split())
        t_idx, s_idx = np.nonzero(batch['alignment'][row])
        assert set(zip(s_idx.tolist(), t_idx.tolist())) == gold[line]  # one token per word here
        kept.add(int(index))
    lengths = np.array([len(s.split()) + 1 for s in raw.source])
    want = set(np.flatnonzero(lengths <= 6)) if split == 'train' else set(range(len(raw.source)))
    assert kept == want and (split != 'train' or 0 < len(want) < len(raw.source))  # the filter removed some
    seen += len(raw.source)
  assert seen == 60


def test_gold_alignments_for_aer_are_word_links_under_sentencepiece(tmp_path):
  """With pieces smaller than words, the analysis's gold links are still the Pharaoh word links."""
  tsv, align, gold = aligned_corpus(tmp_path)
  cfg = aligned_cfg(tmp_path, tsv, align, tokenizer='sentencepiece', vocab_size=40)
  prepared = prepare(cfg)
  assert len(prepared.tokenized['test'].src_ids) > sum(len(s.split()) for s in prepared.corpus.splits['test'].source)
  run = types.SimpleNamespace(prepared=prepared, config=types.SimpleNamespace(data=cfg))
  got = inspection.gold_alignments_from_batches(run, 'test')
  raw = prepared.corpus.splits['test']
  assert got == {i: gold[int(line)] for i, line in enumerate(raw.ids)}


@pytest.mark.parametrize(
  'lines,message',
  [
    (
      lambda a: a[:-1],
      r'gold\.align has 61 lines and .*pairs\.tsv has 62; give one Pharaoh line per line of the pair file',
    ),
    (lambda a: a[:3] + ['0-0 1-x'] + a[4:], r"gold\.align:4: '1-x' is not a Pharaoh link; write 0-based"),
    (
      lambda a: a[:2] + ['0-0 0-9'] + a[3:],
      r'gold\.align:3: link 0-9 names target word 9, but the pair on line 3 of .*pairs\.tsv has 4 '
      r'target words \(0 to 3\); indices are 0-based',
    ),
    (
      lambda a: a[:2] + ['5-0'] + a[3:],
      r'gold\.align:3: link 5-0 names source word 5, but the pair on line 3 .* has 4 source words',
    ),
  ],
)
def test_bad_alignment_files_are_one_line_errors(tmp_path, lines, message):
  tsv, align, _ = aligned_corpus(tmp_path)
  with open(align) as f:
    rows = f.read().split('\n')[:-1]
  with open(align, 'w') as f:
    f.write('\n'.join(lines(rows)) + '\n')
  with pytest.raises(pharaoh.PharaohFormatError, match=message) as error:
    prepare(aligned_cfg(tmp_path, tsv, align))
  assert '\n' not in str(error.value)
  assert not os.path.exists(tmp_path / 'data' / 'tfds')  # refused before anything is built


def test_unreadable_alignment_files_are_one_line_errors(tmp_path):
  with pytest.raises(pharaoh.PharaohFormatError, match=r'^cannot read alignment file .*missing\.align: No such file'):
    pharaoh.read_lines(str(tmp_path / 'missing.align'))
  (tmp_path / 'latin1.align').write_bytes(b'0-0\n1-1\n\xe9\n')
  with pytest.raises(pharaoh.PharaohFormatError, match=r'latin1\.align:3: not valid UTF-8$'):
    pharaoh.read_lines(str(tmp_path / 'latin1.align'))
  (tmp_path / 'crlf.align').write_bytes(b'\xef\xbb\xbf0-0\r\n\r\n1-1')  # BOM, CRLF, no final newline
  assert pharaoh.read_lines(str(tmp_path / 'crlf.align')) == ['0-0', '', '1-1']


def supervised_config(**changes):
  config = tiny.get_config()
  config.train.alignment_loss_weight = 0.5
  for key, value in changes.items():
    section, name = key.split('.')
    config[section][name] = value
  return config


@pytest.mark.parametrize(
  'changes,message',
  [
    ({'model.score': 'none'}, r'^train\.alignment_loss_weight=0\.5 trains attention, and model\.score=none has none'),
    ({'data.name': 'bible_en_es'}, r'^train\.alignment_loss_weight=0\.5 needs gold alignments, and data\.name='),
    ({'data.name': 'tsv_pairs', 'data.tsv_path': 'p.tsv'}, r'needs gold alignments, and data\.name=tsv_pairs has'),
    ({'train.alignment_loss_weight': -1.0}, r'^train\.alignment_loss_weight must be a finite number >= 0\.0, got -1'),
    ({'data.alignment_path': 'gold.align'}, r'^data\.alignment_path is read only beside a tsv_pairs corpus'),
  ],
)
def test_settings_that_cannot_supervise_are_refused(changes, message):
  with pytest.raises(ConfigError, match=message) as error:
    trainer.check_config(supervised_config(**changes))
  assert '\n' not in str(error.value)


def test_supervised_settings_that_can_work_pass():
  trainer.check_config(supervised_config())
  trainer.check_config(
    supervised_config(**{'data.name': 'tsv_pairs', 'data.tsv_path': 'p.tsv', 'data.alignment_path': 'g.align'})
  )
  trainer.check_config(supervised_config(**{'model.score': 'none', 'train.alignment_loss_weight': 0.0}))
  assert settings.has_gold_alignments(supervised_config().data)


def test_a_sweep_skips_none_under_supervision_with_the_reason():
  from experiments import sweep_plan

  config = supervised_config()
  config.sweep.scores = 'none,additive(size=16)'
  keep, refused = sweep_plan.variants(config)
  # a sweep's name shows the options that differ between its variants: none here
  assert [name for name, _ in keep] == ['additive/bahdanau/global']
  assert len(refused) == 1 and 'model.score=none has none' in refused[0][1]


def test_runs_written_before_the_setting_read_it_as_off(tmp_path):
  config = tiny.get_config()
  old = config.to_dict()
  del old['train']['alignment_loss_weight'], old['data']['alignment_path']
  del old['data']['eval_pad_to_multiple'], old['data']['equal_widths']
  (tmp_path / checkpoints.CONFIG_FILE).write_text(json.dumps({'attnmt_format': 1, 'config': old}))
  loaded = checkpoints.load_config(str(tmp_path))
  assert loaded.train.alignment_loss_weight == 0.0 and loaded.data.alignment_path == ''
  assert loaded.data.eval_pad_to_multiple == 0 and loaded.data.equal_widths is False
  # as training stores a config: the model section under current keys, every option written out
  assert loaded.to_dict() == json.loads(json.dumps(settings.canonical(config).to_dict()))


@pytest.mark.slow
def test_a_supervised_training_run_logs_the_alignment_loss(tmp_path):
  config = supervised_config()
  config.data.data_dir = str(tmp_path / 'data')
  config.train.update(num_steps=20, log_every=10, eval_every=0, checkpoint_every=20)
  trainer.train_and_evaluate(config, str(tmp_path / 'run'))
  records = [json.loads(line) for line in (tmp_path / 'run' / 'metrics.jsonl').read_text().splitlines()]
  train = [r for r in records if r['split'] == 'train']
  assert [r['step'] for r in train] == [10, 20]
  for r in train:
    assert len(r['alignment_loss']) == 1 and 0.0 < r['alignment_loss'][0] < -np.log(EPS)
  events = b''.join(p.read_bytes() for p in (tmp_path / 'run' / 'tensorboard').glob('events.out.tfevents.*'))
  assert b'train/alignment_loss/seed0' in events
