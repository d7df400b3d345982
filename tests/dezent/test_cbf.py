"""Counting structures: counts against a plain Counter, encoding round trips and refusals."""

from __future__ import annotations

import struct
import zlib
from collections import Counter

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamanon.dezent.cbf import (
    HEADER_BYTES,
    CountingBloomFilter,
    EncodingError,
    ExactCounter,
    cbf_parameters,
    key_bytes,
    murmur3_32,
    murmur3_32_int64,
)
from streamanon.errors import ConfigError

keys = st.one_of(st.integers(-(2**63), 2**63 - 1), st.text(max_size=12))
small_keys = st.integers(0, 40)


@given(st.lists(st.integers(-(2**63), 2**63 - 1), min_size=1, max_size=50),
       st.integers(0, 2**32 - 1))
def test_vectorized_murmur_equals_reference(ks, seed):
    got = murmur3_32_int64(np.array(ks, dtype=np.int64), seed).tolist()
    assert got == [murmur3_32(key_bytes(k), seed) for k in ks]


def test_murmur_known_vectors():
    # published test vectors of MurmurHash3_x86_32
    assert murmur3_32(b"", 0) == 0
    assert murmur3_32(b"", 1) == 0x514E28B7
    assert murmur3_32(b"\x00\x00\x00\x00", 0) == 0x2362F9DE
    assert murmur3_32(b"Hello, world!", 1234) == 0xFAF6CDB3


@given(st.lists(keys, max_size=60), st.sampled_from([(50, 3), (7, 2), (400, 6)]))
def test_cbf_never_undercounts(items, mk):
    m, k = mk
    f = CountingBloomFilter(m, k, bits=16)
    truth = Counter(items)
    for x in items:
        f.add(x)
    for x, n in truth.items():
        assert f.count(x) >= n
    # removing everything returns the filter to empty
    for x, n in truth.items():
        f.remove(x, n)
    assert not f.counters.any()


@given(st.lists(small_keys, max_size=60), st.integers(0, 5))
def test_exact_counter_is_exact_and_clamps(items, s):
    e = ExactCounter(range(41), bits=12)
    truth = Counter(items)
    e.add_counts(np.array(list(truth), dtype=np.int64), list(truth.values()))
    e.subtract_clamp(s)
    for x in range(41):
        assert e.count(x) == max(0, truth[x] - s)


@given(st.lists(small_keys, max_size=40), st.lists(small_keys, max_size=40), st.integers(0, 4))
def test_cbf_merge_and_subtract_clamp(a, b, s):
    fa, fb, both = (CountingBloomFilter(64, 3, 12) for _ in range(3))
    for x in a:
        fa.add(x)
        both.add(x)
    for x in b:
        fb.add(x)
        both.add(x)
    fa.merge(fb)
    assert fa == both
    before = {x: both.count(x) for x in set(a) | set(b)}
    both.subtract_clamp(s)
    for x, c in before.items():
        assert both.count(x) == max(0, c - s)  # per counter == per key (monotone map)


def test_remove_below_zero_and_overflow_are_refused():
    f = CountingBloomFilter(32, 2, bits=3)
    with pytest.raises(ValueError, match="count is 0"):
        f.remove("absent")
    f.add("x", 7)
    with pytest.raises(OverflowError, match="3 bits"):
        f.add("x")
    with pytest.raises(ValueError, match="cannot merge"):
        f.merge(CountingBloomFilter(32, 3, bits=3))
    with pytest.raises(KeyError, match="not in the ExactCounter's domain"):
        ExactCounter([1, 2]).add(3)


def test_modular_add_wraps_only_when_asked():
    f = CountingBloomFilter(16, 1, bits=4)
    f.add_counts(np.array([5]), [15])
    with pytest.raises(OverflowError):
        f.add_counts(np.array([5]), [1])
    f.add_counts(np.array([5]), [1], modular=True)
    assert f.count(5) == 0


@pytest.mark.parametrize("keys", [10, 900, 1000, 4321])
@pytest.mark.parametrize("fp", [0.2, 0.05, 0.01, 0.001, 1e-9])
def test_sizing_follows_the_paper_formula(keys, fp):
    """m = -X ln P / (ln 2)^2 and k = (m / X) ln 2, uncapped."""
    m, k = cbf_parameters(keys, fp, max_hashes=None)
    assert m == int(np.ceil(-keys * np.log(fp) / np.log(2) ** 2))
    assert k == max(1, round(m / keys * np.log(2)))
    assert abs(k - np.log2(1 / fp)) <= 1  # k = log2(1/P) up to rounding


