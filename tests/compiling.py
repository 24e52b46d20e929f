"""How the tests compile: XLA's LLVM back end at optimisation level 0, except where a test trains for long.

Most of the suite's time is XLA compiling tiny programs that then run a handful of times, and LLVM's
optimisation is most of a compilation. `conftest.py` therefore adds `--xla_backend_optimization_level=0`
to `XLA_FLAGS` for the whole run (xdist workers and every subprocess inherit it), unless XLA_FLAGS already
names a level. The level changes the machine code, not what it computes: floating-point results may
differ in the last bits from a default build, so tests compare runs made under the same flags, as they
always did. The few tests that train hundreds or thousands of steps in one program ask for full optimisation with
`jax.jit(..., compiler_options=FULL)`, where running, not compiling, is their cost.
"""

FLAG = '--xla_backend_optimization_level=0'
FULL = {'xla_backend_optimization_level': 3}  # XLA's default level


def with_fast_compilation(xla_flags: str) -> str:
  """`xla_flags` with the level-0 flag added, unless it already names an optimisation level."""
  if 'xla_backend_optimization_level' in xla_flags:
    return xla_flags
  return f'{xla_flags} {FLAG}'.strip()
