"""The client tests' server: one in process (``start_local_server``), reached by a client that
does not retry, so a test sees every failure."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from contextengine.client import ContextEngineClient
from contextengine.testing import start_local_server


@pytest.fixture
async def client() -> AsyncIterator[ContextEngineClient]:
    async with (
        start_local_server() as server,
        ContextEngineClient(server.target, attempts=1) as opened,
    ):
        yield opened
