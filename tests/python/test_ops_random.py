"""rng-bit-generator against the Random123 known-answer vectors of
ThreeFry-2x32-20 and Philox-4x32-10 (as XLA feeds them: key in state word
0, counter after it), XLA's state updates and output layouts, and rng's
distributions."""

from __future__ import annotations

import numpy as np
import pytest

import pjrt_client
from hlo_harness import run


def rbg(algorithm: str, state_words: int, out: str) -> str:
    return f"""
HloModule rbg
ENTRY e {{
  s = u64[{state_words}] parameter(0)
  ROOT r = (u64[{state_words}], {out}) rng-bit-generator(s),
    algorithm={algorithm}
}}
"""


def threefry(key: int, counter: int) -> tuple[int, int]:
    """ThreeFry-2x32-20 of one 64-bit counter, in Python (a second
    implementation to check layouts against)."""
    mask = 0xFFFFFFFF
    k0, k1 = key & mask, key >> 32
    ks = [k0, k1, 0x1BD11BDA ^ k0 ^ k1]
    rot = [13, 15, 26, 6, 17, 29, 16, 24]
    x0 = ((counter & mask) + ks[0]) & mask
    x1 = ((counter >> 32) + ks[1]) & mask
    for g in range(5):
        for r in rot[(g % 2) * 4:(g % 2) * 4 + 4]:
            x0 = (x0 + x1) & mask
            x1 = ((x1 << r) | (x1 >> (32 - r))) & mask
            x1 ^= x0
        x0 = (x0 + ks[(g + 1) % 3]) & mask
        x1 = (x1 + ks[(g + 2) % 3] + g + 1) & mask
    return x0, x1


def test_threefry_known_answers(client):
    # Random123's vectors: (key words, counter words) -> output words.
    cases = [((0, 0), (0, 0), (0x6B200159, 0x99BA4EFE)),
             ((0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF),
              (0x1CB996FC, 0xBB002BE7)),
             ((0x13198A2E, 0x03707344), (0x243F6A88, 0x85A308D3),
              (0xC4923A9C, 0x483DF7A0))]
    for (k0, k1), (c0, c1), (o0, o1) in cases:
        key, counter = k0 | k1 << 32, c0 | c1 << 32
        state = np.array([key, counter], np.uint64)
        new_state, bits = run(client, rbg("rng_three_fry", 2, "u64[1]"),
                              [("u64", state)])
        assert int(bits[0]) == o0 | o1 << 32
        assert threefry(key, counter) == (o0, o1)
        np.testing.assert_array_equal(
            new_state, np.array([key, (counter + 1) % 2**64], np.uint64))


def test_threefry_32_bit_layout_and_state_update(client):
    key, counter = 0x0123456789ABCDEF, 2**64 - 3
    state = np.array([key, counter], np.uint64)
    new_state, bits = run(client, rbg("rng_three_fry", 2, "u32[3,5]"),
                          [("u64", state)])
    # Split along the largest dimension (no even one): 5 -> 3 blocks.
    want = np.zeros((3, 5), np.uint32)
    for i in range(3):
        for j in range(5):
            block = i * 3 + j // 2
            want[i, j] = threefry(key, (counter + block) % 2**64)[j % 2]
    np.testing.assert_array_equal(bits, want)
    assert int(new_state[1]) == (counter + 9) % 2**64


