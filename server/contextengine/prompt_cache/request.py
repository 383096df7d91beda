"""What a BuildContext request says about the model request's fixed parts.

The system instruction, tools and tool config are validated as google-genai ``Content``,
``Tool`` and ``ToolConfig`` (strictly: unknown fields and unknown enum values are errors) and
turned into the :class:`~contextengine.core.prompt_cache.PromptPrefix` the fingerprint covers, plus the
character count ADK's cache-size estimate gives them. :class:`PromptCacheInputs` is what the
prompt cache reads of a BuildContext request: who asks, for which model, with which fixed parts.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from google.protobuf import struct_pb2

from contextengine.core.errors import ContextEngineError, invalid
from contextengine.core.prompt_cache import PromptPrefix, content_json, text_chars
from contextengine.core.structs import struct_to_dict
from contextengine.store import SessionKey
from contextengine.v1 import content_pb2, context_service_pb2

if TYPE_CHECKING:
    import pydantic
    from google.genai import types

__all__ = ["ModelRequestParts", "PromptCacheInputs", "read_model_request_parts"]

REASON = "INVALID_MODEL_INPUT"


@dataclass(frozen=True)
class ModelRequestParts:
    """The request's fixed parts, in the forms the cache code needs."""

    prefix: PromptPrefix
    #: characters ADK's estimate counts for them: the system instruction's text + the JSON of
    #: every tool's ``model_dump()``
    fixed_chars: int
    system_instruction: types.Content | None
    tools: tuple[types.Tool, ...]
    tool_config: types.ToolConfig | None


@dataclass(frozen=True)
class PromptCacheInputs:
    """The parts of a BuildContext request the prompt cache reads (the messages are the
    request's own, not copies: read them, never change them)."""

    key: SessionKey
    agent_name: str
    invocation_id: str
    #: the model's name, as ``ModelIdentity.model``
    model: str
    provider: context_service_pb2.ModelProvider.ValueType
    use_interactions_api: bool
    system_instruction: content_pb2.Content | None
    tools: Sequence[struct_pb2.Struct]
    tool_config: struct_pb2.Struct | None

    @classmethod
    def of(cls, request: context_service_pb2.BuildContextRequest) -> PromptCacheInputs:
        """The inputs of ``request``."""
        model = request.model
        return cls(
            key=SessionKey(request.app_name, request.user_id, request.session_id),
            agent_name=request.agent_name,
            invocation_id=request.invocation_id,
            model=model.model,
            provider=model.provider,
            use_interactions_api=model.use_interactions_api,
            system_instruction=(
                request.system_instruction if request.HasField("system_instruction") else None
            ),
            tools=request.tools,
            tool_config=request.tool_config if request.HasField("tool_config") else None,
        )


def _first_error(error: pydantic.ValidationError) -> str:
    details = error.errors()
    if not details:
        return str(error)
    first = details[0]
    location = ".".join(str(part) for part in first.get("loc", ()))
    return f"{location}: {first.get('msg', 'invalid')}" if location else first.get("msg", "")


_M = TypeVar("_M", bound="pydantic.BaseModel")


def _validate(model: type[_M], data: Any, field: str, kind: str) -> _M:
    """``model.model_validate(data)``, every problem (including google-genai's warnings about
    unknown enum values) an INVALID_MODEL_INPUT error about ``field``."""
    import pydantic  # loaded by then, with google-genai (see read_model_request_parts)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            value = model.model_validate(data)
        except pydantic.ValidationError as error:
            raise invalid(
                REASON, field, f"{field} is not a valid google-genai {kind}: {_first_error(error)}"
            ) from None
    if caught:
        raise invalid(
            REASON, field, f"{field} is not a valid google-genai {kind}: {caught[0].message}"
        )
    return value


def _json_object(struct: struct_pb2.Struct, field: str) -> dict[str, Any]:
    try:
        return struct_to_dict(struct, field)
    except ContextEngineError as error:
        raise invalid(REASON, field, error.message) from None


def _tool_chars(tool: types.Tool, data: dict[str, Any]) -> int:
    try:
        return len(json.dumps(tool.model_dump()))
    except (TypeError, ValueError):  # a value json cannot encode; ADK would fail here
        return len(json.dumps(data))


def read_model_request_parts(
    model: str,
    system_instruction: content_pb2.Content | None,
    tools: Sequence[struct_pb2.Struct],
    tool_config: struct_pb2.Struct | None,
) -> ModelRequestParts:
    """Validates and converts; raises INVALID_MODEL_INPUT naming the offending field."""
    instruction_json: dict[str, Any] | None = None
    instruction: types.Content | None = None
    instruction_chars = 0
    if system_instruction is not None:
        instruction_json = content_json(system_instruction) or None
        if instruction_json is not None:
            # google-genai is imported here, on first use, not with this module (it takes a
            # second or more): the first request with a system instruction, tools or a tool
            # config pays the import once; requests without them never do.
            from google.genai import types

            instruction = _validate(
                types.Content, instruction_json, "system_instruction", "Content"
            )
            instruction_chars = text_chars(system_instruction)
    tool_jsons: list[dict[str, Any]] = []
    genai_tools: list[types.Tool] = []
    tool_chars = 0
    for index, struct in enumerate(tools):
        field = f"tools[{index}]"
        data = _json_object(struct, field)
        from google.genai import types  # deferred, see the system instruction above

        tool = _validate(types.Tool, data, field, "Tool")
        tool_jsons.append(data)
        genai_tools.append(tool)
        tool_chars += _tool_chars(tool, data)
    config_json: dict[str, Any] | None = None
    config: types.ToolConfig | None = None
    if tool_config is not None:
        config_json = _json_object(tool_config, "tool_config") or None
        if config_json is not None:
            from google.genai import types  # deferred, see the system instruction above

            config = _validate(types.ToolConfig, config_json, "tool_config", "ToolConfig")
    prefix = PromptPrefix(
        model=model,
        system_instruction=instruction_json,
        tools=tuple(tool_jsons),
        tool_config=config_json,
    )
    return ModelRequestParts(
        prefix, instruction_chars + tool_chars, instruction, tuple(genai_tools), config
    )
