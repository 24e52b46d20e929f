"""Variants of the bench-config training step, for the paired tools (ab_step, profile_step).

A variant is one entry of a JSON object, name -> spec; every key of the spec is optional:

    {"vw512":  {"xla": {"xla_cpu_prefer_vector_width": 512}},   # XLA compiler options
     "dot":    {"model": {"score": "dot"}},                     # ModelConfig fields replaced
     "mine":   {"patch": "my_patches:old_loss"}}                # a context manager, by import path

`patch` names a zero-argument callable (`module:attribute`) that returns a context manager; it is
entered while the variant's step is traced and compiled, and left afterwards, so it can swap in the
code being compared (for example with `unittest.mock.patch.object`) without touching the others.
The tools always add `base` (the step as it is) and `base_again` (the same step compiled a second
time): the control, whose difference from `base` is what noise alone gives.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import json
from typing import Any, Callable

from absl import flags

from attnmt.errors import ConfigError

from attnmt.model.config import ModelConfig
from benchmarks import cases

CONTROLS = ('base', 'base_again')
_KEYS = ('xla', 'model', 'patch')
EXAMPLE = '\'{"vw512": {"xla": {"xla_cpu_prefer_vector_width": 512}}}\''

# The one --variants flag of the tools (absl refuses a flag defined twice; tests import both tools).
FLAG = flags.DEFINE_string(
  'variants',
  '',
  'JSON: name -> {"xla": {...}, "model": {...}, "patch": "module:attr"} '
  '(tools/variants.py); base and base_again, the control, are always added',
)


def define_size_flags() -> None:
  """--model, --rows and --width, defined by the command that runs (ab_step, profile_step): tests import these
  tools beside benchmarks.bench, whose --model and --width are other flags."""
  flags.DEFINE_enum('model', 'bench', ['bench', 'main'], "'main': experiments/configs/main_ablation.py's model")
  flags.DEFINE_integer('rows', 0, "the batch's rows (0: the model's own)", lower_bound=0)
  flags.DEFINE_integer('width', 0, "the batch's source and target width (0: the model's own)", lower_bound=0)


def model_and_sizes() -> tuple[ModelConfig, cases.Sizes]:
  """The model and batch that define_size_flags' flags name: the bench config's or the main job's, at --rows x
  --width."""
  f = flags.FLAGS
  cfg, sizes = (cases.BENCH_MODEL, cases.Sizes()) if f.model == 'bench' else cases.config_model('main_ablation')
  return cfg, dataclasses.replace(
    sizes, batch=f.rows or sizes.batch, src_len=f.width or sizes.src_len, tgt_len=f.width or sizes.tgt_len
  )


@dataclasses.dataclass(frozen=True)
class Variant:
  xla: dict = dataclasses.field(default_factory=dict)  # compiler_options of `.compile()`
  model: dict = dataclasses.field(default_factory=dict)  # ModelConfig fields that differ from the base
  patch: str | None = None  # 'module:attribute' -> a context manager factory


def parse(text: str) -> dict[str, Variant]:
  """The variants of a JSON string ('' for none); a ValueError says what is wrong and shows the form."""
  if not text.strip():
    return {}
  try:
    raw = json.loads(text)
  except json.JSONDecodeError as e:
    raise ValueError(f'not valid JSON ({e}); pass e.g. {EXAMPLE}') from None
  if not isinstance(raw, dict):
    raise ValueError(f'expected an object of name -> spec, got {type(raw).__name__}; pass e.g. {EXAMPLE}')
  out = {}
  for name, spec in raw.items():
    if name in CONTROLS:
      raise ValueError(f'{name!r} is the control every run includes; give the variant another name')
    if not isinstance(spec, dict):
      raise ValueError(f'variant {name!r}: expected an object with keys {list(_KEYS)}, got {spec!r}')
    unknown = sorted(set(spec) - set(_KEYS))
    if unknown:
      raise ValueError(f'variant {name!r}: unknown key(s) {unknown}; valid keys: {list(_KEYS)}')
    for key in ('xla', 'model'):
      if not isinstance(spec.get(key, {}), dict):
        raise ValueError(f'variant {name!r}: {key!r} must be an object, got {spec[key]!r}')
    patch = spec.get('patch')
    if patch is not None:
      resolve(patch)
    out[name] = Variant(xla=spec.get('xla', {}), model=spec.get('model', {}), patch=patch)
  return out


def resolve(path: str) -> Callable[[], Any]:
  """The callable named by 'module:attribute' (the module importable from the working directory)."""
  module_name, sep, attribute = str(path).partition(':')
  if not sep or not module_name or not attribute:
    raise ValueError(f'patch {path!r}: expected "module:attribute", e.g. "my_patches:old_loss"')
  try:
    module = importlib.import_module(module_name)
  except ImportError as e:
    raise ValueError(f'patch {path!r}: cannot import {module_name!r} ({e})') from None
  factory = getattr(module, attribute, None)
  if not callable(factory):
    raise ValueError(f'patch {path!r}: {module_name} has no callable {attribute!r}')
  return factory


def with_controls(variants: dict[str, Variant]) -> dict[str, Variant]:
  """`base` and `base_again` (both the step as it is), then the given variants."""
  return {name: Variant() for name in CONTROLS} | variants


def model_of(variant: Variant, cfg: ModelConfig) -> ModelConfig:
  """`cfg` with the variant's fields replaced, validated."""
  if not variant.model:
    return cfg
  try:
    return ModelConfig.from_dict({**dataclasses.asdict(cfg), **variant.model})
  except (ConfigError, TypeError) as e:
    raise ValueError(f'model {variant.model}: {e}') from None


def compile_step(variant: Variant, cfg: ModelConfig = cases.BENCH_MODEL, sizes: cases.Sizes = cases.Sizes()):
  """The variant's training step (`cases.train_program`), compiled: (compiled, state, batch)."""
  with contextlib.ExitStack() as stack:
    if variant.patch:
      stack.enter_context(resolve(variant.patch)())
    jitted, state, batch = cases.train_program(model_of(variant, cfg), sizes)
    compiled = jitted.lower(state, batch).compile(compiler_options=variant.xla or None)
  return compiled, state, batch
