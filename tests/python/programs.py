"""Small HLO programs that several suites run."""

# f32[4] plus one: the cheapest real execution.
ADD_ONE = """HloModule add_one
ENTRY main {
  x = f32[4] parameter(0)
  one = f32[] constant(1)
  ones = f32[4] broadcast(one), dimensions={}
  ROOT y = f32[4] add(x, ones)
}
"""
