"""The sidecar dies in the middle of an invocation (killed while the model is answering).

The runner's loop fails with a clear error from the drop-ins (``ContextEngineError`` UNAVAILABLE
naming the address, not a hang), and a sidecar started again on the same file holds exactly the
events it acknowledged: the earlier invocation whole, the interrupted invocation's user message, and
no half-written model turn. The session object's next append after a new read goes on normally.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from pathlib import Path

import grpc
import pytest
from google.adk.agents.llm_agent import LlmAgent
from google.adk.apps.app import App
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.genai import types
from pydantic import PrivateAttr

from contextengine.adk import ContextEnginePlugin, ContextEngineSessionService, sidecar_backend
from contextengine.client import ContextEngineError
from tests.support.sidecar import Sidecar, running_sidecar

pytestmark = pytest.mark.process

APP, USER = "dies", "u1"


class KillsOnSecondCall(BaseLlm):
    """Answers every call with a text; during its second call it kills the sidecar first."""

    model: str = "scripted-model"
    _calls: int = PrivateAttr(default=0)
    _sidecar: Sidecar | None = PrivateAttr(default=None)

    def aim(self, sidecar: Sidecar) -> KillsOnSecondCall:
        self._sidecar = sidecar
        return self

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        self._calls += 1
        if self._calls == 2 and self._sidecar is not None:
            await self._sidecar.kill()
        yield LlmResponse(
            content=types.Content(role="model", parts=[types.Part(text=f"answer {self._calls}")])
        )


def _message(text: str) -> types.Content:
    return types.Content(role="user", parts=[types.Part(text=text)])


@pytest.mark.timeout(90)
async def test_a_sidecar_killed_mid_invocation_fails_clearly_and_loses_nothing(
    tmp_path: Path,
) -> None:
    db = tmp_path / "ce.db"
    async with running_sidecar(tmp_path, db, "dies") as server:
        backend = sidecar_backend(server.target, attempts=2, timeout=5.0)
        sessions = ContextEngineSessionService(backend=backend)
        model = KillsOnSecondCall().aim(server)
        app = App(
            name=APP,
            root_agent=LlmAgent(name="root", model=model, instruction="Answer."),
            plugins=[ContextEnginePlugin(backend=backend)],
        )
        runner = Runner(app=app, session_service=sessions)
        session = await sessions.create_session(app_name=APP, user_id=USER)
        answers = [
            event.content.parts[0].text
            async for event in runner.run_async(
                user_id=USER, session_id=session.id, new_message=_message("first")
            )
            if event.content and event.content.parts
        ]
        assert answers == ["answer 1"]

        with pytest.raises(ContextEngineError) as caught:
            async for _ in runner.run_async(
                user_id=USER, session_id=session.id, new_message=_message("second")
            ):
                pass
        assert caught.value.code == grpc.StatusCode.UNAVAILABLE
        await backend.aclose()

        await server.start()  # again, on the same file
        backend = sidecar_backend(server.target, attempts=2, timeout=5.0)
        sessions = ContextEngineSessionService(backend=backend)
        stored = await sessions.get_session(app_name=APP, user_id=USER, session_id=session.id)
        assert stored is not None
        texts = [
            (event.author, event.content.parts[0].text)
            for event in stored.events
            if event.content and event.content.parts
        ]
        assert texts == [("user", "first"), ("root", "answer 1"), ("user", "second")]
        assert all(not event.partial for event in stored.events)
        await backend.aclose()
