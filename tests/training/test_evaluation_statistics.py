"""What training logs about attention at every evaluation: the statistics of the teacher-forced validation
attention (metrics.jsonl, TensorBoard scalars) and heatmaps of fixed validation sentences (TensorBoard
images), read back from the event file with tensorboardX's protobufs and the TFRecord framing."""

import glob
import io
import json
import math
import struct
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats
from PIL import Image
from tensorboardX.proto import event_pb2, plugin_hparams_pb2
from tensorboardX.record_writer import masked_crc32c

from attnmt import data
from attnmt.training import evaluation, settings, trainer, tensorboard_heatmaps
from attnmt.training import results as run_results
from attnmt.analysis import inspection
from attnmt.data import pipeline
from attnmt.model.config import ModelConfig
from attnmt.model.seq2seq import init_params
from experiments.configs import tiny
from small_model import small_config

STATISTICS = (
  'attention_entropy',
  'attention_max_weight',
  'attention_coverage_deviation',
  'attention_monotonicity',
  'attention_monotonicity_undefined',
)


def read_events(path: str) -> list:
  """Every Event of a TensorBoard event file: TFRecords (length, masked CRC-32C of the length, data, masked
  CRC-32C of the data), each checked, each data an Event protobuf."""
  buf, pos, events = open(path, 'rb').read(), 0, []
  while pos < len(buf):
    header = buf[pos : pos + 8]
    (length,), (length_crc,) = struct.unpack('<Q', header), struct.unpack('<I', buf[pos + 8 : pos + 12])
    payload = buf[pos + 12 : pos + 12 + length]
    (payload_crc,) = struct.unpack('<I', buf[pos + 12 + length : pos + 16 + length])
    assert length_crc == masked_crc32c(header) and payload_crc == masked_crc32c(payload)
    events.append(event_pb2.Event.FromString(payload))
    pos += 16 + length
  return events


def summaries(workdir) -> tuple[dict, dict]:
  """{(tag, step): scalar} and {(tag, step): Summary.Image} of a run's TensorBoard event file."""
  (path,) = glob.glob(str(workdir / 'tensorboard' / 'events.out.tfevents.*'))
  scalars, images = {}, {}
  for event in read_events(path):
    for value in event.summary.value:
      kind = value.WhichOneof('value')
      if kind == 'image':
        images[(value.tag, event.step)] = value.image
      elif kind == 'simple_value':
        scalars[(value.tag, event.step)] = value.simple_value
  return scalars, images


def _batch(sentences, src_width, tgt_width, empty_rows=0):
  """A batch (data.pipeline's format) of (source ids, target ids) pairs at the given widths, plus empty rows."""
  rows = len(sentences) + empty_rows
  b = {k: np.zeros((rows, w), np.int32) for k, w in (('src', src_width), ('tgt_in', tgt_width), ('tgt_out', tgt_width))}
  b['src_len'], b['tgt_len'] = np.zeros(rows, np.int32), np.zeros(rows, np.int32)
  for r, (src, tgt) in enumerate(sentences):
    b['src'][r, : len(src) + 1] = src + [data.EOS_ID]
    b['tgt_in'][r, : len(tgt) + 1] = [data.BOS_ID] + tgt
    b['tgt_out'][r, : len(tgt) + 1] = tgt + [data.EOS_ID]
    b['src_len'][r], b['tgt_len'][r] = len(src) + 1, len(tgt) + 1
  b['index'] = np.where(np.arange(rows) < len(sentences), np.arange(rows), -1).astype(np.int32)
  return b


SENTENCES = [([4, 5, 6, 7, 8], [9, 10, 11, 12]), ([13, 4], [5, 6, 7, 8, 9, 10]), ([6, 7, 8, 9, 10, 11, 12], [4, 5])]


