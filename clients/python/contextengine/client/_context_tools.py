"""The context tools of one agent in one session: the helper a model loop uses.

The engine declares and runs the tools (ContextToolsService), so this helper only carries the
session and the agent: :meth:`ContextTools.declarations` gives the tools in a provider's shape,
:meth:`ContextTools.answer` runs a google-genai ``FunctionCall`` and returns the
``FunctionResponse`` to append, :meth:`ContextTools.run` runs a call an OpenAI or Anthropic
model made (name and JSON arguments) and returns the result to send back. The call and its
answer must both be appended to the session (the call before the tool runs, as ADK's runner
does): the answer's edit is recorded when it is appended.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from google.protobuf import json_format, struct_pb2

from contextengine.client._json import json_number
from contextengine.v1 import content_pb2, context_tools_service_pb2 as tpb

if TYPE_CHECKING:
    from contextengine.client._client import ContextEngineClient

__all__ = ["CONTEXT_TOOL_NAMES", "ContextTools", "ToolFormat", "struct_json"]

#: the context tools' names (ListContextTools declares them)
CONTEXT_TOOL_NAMES = frozenset(
    {
        "context_status",
        "context_pin",
        "context_unpin",
        "context_hide",
        "context_summarize",
        "context_expand",
        "context_search",
    }
)

ToolFormat = Literal["genai", "openai_chat", "openai_responses", "anthropic"]


class ContextTools:
    """One agent's context tools in one session (``ContextEngineClient.context_tools``)."""

    def __init__(
        self,
        client: ContextEngineClient,
        app_name: str,
        user_id: str,
        session_id: str,
        *,
        agent_name: str = "",
        branch: str | None = None,
        isolation_scope: str | None = None,
    ) -> None:
        self._client = client
        self.app_name = app_name
        self.user_id = user_id
        self.session_id = session_id
        self.agent_name = agent_name
        self.branch = branch
        self.isolation_scope = isolation_scope
        self._listed: tpb.ListContextToolsResponse | None = None

    @staticmethod
    def handles(name: str) -> bool:
        """Whether ``name`` is a context tool's."""
        return name in CONTEXT_TOOL_NAMES

    async def declarations(self, format: ToolFormat = "genai") -> list[dict[str, Any]]:
        """The tools in a provider's shape: google-genai ``FunctionDeclaration`` dicts, OpenAI
        Chat or Responses tools, Anthropic tools (read once, then kept)."""
        if self._listed is None:
            self._listed = await self._client.list_context_tools(self.app_name, self.user_id)
        listed = self._listed
        if format == "genai":
            return [struct_json(d) for d in listed.function_declarations]
        texts = {
            "openai_chat": listed.openai_chat_tools,
            "openai_responses": listed.openai_responses_tools,
            "anthropic": listed.anthropic_tools,
        }[format]
        return [json.loads(text) for text in texts]

    async def call(
        self, call: content_pb2.FunctionCall, *, invocation_id: str = ""
    ) -> tpb.CallContextToolResponse:
        """The engine's whole answer: the function response, the edits it makes once
        appended, and the refusal when there is one."""
        return await self._client.call_context_tool(
            self.app_name,
            self.user_id,
            self.session_id,
            call,
            agent_name=self.agent_name,
            branch=self.branch,
            isolation_scope=self.isolation_scope,
            invocation_id=invocation_id,
        )

    async def answer(
        self, call: content_pb2.FunctionCall, *, invocation_id: str = ""
    ) -> content_pb2.FunctionResponse:
        """The ``FunctionResponse`` answering ``call`` (append it in the answer event)."""
        return (await self.call(call, invocation_id=invocation_id)).response

    async def run(
        self,
        name: str,
        arguments: Mapping[str, Any] | str,
        *,
        call_id: str = "",
        invocation_id: str = "",
    ) -> dict[str, Any]:
        """Runs a call an OpenAI or Anthropic model made (``arguments``: a dict, or the JSON
        text OpenAI sends) and returns the result to send back as the tool's output."""
        parsed: Mapping[str, Any] = (
            json.loads(arguments or "{}") if isinstance(arguments, str) else arguments
        )
        args = struct_pb2.Struct()
        args.update(dict(parsed))
        call = content_pb2.FunctionCall(name=name, args=args)
        if call_id:
            call.id = call_id
        response = await self.answer(call, invocation_id=invocation_id)
        return struct_json(response.response)


def struct_json(struct: struct_pb2.Struct) -> dict[str, Any]:
    """A protobuf ``Struct`` as JSON values, whole numbers as ``int`` (:func:`json_number`): a
    Struct holds every number as a double, and a model reads ``12`` better than ``12.0``."""
    result: dict[str, Any] = _whole(json_format.MessageToDict(struct))
    return result


def _whole(value: Any) -> Any:
    if isinstance(value, float):
        return json_number(value)
    if isinstance(value, dict):
        return {key: _whole(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_whole(item) for item in value]
    return value
