"""FTS5's BM25, computed in Python for the in-memory backend.

The same formula, constants and operation order as SQLite's ``bm25()`` (``fts5_aux.c``), so that
the in-memory and the SQLite backends rank the same entries in the same order:

    idf(t)   = ln((N - n(t) + 0.5) / (n(t) + 0.5)), at least 1e-6
    score(d) = sum over query terms t, in query order, of
               idf(t) * (f(t, d) * (k1 + 1)) / (f(t, d) + k1 * (1 - b + b * D / avgdl))

with N the number of entries in the whole index, n(t) those containing t, f(t, d) the instances
of t in d, D the tokens of d in all three index columns and avgdl their mean over the index.
``bm25()`` returns the negated score (lower is better); so does :func:`rank`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

K1 = 1.2
B = 0.75
MIN_IDF = 1e-6


def idf(rows: int, hits: int) -> float:
    value = math.log((rows - hits + 0.5) / (hits + 0.5))
    return value if value > 0.0 else MIN_IDF


def rank(
    idfs: Sequence[float], frequencies: Sequence[int], length: int, average_length: float
) -> float:
    """``bm25()`` of one entry: ``idfs`` and ``frequencies`` per query term, in query order."""
    score = 0.0
    for weight, frequency in zip(idfs, frequencies, strict=True):
        f = float(frequency)
        score += weight * (
            (f * (K1 + 1.0)) / (f + K1 * (1 - B + B * float(length) / average_length))
        )
    return -1.0 * score
