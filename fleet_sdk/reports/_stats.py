"""The statistics of a report: pass@k by the unbiased estimator, and the Wilson score interval.

pass@k is the chance that at least one of ``k`` samples drawn without replacement from ``n``
graded samples, ``c`` of them correct, passes: ``1 - C(n-c, k) / C(n, k)``. It is computed as a
product so large ``n`` never builds huge binomials. The Wilson interval bounds a pass rate
``c / n`` at a confidence level; unlike the normal approximation it stays inside ``[0, 1]`` and
is sensible for ``c = 0`` or ``c = n`` (see ``tests/test_report_statistics.py``).
"""

from __future__ import annotations

import math
from statistics import NormalDist

__all__ = ["CONFIDENCE", "pass_at_k", "pass_at_k_curve", "wilson_interval"]

CONFIDENCE = 0.95
"""The confidence level of every interval in a report."""


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased pass@k estimate from ``n`` graded samples of which ``c`` passed.

    Args:
        n: Graded samples (errored ones are left out before this).
        c: Passed samples, ``0 <= c <= n``.
        k: Samples a user would draw, ``1 <= k <= n``.

    Raises:
        ValueError: A count out of range (naming it).
    """
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    if not 0 <= c <= n:
        raise ValueError(f"c must be between 0 and n={n}, got {c}")
    if not 1 <= k <= n:
        raise ValueError(f"k must be between 1 and n={n}, got {k}")
    if n - c < k:
        return 1.0
    # C(n-c, k) / C(n, k) = prod_{i=n-c+1}^{n} (1 - k/i)
    miss = 1.0
    for i in range(n - c + 1, n + 1):
        miss *= 1.0 - k / i
    return 1.0 - miss


def pass_at_k_curve(n: int, c: int, k: int) -> list[float]:
    """pass@1, pass@2 ... pass@k from ``n`` graded samples of which ``c`` passed, in ``O(k)``.

    The chance that ``j`` draws all fail, ``C(n-c, j) / C(n, j)``, is the one of ``j - 1`` draws
    times ``(n-c-j+1) / (n-j+1)``, so the whole curve costs what one point of it does.

    Args:
        n: Graded samples.
        c: Passed samples, ``0 <= c <= n``.
        k: The last point, ``0 <= k <= n`` (0: an empty curve).

    Raises:
        ValueError: A count out of range (naming it).
    """
    if not 0 <= c <= n:
        raise ValueError(f"c must be between 0 and n={n}, got {c}")
    if not 0 <= k <= n:
        raise ValueError(f"k must be between 0 and n={n}, got {k}")
    curve: list[float] = []
    miss = 1.0
    for j in range(1, k + 1):
        miss *= (n - c - j + 1) / (n - j + 1)
        curve.append(1.0 - miss)
    return curve


def wilson_interval(successes: int, n: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The Wilson score interval of the proportion ``successes / n``.

    Args:
        successes: Passed samples.
        n: Graded samples; 0 gives the uninformative ``(0.0, 1.0)``.
        confidence: Two-sided confidence level, e.g. 0.95.

    Raises:
        ValueError: A count or confidence out of range.
    """
    if n < 0 or not 0 <= successes <= max(n, 0):
        raise ValueError(f"successes must be between 0 and n={n}, got {successes}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence}")
    if n == 0:
        return (0.0, 1.0)
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return (max(0.0, centre - half), min(1.0, centre + half))
