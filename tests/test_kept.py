"""KeptArrays: computed once per key within the byte budget, read-only, the budget read at each store."""

import numpy as np
import pytest

from fedgen_debug.kept import KeptArrays


def test_values_are_computed_once_within_the_budget_and_read_only():
    budget = {"bytes": 3 * 8 * 4 + 2}
    kept = KeptArrays(lambda: budget["bytes"])
    calls = []

    def compute(n):
        return lambda: calls.append(n) or (np.full(8, n, np.float32), np.zeros(8, np.float32))

    first = kept.get("a", compute(1))
    assert kept.get("a", compute(9)) is first and calls == [1]
    with pytest.raises(ValueError, match="read-only"):
        first[0][0] = 5.0
    with pytest.raises(ValueError, match="read-only"):
        first[1][0] = 5.0
    outputs = kept.get("c", lambda: {"correct": np.zeros(2, bool)})  # a dict of arrays, 2 bytes
    with pytest.raises(ValueError, match="read-only"):
        outputs["correct"][0] = True
    # 64 bytes kept; another 64 would exceed 96: returned (read-only) but computed again next time.
    kept.get("b", compute(2)), kept.get("b", compute(2))
    assert calls == [1, 2, 2]
    budget["bytes"] = 1 << 20   # read at each store
    kept.get("b", compute(2)), kept.get("b", compute(2))
    assert calls == [1, 2, 2, 2]
    np.testing.assert_array_equal(kept.get("b", compute(3))[0], np.full(8, 2, np.float32))
