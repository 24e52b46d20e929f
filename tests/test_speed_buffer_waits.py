"""benchmarks/buffer_waits.py: orderings that buffer reuse alone imposes, on a hand-worked module and
on the dumps of a real compilation."""
import jax
import jax.numpy as jnp

from benchmarks import buffer_waits as bw

# p -> a = -p -> c = a + p -> e = c + d;  p -> b = exp(p) -> d = b * b -> e.
# a and d share bytes 0..16, so d (scheduled after a and c) must wait for a and for c, which reads a,
# though d depends on neither. c and e share bytes 16..32, but e reads c: a data path, no extra wait.
_HLO = """HloModule toy, is_scheduled=true

ENTRY %main.1 (p.1: f32[4]) -> f32[4] {
  %p = f32[4]{0} parameter(0)
  %a = f32[4]{0} negate(%p)
  %b = f32[4]{0} exponential(%p)
  %c = f32[4]{0} add(%a, %p), metadata={op_name="x(y)"}
  %d = f32[4]{0} multiply(%b, %b)
  ROOT %e = f32[4]{0} add(%c, %d)
}
"""

_ASSIGNMENT = """BufferAssignment:
allocation 0: size 16, parameter 0, shape |f32[4]| at ShapeIndex {}:
 value: <0 p @0> (size=16,offset=0): f32[4]{0}
allocation 1: size 48, preallocated-temp:
 value: <1 a @0> (size=16,offset=0): f32[4]{0}
 value: <2 b @0> (size=16,offset=32): f32[4]{0}
 value: <3 c @0> (size=16,offset=16): f32[4]{0}
 value: <4 d @0> (size=16,offset=0): f32[4]{0}
 value: <5 e @0> (size=16,offset=16): f32[4]{0}
"""

_VALUES = """
Total bytes used: 96 (96B)

Used values:
<0 p @0>
 positions:
  p
 uses:
  a, operand 0
  b, operand 0
  c, operand 1
 from instruction: %p = f32[4]{0} parameter(0)
<1 a @0>
 positions:
  a
 uses:
  c, operand 0
 from instruction: %a = f32[4]{0} negate(%p)
<2 b @0>
 positions:
  b
 uses:
  d, operand 0
  d, operand 1
 from instruction: %b = f32[4]{0} exponential(%p)
<3 c @0>
 positions:
  c
 uses:
  e, operand 0
 from instruction: %c = f32[4]{0} add(%a, %p)
<4 d @0>
 positions:
  d
 uses:
  e, operand 1
 from instruction: %d = f32[4]{0} multiply(%b, %b)
<5 e @0>
 positions:
  e
 uses:
  (none)
 from instruction: %e = f32[4]{0} add(%c, %d)
"""


def test_parsers_read_the_dump_formats():
  inst = bw.parse_hlo(_HLO)
  assert inst['c'].operands == ('a', 'p') and inst['c'].computation == 'main.1'
  assert [inst[n].position for n in 'pabcde'] == list(range(6))
  assert bw.parse_assignment(_ASSIGNMENT)['<4 d @0>'] == (1, 0, 16)
  assert bw.parse_values(_VALUES)['<2 b @0>'] == ['d', 'd']
  assert bw.parse_values(_VALUES)['<5 e @0>'] == []
  assert bw.parse_values(_VALUES)['<0 p @0>'] == ['a', 'b', 'c']


def test_hand_worked_waits():
  waits = bw.find_waits(bw.parse_hlo(_HLO), bw.parse_assignment(_ASSIGNMENT), bw.parse_values(_VALUES))
  assert {(w.later, w.earlier) for w in waits} == {('d', 'a'), ('d', 'c')}
  assert all(w.overlap_bytes == 16 and w.computation == 'main.1' for w in waits)
  assert bw.find_waits(bw.parse_hlo(_HLO), bw.parse_assignment(_ASSIGNMENT), bw.parse_values(_VALUES),
                       computation_regex='^region') == []
  assert bw.find_waits(bw.parse_hlo(_HLO), bw.parse_assignment(_ASSIGNMENT), bw.parse_values(_VALUES),
                       min_bytes=17) == []


def test_reads_the_dumps_of_a_real_compilation():
  """The installed jaxlib dumps buffer assignments in the format the parsers read."""
  def f(x, w):
    def body(h, _):
      return jnp.tanh(h @ w) + jnp.sin(h), None
    return jax.lax.scan(body, x, None, length=3)[0]
  lowered = jax.jit(f).lower(jnp.ones((8, 16)), jnp.ones((16, 16)))
  hlo, assignment, values = bw.dumped_assignment(lambda options: lowered.compile(compiler_options=options))
  inst, slices, vals = bw.parse_hlo(hlo), bw.parse_assignment(assignment), bw.parse_values(values)
  assert any(i.opcode == 'while' for i in inst.values())
  assigned = [v for v in vals if v in slices]
  assert len(assigned) >= 5
  assert all(bw._definer(v) in inst for v in assigned), 'every assigned value is defined by a parsed instruction'
  for w in bw.find_waits(inst, slices, vals):
    assert inst[w.later].computation == inst[w.earlier].computation == w.computation
    assert inst[w.earlier].position < inst[w.later].position
