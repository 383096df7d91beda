"""One awaitable under a time limit, on every Python the client supports (3.10 and later).

``asyncio.timeout`` exists from Python 3.11; on 3.10 the same is ``asyncio.wait_for``, whose
``asyncio.TimeoutError`` is not yet the builtin ``TimeoutError``. ``within`` raises the builtin
one on both, so callers catch ``TimeoutError`` as they would with ``asyncio.timeout``.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


async def within(awaitable: Awaitable[T], seconds: float | None) -> T:
    """``await awaitable``, cancelled and raising ``TimeoutError`` after ``seconds`` (None: no
    limit)."""
    if sys.version_info >= (3, 11):
        async with asyncio.timeout(seconds):
            return await awaitable
    else:
        try:
            return await asyncio.wait_for(awaitable, seconds)
        except asyncio.TimeoutError:
            raise TimeoutError from None
