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


def test_clopper_pearson_bounds_have_their_closed_form_at_zero():
    # no event in n: the one-sided bound solves (1 − p)^n = 1 − level, the two-sided one at
    # (1 − level)/2; the calibrations' and the adaptive sweep's bounds are this one function
    from isolab.metrics import clopper_pearson_upper

    n = 200
    assert clopper_pearson_upper(0, n) == pytest.approx(1 - 0.05 ** (1 / n))
    assert clopper_pearson_upper(0, n, two_sided=True) == pytest.approx(1 - 0.025 ** (1 / n))
    assert clopper_pearson_upper(2, n) < clopper_pearson_upper(2, n, two_sided=True) < 0.04
    assert clopper_pearson_upper(n, n) == 1.0
    with pytest.raises(ValueError, match="k = 3, n = 2"):
        clopper_pearson_upper(3, 2)
