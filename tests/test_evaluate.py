import itertools

import numpy as np
import pytest

from isolab.metrics import best_at_k, metrics_from_counts, worst_at_k


def _enumerate(n: int, c: int, k: int) -> tuple[float, float]:
    """Exact best@k / worst@k by listing every k-subset of n samples with c correct."""
    samples = [1] * c + [0] * (n - c)
    subsets = list(itertools.combinations(samples, k))
    return (
        np.mean([any(s) for s in subsets]),
        np.mean([all(s) for s in subsets]),
    )


@pytest.mark.parametrize("n", [4, 8])
def test_estimators_match_enumeration(n):
    for c in range(n + 1):
        for k in range(1, n + 1):
            best, worst = _enumerate(n, c, k)
            assert best_at_k(n, c, k) == pytest.approx(best, abs=1e-12)
            assert worst_at_k(n, c, k) == pytest.approx(worst, abs=1e-12)


def test_vectorised_over_arrays():
    c = np.array([0, 1, 5, 8])
    np.testing.assert_allclose(best_at_k(8, c, 4), [_enumerate(8, x, 4)[0] for x in c])
    np.testing.assert_allclose(worst_at_k(8, c, 4), [_enumerate(8, x, 4)[1] for x in c])


def test_metrics_names_and_ordering():
    m = metrics_from_counts([0, 2, 8, 5], n_samples=8, ks=(1, 4))
    # avg@k is the mean accuracy whatever k: logged once, under the largest k; best@1 and
    # worst@1 equal it and are not logged beside it
    assert set(m) == {"eval/avg@4", "eval/best@4", "eval/worst@4"}
    assert m["eval/avg@4"] == pytest.approx(15 / 32)
    assert m["eval/worst@4"] <= m["eval/avg@4"] <= m["eval/best@4"]
    one = metrics_from_counts([0, 2, 8, 5], n_samples=8, ks=(1,))
    assert one == pytest.approx({n: 15 / 32 for n in ("eval/avg@1", "eval/best@1", "eval/worst@1")})


def test_k_above_samples_is_an_error():
    with pytest.raises(ValueError, match="k ≤ n"):
        best_at_k(2, 1, 4)
