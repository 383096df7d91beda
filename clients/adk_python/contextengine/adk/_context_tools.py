"""The context tools as an ADK toolset: one line gives an agent the engine's context tools.

    agent = LlmAgent(..., tools=[ContextEngineContextTools(backend=sessions.backend)])

The engine declares the tools (ListContextTools) and runs every call (CallContextTool), for the
agent, branch, isolation scope and invocation of the call's ``ToolContext``; ADK's runner appends
the call and its answer as it does for any tool, and the engine records the answer's edit when
it is appended. The app's configuration must enable them (``ContextToolsConfig.enabled``).
"""

from __future__ import annotations

from typing import Any

from google.adk.agents.readonly_context import ReadonlyContext
from google.adk.tools.base_tool import BaseTool
from google.adk.tools.base_toolset import BaseToolset
from google.adk.tools.tool_context import ToolContext
from google.genai import types
from google.protobuf import struct_pb2

from contextengine.adk._backend import Backend, UsesBackend
from contextengine.client import struct_json
from contextengine.v1 import content_pb2, context_tools_service_pb2 as tpb

__all__ = ["ContextEngineContextTools"]


class _ContextTool(BaseTool):
    """One context tool: its declaration is the engine's, its run one CallContextTool."""

    def __init__(self, backend: Backend, declaration: types.FunctionDeclaration) -> None:
        super().__init__(name=declaration.name or "", description=declaration.description or "")
        self._backend = backend
        self._declaration = declaration

    def _get_declaration(self) -> types.FunctionDeclaration:
        return self._declaration

    async def run_async(self, *, args: dict[str, Any], tool_context: ToolContext) -> Any:
        call_args = struct_pb2.Struct()
        call_args.update(args)
        call = content_pb2.FunctionCall(name=self.name, args=call_args)
        if tool_context.function_call_id:
            call.id = tool_context.function_call_id
        session = tool_context.session
        request = tpb.CallContextToolRequest(
            app_name=session.app_name,
            user_id=session.user_id,
            session_id=session.id,
            agent_name=tool_context.agent_name,
            call=call,
            invocation_id=tool_context.invocation_id,
        )
        if tool_context.branch is not None:
            request.branch = tool_context.branch
        if tool_context.isolation_scope is not None:
            request.isolation_scope = tool_context.isolation_scope
        answer = await self._backend.call_context_tool(request)
        return struct_json(answer.response.response)


class ContextEngineContextTools(UsesBackend, BaseToolset):
    """The engine's context tools for an ADK agent (``tools=[...]``). Pass exactly one of
    ``target=``, ``db=`` and ``backend=`` (the session service's: ``backend=sessions.backend``);
    ``tool_filter=`` keeps only some of them (names, as ListContextTools declares them)."""

    def __init__(
        self,
        *,
        target: str | None = None,
        db: str | None = None,
        backend: Backend | None = None,
        tool_filter: list[str] | None = None,
        **client_options: Any,
    ) -> None:
        BaseToolset.__init__(self, tool_filter=tool_filter)
        self._use_backend(target=target, db=db, backend=backend, client_options=client_options)
        self._tools: list[BaseTool] | None = None

    async def get_tools(self, readonly_context: ReadonlyContext | None = None) -> list[BaseTool]:
        if self._tools is None:
            request = tpb.ListContextToolsRequest(app_name="contextengine")
            if readonly_context is not None:
                request.app_name = readonly_context.session.app_name
                request.user_id = readonly_context.session.user_id
            listed = await self._backend.list_context_tools(request)
            self._tools = [
                _ContextTool(
                    self._backend,
                    types.FunctionDeclaration.model_validate(struct_json(declaration)),
                )
                for declaration in listed.function_declarations
            ]
        return [tool for tool in self._tools if self._is_tool_selected(tool, readonly_context)]
