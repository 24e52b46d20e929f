"""How the tests compile: fast to compile, slow to run, except where a test trains for long.

Most of the suite's time is XLA compiling tiny programs that then run a handful of times. `conftest.py`
therefore adds two flags to `XLA_FLAGS` for the whole run (xdist workers and every subprocess inherit them),
each unless XLA_FLAGS already names its option:
- `--xla_backend_optimization_level=0`: LLVM without optimisation, most of a compilation at the default level;
- `--xla_cpu_use_fusion_emitters=false`: XLA's older element-wise emitter for fusions, which compiles a tiny
  run in about half the time (docs/design.md, "What the tests pin").
Both change the machine code, not what it computes: floating-point results may differ in the last bits from a
default build, so tests compare runs made under the same flags, as they always did. The few tests that train
hundreds or thousands of steps in one program ask for XLA's defaults with `jax.jit(..., compiler_options=FULL)`,
where running, not compiling, is their cost (bfloat16 steps ran twice as long with the older emitter).
"""

FLAGS = {
  'xla_backend_optimization_level': '--xla_backend_optimization_level=0',
  'xla_cpu_use_fusion_emitters': '--xla_cpu_use_fusion_emitters=false',
}
FUSION_EMITTERS = {'xla_cpu_use_fusion_emitters': True}  # XLA's default emitter, at the suite's level 0
FULL = {'xla_backend_optimization_level': 3, **FUSION_EMITTERS}  # XLA's defaults


def with_fast_compilation(xla_flags: str) -> str:
  """`xla_flags` with the fast-compilation flags added, each unless it already names that option."""
  added = [flag for option, flag in FLAGS.items() if option not in xla_flags]
  return ' '.join([xla_flags, *added]).strip()