def test_teacher_forced_statistics_leave_out_padding_and_equal_numpy():
  """The statistics of a padded batch (wide columns and rows, empty rows) equal NumPy's on each sentence's
  forced attention cut to its lengths: entropy and maximum over the output tokens (EOS row out), coverage
  over every step and source position, Spearman of position and peak (EOS row and column out). Padded
  target steps attend too, and padded columns would each add a coverage deviation of 1."""
  cfg = small_config(score='additive')
  params = init_params(cfg, jax.random.key(3))
  batch = _batch(SENTENCES, 11, 9, empty_rows=2)
  got = evaluation.teacher_forced_metrics(cfg, params, [batch])
  weights = inspection.reference_attention(cfg, params, *(jnp.asarray(batch[k]) for k in ('src', 'src_len', 'tgt_in')))
  entropies, maxima, coverage, rhos = [], [], [], []
  for k, (src, tgt) in enumerate(SENTENCES):
    a = np.asarray(weights, float)[k, : len(tgt) + 1, : len(src) + 1]
    for row in a[:-1]:
      entropies.append(-np.sum(row * np.log(row)))  # softmax weights: all positive
      maxima.append(row.max())
    coverage.extend(np.abs(a.sum(axis=0) - 1.0))
    if len(tgt) >= 3:
      with warnings.catch_warnings():
        warnings.simplefilter('ignore')  # constant peaks: scipy warns and returns NaN, counted 0 and undefined
        rhos.append(scipy.stats.spearmanr(np.arange(len(tgt)), a[:-1, :-1].argmax(axis=1)).statistic)
  assert got['attention_entropy'] == pytest.approx(np.mean(entropies), rel=1e-5)
  assert got['attention_max_weight'] == pytest.approx(np.mean(maxima), rel=1e-5)
  assert got['attention_coverage_deviation'] == pytest.approx(np.mean(coverage), rel=1e-5)
  assert got['tokens'] == sum(len(t) + 1 for _, t in SENTENCES)
  assert len(rhos) == 2  # the third sentence has 2 output tokens: too short for a rank correlation
  assert got['attention_monotonicity_undefined'] == np.mean(np.isnan(rhos))
  assert got['attention_monotonicity'] == pytest.approx(np.mean(np.nan_to_num(rhos)), abs=1e-12)


def test_a_batch_too_large_for_its_attention_counts_in_the_loss_not_in_the_statistics(monkeypatch):
  """A batch whose B x T x S weights exceed ATTENTION_CELLS gets its loss (the same as with its attention kept)
  and is left out of the attention statistics, its sentences counted; the others' statistics are unchanged."""
  cfg = small_config(score='additive')
  params = init_params(cfg, jax.random.key(3))
  short, long = _batch(SENTENCES[:2], 8, 7), _batch(SENTENCES[2:], 11, 9, empty_rows=1)
  whole = [evaluation.teacher_forced_metrics(cfg, params, [b]) for b in (short, long)]
  monkeypatch.setattr(evaluation, 'ATTENTION_CELLS', 2 * 7 * 8)  # the short batch's own size still fits
  got = evaluation.teacher_forced_metrics(cfg, params, [short, long])
  assert got['attention_skipped_long'] == 1 and whole[0]['attention_skipped_long'] == 0
  assert got['tokens'] == whole[0]['tokens'] + whole[1]['tokens']
  assert got['loss'] == pytest.approx(
    (whole[0]['loss'] * whole[0]['tokens'] + whole[1]['loss'] * whole[1]['tokens']) / got['tokens'], rel=1e-6
  )
  for key in ('attention_entropy', 'attention_max_weight', 'attention_coverage_deviation'):
    assert got[key] == pytest.approx(whole[0][key], rel=1e-6)


def test_training_evaluation_of_a_10000_token_pair_compiles_to_bounded_buffers():
  """Training's evaluation of one 10,000-token pair (a batch of its own, batching.EVAL_BATCH_POSITIONS):
  the loss without its attention, greedy and beam decoding without attention history, each compile to under
  100 MB of buffers; the teacher-forced attention it leaves out (ATTENTION_CELLS) would take 600 MB."""
  from attnmt.model import decoding

  cfg = small_config(score='additive')
  params = init_params(cfg, jax.random.key(0))
  s, t = 10001, evaluation.decode_length(10001, 1.5)
  i = lambda *shape: jax.ShapeDtypeStruct(shape, jnp.int32)
  batch = {'src': i(1, s), 'src_len': i(1), 'tgt_in': i(1, t), 'tgt_out': i(1, t), 'tgt_len': i(1)}
  assert s * t > evaluation.ATTENTION_CELLS

  def megabytes(compiled):
    m = compiled.memory_analysis()
    return (m.temp_size_in_bytes + m.output_size_in_bytes) / 1e6

  assert megabytes(evaluation._batch_loss_only.lower(cfg, params, batch).compile()) < 100
  assert megabytes(evaluation._batch_loss.lower(cfg, params, batch).compile()) > 600
  src = (batch['src'], batch['src_len'])
  assert megabytes(decoding.greedy.lower(cfg, params, *src, max_len=t, keep_attention=False).compile()) < 100
  assert (
    megabytes(decoding.beam_search.lower(cfg, params, *src, beam_size=4, max_len=t, keep_attention=False).compile())
    < 100
  )


