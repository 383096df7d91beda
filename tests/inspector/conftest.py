"""One real sidecar with the inspector for the whole package (a process start is most of the
suite's time): the API tests use the scripted session ``SESSION``, the browser tests their own
copy of it (``BROWSER_SESSION``), since both append to theirs."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from tests.inspector.helpers import Running, inspector_sidecar
from tests.inspector.session import BROWSER_SESSION, script


@pytest_asyncio.fixture(scope="package", loop_scope="package")
async def running(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Running]:
    async with inspector_sidecar(tmp_path_factory.mktemp("inspector")) as sidecar:
        async with sidecar.client() as client:
            await script(client, BROWSER_SESSION)
        yield sidecar