def test_hash_count_cap_of_six_is_the_references_choice():
    assert cbf_parameters(900, 0.05) == cbf_parameters(900, 0.05, max_hashes=None)  # k = 4
    assert cbf_parameters(10, 1e-9)[1] == 6  # the default cap (the paper's k would be 30)
    assert cbf_parameters(10, 1e-9, max_hashes=None)[1] == 30
    assert cbf_parameters(10, 1e-9, max_hashes=6)[0] == cbf_parameters(10, 1e-9,
                                                                       max_hashes=None)[0]
    with pytest.raises(ConfigError):
        cbf_parameters(10, 0.05, max_hashes=0)


structures = st.builds(
    lambda m, k, bits, seed: _filled(CountingBloomFilter(m, k, bits), seed),
    st.integers(1, 300), st.integers(1, 8), st.integers(1, 40), st.integers(0, 2**32 - 1))


def _filled(f: CountingBloomFilter, seed: int) -> CountingBloomFilter:
    rng = np.random.default_rng(seed)
    f.counters = rng.integers(0, f.modulus, f.m, dtype=np.uint64)
    return f


@given(structures)
def test_encoding_round_trips_with_exact_size(f):
    data = f.to_bytes()
    assert len(data) == f.nbytes == HEADER_BYTES + (f.m * f.bits + 7) // 8 + 4
    assert CountingBloomFilter.from_bytes(data) == f
    assert CountingBloomFilter.deserialize(f.serialize()) == f


def test_exact_counter_round_trip_needs_the_domain():
    e = ExactCounter([0, 5, 10, 20])
    e.add(10, 3)
    assert ExactCounter.from_bytes(e.to_bytes(), [0, 5, 10, 20]) == e
    with pytest.raises(EncodingError, match="do not fit"):
        ExactCounter.from_bytes(e.to_bytes(), [0, 5, 10])
    with pytest.raises(EncodingError, match="is not CountingBloomFilter"):
        CountingBloomFilter.from_bytes(e.to_bytes())


@given(structures, st.data())
def test_truncated_or_extended_bytes_are_refused(f, data):
    raw = f.to_bytes()
    cut = data.draw(st.integers(0, len(raw) - 1))
    with pytest.raises(EncodingError, match="truncated"):
        CountingBloomFilter.from_bytes(raw[:cut])
    with pytest.raises(EncodingError, match="trailing bytes"):
        CountingBloomFilter.from_bytes(raw + b"\x00")


@given(structures, st.data())
def test_corrupted_bytes_are_refused(f, data):
    raw = bytearray(f.to_bytes())
    i = data.draw(st.integers(0, len(raw) - 1))
    raw[i] ^= data.draw(st.integers(1, 255))
    with pytest.raises(EncodingError):
        CountingBloomFilter.from_bytes(bytes(raw))


def test_header_errors_name_the_problem():
    f = CountingBloomFilter(10, 2, 8)
    raw = f.to_bytes()
    with pytest.raises(EncodingError, match="magic"):
        CountingBloomFilter.from_bytes(b"XX" + raw[2:])
    with pytest.raises(EncodingError, match="version 9"):
        CountingBloomFilter.from_bytes(raw[:2] + bytes([9]) + raw[3:])
    with pytest.raises(EncodingError, match="invalid parameters"):
        CountingBloomFilter.from_bytes(struct.pack("<2sBBBBI", b"DZ", 1, 1, 0, 2, 10) + b"...")
    padded = CountingBloomFilter(3, 1, 3)  # 9 bits -> 2 bytes, 7 padding bits
    body = bytearray(padded.to_bytes()[:-4])
    body[-1] |= 0x80
    bad = bytes(body) + zlib.crc32(body).to_bytes(4, "little")
    with pytest.raises(EncodingError, match="padding"):
        CountingBloomFilter.from_bytes(bytes(bad))
    with pytest.raises(EncodingError, match="expected bytes"):
        CountingBloomFilter.from_bytes("DZ")  # type: ignore[arg-type]