def test_teacher_forced_statistics_of_none_are_those_of_its_uniform_mean_summary():
  """Score `none` has no attention: the model's weights are the uniform 1/S of its mean summary, so the
  statistics are log S, 1/S, |T/S - 1| and a monotonicity that is undefined for every sentence (logged 0)."""
  cfg = small_config(score='none')
  params = init_params(cfg, jax.random.key(0))
  got = evaluation.teacher_forced_metrics(cfg, params, [_batch(SENTENCES, 9, 9, empty_rows=1)])
  shapes = [(len(t) + 1, len(s) + 1) for s, t in SENTENCES]  # (T, S), EOS included
  tokens = sum(t - 1 for t, _ in shapes)
  assert got['attention_entropy'] == pytest.approx(sum((t - 1) * math.log(s) for t, s in shapes) / tokens, rel=1e-6)
  assert got['attention_max_weight'] == pytest.approx(sum((t - 1) / s for t, s in shapes) / tokens, rel=1e-6)
  want = sum(s * abs(t / s - 1) for t, s in shapes) / sum(s for _, s in shapes)
  assert got['attention_coverage_deviation'] == pytest.approx(want, rel=1e-5)
  assert got['attention_monotonicity'] == 0.0 and got['attention_monotonicity_undefined'] == 1.0


def test_spread_over_lengths_picks_the_inner_quantiles():
  lengths = np.array([5, 1, 9, 3, 7, 2, 8])  # by length: positions 1, 5, 3, 0, 4, 6, 2
  # Ranks round(6 k / 4), k = 1..3: 2, 3, 4 (1.5 and 4.5 round to even) -> positions 3, 0, 4.
  np.testing.assert_array_equal(tensorboard_heatmaps.spread_over_lengths(lengths, 3), [0, 3, 4])
  np.testing.assert_array_equal(tensorboard_heatmaps.spread_over_lengths(lengths, 1), [0])  # the median, length 5
  np.testing.assert_array_equal(tensorboard_heatmaps.spread_over_lengths(lengths, 7), np.arange(7))
  assert len(tensorboard_heatmaps.spread_over_lengths(lengths, 0)) == 0


def test_heatmap_sentences_longer_than_the_drawn_limit_are_passed_over_and_counted():
  lengths = np.array([5, 10001, 1, 9, 6001, 3, 7, 2, 8])  # the short ones are those of the test above
  chosen, passed_over = tensorboard_heatmaps.choose(lengths, 3, limit=200)
  np.testing.assert_array_equal(chosen, [0, 5, 6])  # positions 0, 3, 4 of the short ones
  assert passed_over == 2
  chosen, passed_over = tensorboard_heatmaps.choose(lengths, 20, limit=200)
  np.testing.assert_array_equal(chosen, [0, 2, 3, 5, 6, 7, 8])
  assert passed_over == 2
  assert tensorboard_heatmaps.choose(lengths, 3, limit=10001)[1] == 0  # the limit itself is drawn


@pytest.fixture(scope='module')
def data_dir(tmp_path_factory):
  return str(tmp_path_factory.mktemp('data'))


def _tiny(data_dir, **train):
  config = tiny.get_config()
  config.data.data_dir = data_dir
  for k, v in train.items():
    config.train[k] = v
  return config


@pytest.fixture(scope='module')
def two_seed_run(data_dir, tmp_path_factory):
  """A tiny additive run of 2 vmapped seeds, evaluated at steps 20 and 40, with 3 heatmap sentences."""
  workdir = tmp_path_factory.mktemp('run')
  config = _tiny(data_dir, seeds='0,1', num_steps=40, eval_every=20, tensorboard_heatmaps=3)
  trainer.train_and_evaluate(config, str(workdir))
  return config, workdir


@pytest.mark.slow
def test_every_evaluation_logs_the_attention_statistics_of_every_seed(two_seed_run):
  _, workdir = two_seed_run
  records = [json.loads(line) for line in (workdir / 'metrics.jsonl').read_text().splitlines()]
  validation = [r for r in records if r['split'] == 'validation']
  assert [r['step'] for r in validation] == [20, 40]
  scalars, _ = summaries(workdir)
  for r in validation:
    for key in STATISTICS:
      assert len(r[key]) == 2 and all(math.isfinite(x) for x in r[key]), (key, r[key])
      for seed in (0, 1):  # mirrored to TensorBoard, one scalar per seed
        assert scalars[(f'validation/{key}/seed{seed}', r['step'])] == pytest.approx(r[key][seed], rel=1e-6)
    # Sources of the synthetic task have at most 16 positions.
    assert all(0.0 < h <= math.log(16) for h in r['attention_entropy'])
    assert all(1 / 16 <= m <= 1.0 for m in r['attention_max_weight'])
    assert all(c >= 0.0 for c in r['attention_coverage_deviation'])
    assert all(-1.0 <= m <= 1.0 for m in r['attention_monotonicity'])
    assert all(0.0 <= u <= 1.0 for u in r['attention_monotonicity_undefined'])
  assert validation[0]['attention_entropy'] != validation[1]['attention_entropy']  # the attention moved


