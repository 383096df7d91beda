"""Where the console's output goes and in which form: rich (colours) on a terminal, plain text
(no ANSI) when piped or with ``NO_COLOR``, or JSON (``--json``) for scripts.

JSON is proto3 JSON as ``json_format`` writes it, with the proto's field names
(``preserving_proto_field_name``), except that 64-bit integers (sequences, counts) are JSON
numbers rather than the strings proto3 JSON makes of them: ``json_format.Parse`` reads both, and
scripts compare ``sequence`` with numbers. Timestamps stay the proto's seconds since the epoch.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from typing import Any, TextIO

from google.protobuf import json_format
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message
from rich.console import Console, RenderableType
from rich.measure import Measurement

__all__ = ["PIPED_WIDTH", "Output", "make_console", "to_json"]

#: the width of plain output into a pipe or a file when ``COLUMNS`` is not set
PIPED_WIDTH = 200

_INT64 = frozenset(
    {
        FieldDescriptor.TYPE_INT64,
        FieldDescriptor.TYPE_UINT64,
        FieldDescriptor.TYPE_SINT64,
        FieldDescriptor.TYPE_FIXED64,
        FieldDescriptor.TYPE_SFIXED64,
    }
)
#: messages whose JSON form is not an object of their fields
_OPAQUE = frozenset(
    {
        "google.protobuf.Struct",
        "google.protobuf.Value",
        "google.protobuf.ListValue",
        "google.protobuf.Any",
    }
)


def _numbers(descriptor: Any, data: dict[str, Any]) -> dict[str, Any]:
    """``data`` (the JSON object of the message ``descriptor`` describes) with its 64-bit integers
    as numbers."""
    for field in descriptor.fields:
        if field.name not in data:
            continue
        value = data[field.name]
        if field.type in _INT64:
            if isinstance(value, list):
                data[field.name] = [int(item) for item in value]
            else:
                data[field.name] = int(value)
        elif field.type == FieldDescriptor.TYPE_MESSAGE:
            message: Any = field.message_type
            if message.full_name in _OPAQUE:
                continue
            if message.GetOptions().map_entry:
                entry = message.fields_by_name["value"]
                if entry.type == FieldDescriptor.TYPE_MESSAGE:
                    inner: Any = entry.message_type
                    if inner.full_name not in _OPAQUE:
                        for key, item in value.items():
                            value[key] = _numbers(inner, item)
                elif entry.type in _INT64:
                    for key, item in value.items():
                        value[key] = int(item)
            elif isinstance(value, list):
                data[field.name] = [_numbers(message, item) for item in value]
            else:
                data[field.name] = _numbers(message, value)
    return data


def to_json(message: Message) -> dict[str, Any]:
    """``message`` as a JSON object (see the module docstring)."""
    data = json_format.MessageToDict(message, preserving_proto_field_name=True)
    return _numbers(message.DESCRIPTOR, data)


def make_console(file: TextIO | None = None, *, width: int | None = None) -> Console:
    """A rich console on ``file`` (default stdout): colours only on a terminal without
    ``NO_COLOR``; otherwise plain text, ``COLUMNS`` wide (``PIPED_WIDTH`` without it when piped)
    unless ``width``."""
    stream = sys.stdout if file is None else file
    terminal = stream.isatty()
    plain = not terminal or bool(os.environ.get("NO_COLOR"))
    if width is None and not terminal and not os.environ.get("COLUMNS"):
        # Piped into grep, awk or a file: no terminal to fit, so ids and timestamps are not cut
        # to rich's 80 columns.
        width = PIPED_WIDTH
    return Console(
        file=stream,
        width=width,
        force_terminal=terminal and not plain,
        no_color=plain,
        color_system=None if plain else "auto",
        highlight=False,
        emoji=False,
        soft_wrap=False,
    )


class Output:
    """One command's output: rich renderables, or one JSON document (``--json``)."""

    def __init__(self, as_json: bool, file: TextIO | None = None) -> None:
        self.as_json = as_json
        self.file = sys.stdout if file is None else file
        self.console = make_console(self.file)

    def show(self, *renderables: RenderableType) -> None:
        for renderable in renderables:
            if self.console.is_terminal:
                self.console.print(renderable)
                continue
            # Plain text: as wide as the renderable needs (a table that expands to the width
            # would pad every line and draw its rules across it), trailing blanks cut.
            needed = Measurement.get(self.console, self.console.options, renderable).maximum
            with self.console.capture() as captured:
                self.console.print(renderable, width=min(needed, self.console.width))
            lines = captured.get().splitlines()
            self.file.write("".join(line.rstrip() + "\n" for line in lines))
            self.file.flush()

    def answer(self, message: Message, view: Callable[[], RenderableType]) -> None:
        """A read command's answer: ``message`` as JSON with ``--json``, else ``view()``."""
        if self.as_json:
            self.json(message)
        else:
            self.show(view())

    def line(self, renderable: RenderableType) -> None:
        """One line, never wrapped or cut (a log line: ``events tail``)."""
        self.console.print(renderable, soft_wrap=True)

    def json(self, data: Message | dict[str, Any] | list[Any]) -> None:
        """One JSON document (indented)."""
        value = to_json(data) if isinstance(data, Message) else data
        self.file.write(json.dumps(value, indent=2, ensure_ascii=False) + "\n")
        self.file.flush()

    def json_line(self, data: Message) -> None:
        """One JSON object on one line (``events tail --json``)."""
        self.file.write(json.dumps(to_json(data), ensure_ascii=False) + "\n")
        self.file.flush()
