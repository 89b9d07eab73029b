"""iosweep.columns: the array helpers the readers and the analysis share."""

import numpy as np

from iosweep.columns import distinct


def test_distinct_is_numpy_unique():
    # the sorted distinct values, as np.unique gives them: integers (negatives, repeats,
    # the extremes), bools, empty and one value, floats with NaNs (made one)
    rng = np.random.default_rng(3)
    big = np.iinfo(np.int64)
    cases = [
        rng.integers(-50, 50, 1000),
        rng.integers(big.min, big.max, 1000, dtype=np.int64),
        np.array([big.max, big.min, 0, big.max, -1], np.int64),
        rng.integers(0, 3, 100).astype(np.int8),
        rng.integers(0, 2, 50).astype(bool),
        np.array([], np.int64),
        np.array([7], np.int32),
        np.array([2.5, np.nan, 1.0, np.nan, 2.5]),
    ]
    for values in cases:
        got, want = distinct(values), np.unique(values)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    # hand-counted
    assert distinct(np.array([3, 1, 3, -2, 1])).tolist() == [-2, 1, 3]