@pytest.mark.slow
def test_every_evaluation_writes_a_heatmap_image_of_each_fixed_sentence(two_seed_run):
  config, workdir = two_seed_run
  prepared = data.prepare(config.data)
  split = prepared.tokenized['validation']
  kept = pipeline.length_filter(split, *data.length_limits(config.data, 'validation'))
  chosen = kept[tensorboard_heatmaps.spread_over_lengths(split.src_len[kept], 3)]
  assert len(set(split.src_len[chosen])) > 1  # spread over lengths, not three of one length
  _, images = summaries(workdir)
  want = {(f'validation/attention/sentence_{i}', step) for i in chosen for step in (20, 40)}
  assert set(images) == want  # one per sentence per evaluation, of seed 0 only
  for (tag, step), image in images.items():
    png = Image.open(io.BytesIO(image.encoded_image_string))
    assert png.format == 'PNG' and png.size == (image.width, image.height)
    assert png.width >= 400 and png.height >= 300
    grey = np.asarray(png.convert('L'), float)
    assert grey.min() < 60 and grey.max() > 250  # black text and labels on white, not a blank canvas


def test_the_runs_settings_and_final_metrics_are_a_tensorboard_hparams_session(two_seed_run):
  """The HParams dashboard's session in tensorboard/hparams: every declared setting with the value the run
  used, the final metrics as means over seeds, read back from the event file."""
  config, workdir = two_seed_run
  (path,) = glob.glob(str(workdir / 'tensorboard' / 'hparams' / 'events.out.tfevents.*'))
  plugin, scalars = {}, {}
  for event in read_events(path):
    for value in event.summary.value:
      if value.metadata.plugin_data.plugin_name == 'hparams':
        plugin[value.tag] = plugin_hparams_pb2.HParamsPluginData.FromString(value.metadata.plugin_data.content)
      elif value.WhichOneof('value') == 'simple_value':
        scalars[(value.tag, event.step)] = value.simple_value
  start = plugin['_hparams_/session_start_info'].session_start_info.hparams
  # the selection as the run trained it, every option written out
  assert start['model.score'].string_value == ModelConfig(score=config.model.score).score
  assert start['model.score'].string_value == 'additive(size=16, coverage=none)'
  assert start['train.seeds'].string_value == '0,1' and start['train.num_steps'].number_value == 40
  assert start['data.max_source_length'].number_value == config.data.max_source_length
  assert start['model.bidirectional'].bool_value == config.model.bidirectional
  declared = {f'{name}.{row.key}' for name, rows in settings.SECTIONS.items() for row in rows}
  assert set(start) == declared
  metrics = {m.name.tag for m in plugin['_hparams_/experiment'].experiment.metric_infos}
  assert metrics == {f'hparams/{k}' for k in run_results.HPARAMS_METRICS}
  summary = json.loads((workdir / 'results.json').read_text())
  assert scalars[('hparams/test_bleu', 40)] == pytest.approx(np.mean(summary['test_bleu']), rel=1e-6)
  assert scalars[('hparams/test_chrfpp', 40)] == pytest.approx(np.mean(summary['test_chrfpp']), rel=1e-6)


def test_no_heatmaps_when_switched_off_and_none_logs_its_uniform_statistics(data_dir, tmp_path):
  """train.tensorboard_heatmaps=0 writes no image; a `none` run logs the statistics of uniform weights over
  the validation sentences: the closed forms of their lengths."""
  config = _tiny(data_dir, num_steps=10, eval_every=0, tensorboard_heatmaps=0)
  config.model.score = 'none'
  trainer.train_and_evaluate(config, str(tmp_path))
  (record,) = [json.loads(x) for x in (tmp_path / 'metrics.jsonl').read_text().splitlines() if '"validation"' in x]
  _, images = summaries(tmp_path)
  assert record['step'] == 10 and not images
  shapes = []
  for batch in data.batches(data.prepare(config.data), 'validation', config.data):
    shapes += [(int(t), int(s)) for t, s in zip(batch['tgt_len'], batch['src_len']) if t > 0]
  tokens = sum(t - 1 for t, _ in shapes)
  want_entropy = sum((t - 1) * math.log(s) for t, s in shapes) / tokens
  assert record['attention_entropy'][0] == pytest.approx(want_entropy, rel=1e-5)
  assert record['attention_max_weight'][0] == pytest.approx(sum((t - 1) / s for t, s in shapes) / tokens, rel=1e-5)
  coverage = sum(s * abs(t / s - 1) for t, s in shapes) / sum(s for _, s in shapes)
  assert record['attention_coverage_deviation'][0] == pytest.approx(coverage, rel=1e-5)
  assert record['attention_monotonicity'] == [0.0] and record['attention_monotonicity_undefined'] == [1.0]
