"""Capacity search (metrics.capacity): doubling + bisection over a monotone toy latency."""
import pytest

from ahasd_sim.metrics.capacity import largest_int, largest_real


@pytest.mark.parametrize("boundary", [1, 2, 3, 37, 64, 65, 1000, 4095])
def test_largest_int_returns_the_exact_boundary(boundary):
    """Toy latency 10 ms x load meets an SLO of 10 x boundary ms exactly up to ``boundary``:
    the search must return it, with the first failing load boundary + 1 among its probes."""
    lat = lambda n: 10.0 * n
    c = largest_int(lambda n: lat(n) <= 10.0 * boundary, lo=1, cap=4096)
    assert c.value == boundary and c.failed_at == boundary + 1 and not c.at_cap
    # doubling then bisection: O(log) probes, never a probe above 2 x the boundary
    assert len(c.probes) <= 2 * 13 + 1
    assert max(x for x, _ in c.probes) <= 2 * boundary


def test_largest_int_edges():
    c = largest_int(lambda n: True, lo=1, cap=100)
    assert c.value == 100 and c.at_cap and c.probes[-1] == (100, True)
    c = largest_int(lambda n: False, lo=1, cap=100)
    assert c.value is None and c.failed_at == 1 and c.probes == [(1, False)]
    c = largest_int(lambda n: n <= 40, lo=1, cap=100, rel_tol=0.25)   # stops within 25% of 40
    assert c.value <= 40 < c.failed_at <= c.value * 1.25 + 1


def test_largest_real_brackets_the_boundary():
    """Toy: the rate r meets when 1 / (mu - r) <= 0.1 s with mu = 50/s (M/M/1 sojourn), i.e.
    r <= 40/s: the search returns a rate within 1% below 40 and a failing rate above it."""
    meets = lambda r: r < 50 and 1.0 / (50.0 - r) <= 0.1
    c = largest_real(meets, lo=0.5, cap=1000.0, rel_tol=0.01)
    assert c.value <= 40.0 < c.failed_at <= c.value * 1.01
    with pytest.raises(ValueError):
        largest_real(meets, lo=0.0, cap=1.0)
