"""The pure core: semantics over events, with no I/O, asyncio or gRPC."""

from __future__ import annotations
