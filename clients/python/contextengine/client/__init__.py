"""The async Python client of the contextengine sidecar (the ``contextengine-client``
distribution, clients/python).

    async with ContextEngineClient("127.0.0.1:50151") as ce:
        session = await ce.create_session("my-app", "user-1")

It depends on grpcio, protobuf and the generated ``contextengine.v1`` stubs only, never on a
server module, and runs on Python 3.10 and later.
"""

from __future__ import annotations

from contextengine.client._client import ContextEngineClient, context_request
from contextengine.client._context_tools import CONTEXT_TOOL_NAMES, ContextTools, struct_json
from contextengine.client._context_view import ContextView, ContextViews
from contextengine.client._errors import ContextEngineError
from contextengine.client._json import json_number
from contextengine.client._rendered import request_part
from contextengine.client._rendered_view import RenderedView

__all__ = [
    "CONTEXT_TOOL_NAMES",
    "ContextEngineClient",
    "ContextEngineError",
    "ContextTools",
    "ContextView",
    "ContextViews",
    "RenderedView",
    "context_request",
    "json_number",
    "request_part",
    "struct_json",
]