def test_philox_known_answers(client):
    # Random123: counter words, key words -> output words.
    cases = [((0, 0, 0, 0), (0, 0),
              (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
             ((0xFFFFFFFF,) * 4, (0xFFFFFFFF, 0xFFFFFFFF),
              (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
             ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344),
              (0xA4093822, 0x299F31D0),
              (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1))]
    for ctr, (k0, k1), out in cases:
        low = ctr[0] | ctr[1] << 32
        high = ctr[2] | ctr[3] << 32
        key = k0 | k1 << 32
        state = np.array([key, low, high], np.uint64)
        new_state, bits = run(client, rbg("rng_philox", 3, "u32[4]"),
                              [("u64", state)])
        np.testing.assert_array_equal(bits, np.array(out, np.uint32))
        carry = 1 if low == 2**64 - 1 else 0
        np.testing.assert_array_equal(
            new_state, np.array([key, (low + 1) % 2**64,
                                 (high + carry) % 2**64], np.uint64))


def test_philox_64_bit_output_and_a_two_word_state(client):
    # u64[2]: the counter is (low = word 1, high = the key).
    key, low = 0xA4093822 | 0x299F31D0 << 32, 0x243F6A88 | 0x85A308D3 << 32
    # With high == key this is not a Random123 vector; compare with the
    # three-word state holding the same counter instead.
    two = run(client, rbg("rng_philox", 2, "u64[3]"),
              [("u64", np.array([key, low], np.uint64))])
    three = run(client, rbg("rng_philox", 3, "u64[3]"),
                [("u64", np.array([key, low, key], np.uint64))])
    np.testing.assert_array_equal(two[1], three[1])
    # Three u64s take six words: two Philox blocks.
    assert int(two[0][1]) == (low + 2) % 2**64 and int(two[0][0]) == key


@pytest.mark.parametrize("ty", ["u8", "s16", "s32", "u64"])
def test_default_algorithm_is_philox_for_every_integer_type(client, ty):
    state = np.array([7, 11, 13], np.uint64)
    default = run(client, rbg("rng_default", 3, f"{ty}[2,3]"),
                  [("u64", state)])
    philox = run(client, rbg("rng_philox", 3, f"{ty}[2,3]"),
                 [("u64", state)])
    np.testing.assert_array_equal(default[1], philox[1])
    np.testing.assert_array_equal(default[0], philox[0])


def test_rng_uniform_and_normal_have_their_distributions(client):
    program = """
HloModule rng
ENTRY e {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  u = f32[100000] rng(a, b), distribution=rng_uniform
  n = f32[100000] rng(a, b), distribution=rng_normal
  ROOT t = (f32[100000], f32[100000]) tuple(u, n)
}
"""
    u, n = run(client, program, [("f32", np.float32(2)),
                                 ("f32", np.float32(5))])
    assert u.min() >= 2 and u.max() < 5 and abs(u.mean() - 3.5) < 0.05
    assert abs(n.mean() - 2) < 0.1 and abs(n.std() - 5) < 0.1


@pytest.mark.parametrize("ty, below_five", [
    ("f16", 4.99609375), ("bf16", 4.96875), ("f8e4m3fn", 4.5),
    ("f8e5m2", 4.0)])
def test_rng_uniform_never_rounds_up_to_its_upper_bound(client, ty,
                                                        below_five):
    # A value just below 5 that rounds to the element type's nearest value
    # would be 5 itself: [a, b) keeps it at the largest value below.
    program = f"""
HloModule rng_narrow
ENTRY e {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  na = {ty}[] convert(a)
  nb = {ty}[] convert(b)
  u = {ty}[100000] rng(na, nb), distribution=rng_uniform
  ROOT w = f32[100000] convert(u)
}}
"""
    u, = run(client, program, [("f32", np.float32(2)),
                               ("f32", np.float32(5))])
    assert u.min() == 2 and u.max() == below_five


def test_rng_uniform_up_to_zero_stays_below_zero(client):
    # f8e4m3fn's smallest magnitude is 2^-9: about one value in 1,000 of
    # [-1, 0) rounds to -0, which is not below 0; the largest value below
    # it is -2^-9.
    program = """
HloModule rng_to_zero
ENTRY e {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  na = f8e4m3fn[] convert(a)
  nb = f8e4m3fn[] convert(b)
  u = f8e4m3fn[100000] rng(na, nb), distribution=rng_uniform
  ROOT w = f32[100000] convert(u)
}
"""
    u, = run(client, program, [("f32", np.float32(-1)),
                               ("f32", np.float32(0))])
    assert u.min() == -1 and u.max() == -2.0 ** -9


def test_a_state_of_the_wrong_shape_is_invalid(client):
    with pytest.raises(pjrt_client.InvalidArgumentError,
                       match="rng_three_fry needs u64"):
        client.compile(rbg("rng_three_fry", 3, "u32[4]"))
