"""What the engine uses from Python 3.11 that Python 3.10 lacks, the same on every supported
Python (3.10 to 3.13): the standard library's on 3.11 and later, a maintained backport on 3.10
(``async-timeout`` and ``tomli``, declared for ``python_version < '3.11'`` only).

- ``timeout(delay)``: ``asyncio.timeout``. On 3.10, ``async_timeout.timeout``, whose expiry
  raises ``asyncio.TimeoutError`` (not yet the builtin there): turned into the builtin
  ``TimeoutError`` here, so callers catch ``TimeoutError`` on every version.
- ``tomllib``: the standard library's TOML reader (``tomli`` is the same code, before 3.11).

Ruff bans ``asyncio.timeout`` and ``tomllib`` elsewhere in the server (pyproject.toml).
"""

from __future__ import annotations

import sys

if sys.version_info >= (3, 11):
    from asyncio import timeout

    import tomllib
else:  # Python 3.10
    import asyncio
    from collections.abc import AsyncIterator
    from contextlib import asynccontextmanager

    import async_timeout
    import tomli as tomllib

    @asynccontextmanager
    async def timeout(delay: float | None) -> AsyncIterator[None]:
        """``asyncio.timeout(delay)``: the block cancelled after ``delay`` seconds (None: no
        limit), raising the builtin ``TimeoutError``."""
        try:
            async with async_timeout.timeout(delay):
                yield
        except asyncio.TimeoutError as error:
            raise TimeoutError from error


__all__ = ["timeout", "tomllib"]
