"""The console's output forms: colours only on a terminal without NO_COLOR, and JSON whose 64-bit
integers are numbers (which json_format reads back to the same message)."""

from __future__ import annotations

import io
import json

import pytest
from google.protobuf import json_format

from contextengine.console import render
from contextengine.console.output import Output, make_console, to_json
from contextengine.v1 import (
    content_pb2,
    event_pb2,
    memory_pb2,
    memory_service_pb2 as mpb,
    session_service_pb2 as pb,
)

pytestmark = pytest.mark.unit


class Terminal(io.StringIO):
    """A stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def _event() -> event_pb2.Event:
    return event_pb2.Event(
        id="e1",
        sequence=12,
        timestamp=1_700_000_000.25,
        author="user",
        content=content_pb2.Content(role="user", parts=[content_pb2.Part(text="hello")]),
    )


def test_a_terminal_gets_colours(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    stream = Terminal()
    make_console(stream, width=80).print(render.event_line(_event()))
    assert "\x1b[" in stream.getvalue()


def test_no_color_and_pipes_get_plain_text(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    stream = Terminal()
    make_console(stream, width=80).print(render.event_line(_event()))
    assert stream.getvalue() == "#12  user         | hello\n"
    monkeypatch.delenv("NO_COLOR")
    piped = io.StringIO()
    make_console(piped, width=80).print(render.events_table([_event()]))
    assert "\x1b[" not in piped.getvalue()
    day, header, _, row = piped.getvalue().splitlines()
    assert day.strip() == "2023-11-14"  # one day: in the title, times of day in the rows
    assert header.split()[:3] == ["seq", "time", "(UTC)"]
    assert row.split()[:3] == ["12", "22:13:20.250Z", "user"]


def test_json_has_integer_sequences_and_parses_back() -> None:
    answer = pb.ListEventsResponse(events=[_event()], last_sequence=12)
    data = to_json(answer)
    assert data["last_sequence"] == 12
    assert data["events"][0]["sequence"] == 12
    assert data["events"][0]["timestamp"] == 1_700_000_000.25
    back = json_format.ParseDict(json.loads(json.dumps(data)), pb.ListEventsResponse())
    assert back == answer
    memories = mpb.SearchMemoryResponse(memories=[memory_pb2.MemoryEntry(sequence=3, score=0.5)])
    assert to_json(memories)["memories"][0]["sequence"] == 3


def test_json_lines_are_one_object_each() -> None:
    stream = io.StringIO()
    out = Output(True, stream)
    out.json_line(_event())
    out.json_line(_event())
    lines = stream.getvalue().splitlines()
    assert [json.loads(line)["sequence"] for line in lines] == [12, 12]


def test_the_events_table_names_the_models_edits() -> None:
    event = _event()
    event.context_edits.add().hide.range.CopyFrom(event_pb2.SequenceRange(first=2, last=3))
    event.context_edits.add().pin.CopyFrom(event_pb2.SequenceRange(first=4, last=4))
    event.context_edits.add().summary_sequence = 9
    assert render.edits_note(event) == "; hides #2-#3, pins #4, wrote summary #9"
    assert render.edits_note(_event()) == ""
    stream = io.StringIO()
    console = make_console(stream, width=160)
    console.print(render.events_table([event]))
    assert "message; hides #2-#3, pins #4, wrote summary #9" in stream.getvalue()
