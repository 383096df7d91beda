"""The inspector's JSON API and server-sent events against the real sidecar process
(``contextengine serve --inspector`` with tokens), and its settings."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest

from contextengine.settings import ServerSettings
from contextengine.transport import ContextEngineServer
from contextengine.v1 import config_pb2, event_pb2
from tests.inspector.helpers import (
    ADMIN,
    BOB_ONLY,
    OTHER_APP,
    READER,
    Running,
    bearer,
    get,
    read_frames,
)
from tests.inspector.session import (
    APP,
    BROWSER_SESSION,
    SESSION,
    T0,
    USER,
    call,
    message,
    response,
    script,
)
from tests.observability.helpers import scrape, value

pytestmark = [pytest.mark.process, pytest.mark.asyncio(loop_scope="package")]

SESSION_PATH = f"api/apps/{APP}/users/{USER}/sessions/{SESSION}"


def _error(response: httpx.Response, status: int, reason: str | None = None) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    error: dict[str, Any] = response.json()["error"]
    assert error["status"] == status
    if reason is not None:
        assert error["reason"] == reason, error
    assert error["message"]
    return error


async def test_the_page_is_served_with_its_security_headers(running: Running) -> None:
    for path, kind in [
        ("", "text/html"),
        ("inspector.js", "text/javascript"),
        ("inspector.css", "text/css"),
    ]:
        response = await get(running, path, token=None)  # static files hold no data
        assert response.status_code == 200, path
        assert response.headers["content-type"].startswith(kind)
        assert "default-src 'self'" in response.headers["content-security-policy"]
        assert response.headers["x-content-type-options"] == "nosniff"
    page = (await get(running, "", token=None)).text
    assert '<script src="inspector.js"' in page
    assert "http" not in page.replace("http-equiv", "")  # nothing from elsewhere
    moved = await running.http.get(running.base.rstrip("/"))
    assert moved.status_code == 308
    assert moved.headers["location"] == "/inspector/"
    assert (await get(running, "nothing.html")).status_code == 404


async def test_every_api_request_needs_a_token(running: Running) -> None:
    missing = await get(running, "api/apps", token=None)
    _error(missing, 401, "UNAUTHENTICATED")
    assert missing.headers["www-authenticate"].startswith("Bearer")
    _error(await get(running, "api/apps", token="nobody-issued-this"), 401, "TOKEN_INVALID")
    _error(await get(running, SESSION_PATH, token=None), 401, "UNAUTHENTICATED")
    _error(await get(running, f"{SESSION_PATH}/events", token=None), 401)
    # a caller without a token learns nothing about routes either
    _error(await get(running, "api/no/such/route", token=None), 401)


async def test_grants_decide_what_is_listed_and_shown(running: Running) -> None:
    assert (await get(running, "api/apps", READER)).json()["apps"] == [APP]
    assert (await get(running, "api/apps", OTHER_APP)).json()["apps"] == []
    assert (await get(running, f"api/apps/{APP}/users", READER)).json()["users"] == [USER]
    # a grant limited to bob sees the app, not alice
    assert (await get(running, f"api/apps/{APP}/users", BOB_ONLY)).json()["users"] == []
    denied = await get(running, SESSION_PATH, BOB_ONLY)
    assert "user 'alice'" in _error(denied, 403, "PERMISSION_DENIED")["message"]
    _error(await get(running, f"api/apps/{APP}/users", OTHER_APP), 403, "PERMISSION_DENIED")
    for view in ("", "/context", "/tokens", "/events"):
        _error(await get(running, SESSION_PATH + view, OTHER_APP), 403, "PERMISSION_DENIED")
    sessions = (await get(running, f"api/apps/{APP}/users/{USER}/sessions", READER)).json()
    assert [s["id"] for s in sessions["sessions"]] == [SESSION, BROWSER_SESSION]
    assert sessions["sessions"][0]["last_sequence"] == 16


async def test_the_session_view_annotates_the_log(running: Running) -> None:
    response = await get(running, SESSION_PATH, READER)
    assert response.status_code == 200, response.text
    view = response.json()
    events = {event["sequence"]: event for event in view["events"]}
    assert view["events_total"] == 16
    assert view["agents"] == ["planner", "researcher"]
    assert view["state"]["destination"] == "Lisbon"  # the rewind undid "Porto"
    kinds = [events[n]["kind"] for n in (1, 3, 4, 10, 13)]
    assert kinds == ["message", "function_call", "function_response", "summary", "rewind"]
    assert events[1]["pinned"]
    assert events[1]["covered_by"] is None
    assert [n for n, e in events.items() if e["covered_by"] == 10] == list(range(2, 10))
    assert events[10]["summary"]["covers"] == list(range(2, 10))
    assert events[10]["summary"]["surviving"]
    assert [n for n, e in events.items() if e["rewound"]] == [11, 12]
    assert events[5]["state_delta"] == {"destination": "Lisbon", "flight": "TP541"}
    assert events[3]["parts"][0]["name"] == "search_flights"
    assert events[3]["raw"]["content"]["parts"][0]["functionCall"]["name"] == "search_flights"
    assert all(e["tokens"] > 0 for n, e in events.items() if n != 13)


async def test_the_session_view_shows_the_models_edits(running: Running) -> None:
    """An app with the context tools: the answer event lists the edits it records, and the
    events they hide or pin say by which event."""
    app, session = "research", "edits"
    async with running.client() as client:
        await client.update_app_config(
            config_pb2.AppConfig(
                app_name=app,
                context_tools=config_pb2.ContextToolsConfig(enabled=True, max_hidden_fraction=1),
            )
        )
        await client.create_session(app, USER, session)
        rows = {"rows": ["a long line of a tool result nobody needs later"] * 60}
        for event in (
            message("user", "i1", "Look it up.", 1),
            call("researcher", "i1", "lookup", {"q": "tides"}, 2),
            response("researcher", "i1", "lookup", rows, 3),
            message("researcher", "i1", "Found it: code 7Q.", 4),
            message("user", "i2", "Tidy up.", 5),
        ):
            await client.append_event(app, USER, session, event)
        tools = client.context_tools(app, USER, session, agent_name="researcher")
        for number, (name, args) in enumerate(
            [("context_pin", {"first": 4}), ("context_hide", {"first": 2, "last": 3})]
        ):
            call_event = call("researcher", "i2", name, args, 6 + 2 * number)
            call_event.content.parts[0].function_call.id = f"edit-{number}"
            await client.append_event(app, USER, session, call_event)
            answer = await tools.answer(
                call_event.content.parts[0].function_call, invocation_id="i2"
            )
            answer_event = event_pb2.Event(
                author="researcher", invocation_id="i2", timestamp=T0 + 7 + 2 * number
            )
            answer_event.content.role = "user"
            answer_event.content.parts.add().function_response.CopyFrom(answer)
            await client.append_event(app, USER, session, answer_event)
    view = (await get(running, f"api/apps/{app}/users/{USER}/sessions/{session}")).json()
    events = {event["sequence"]: event for event in view["events"]}
    assert events[7]["context_edits"] == [{"kind": "pin", "first": 4, "last": 4}]
    assert events[6]["parts"][0]["args"] == '{"first": 4}'  # whole numbers stay whole
    assert events[9]["context_edits"] == [
        {"kind": "hide", "first": 2, "last": 3, "stub": events[9]["context_edits"][0]["stub"]}
    ]
    assert events[9]["context_edits"][0]["stub"].startswith("They held results of lookup")
    assert [n for n, e in events.items() if e["hidden_by"] == 9] == [2, 3]
    assert [n for n, e in events.items() if e["pinned_by"] == 7] == [4]
    assert events[1]["hidden_by"] is None
    assert events[1]["context_edits"] == []


async def test_the_context_is_the_agents_and_matches_build_context(running: Running) -> None:
    planner = (await get(running, f"{SESSION_PATH}/context?agent=planner", READER)).json()
    researcher = (await get(running, f"{SESSION_PATH}/context?agent=researcher", READER)).json()
    texts = [c["parts"][0].get("text", "") for c in planner["contents"]]
    assert texts[0].startswith("Plan a 3-day trip")  # the pinned goal, not summarised
    assert planner["contents"][1]["summary_of"] == 10
    assert not any("Porto" in text for text in texts)  # rewound
    assert planner["contents"] != researcher["contents"]  # another agent's view
    # the planner's last turn is quoted to the researcher as user content: the trailing user
    # run is not part of the researcher's cacheable prefix (ADK's rule, no cache configured)
    assert planner["cacheable_contents_count"] == len(planner["contents"])
    assert researcher["contents"][-1]["role"] == "user"
    assert researcher["cacheable_contents_count"] < len(researcher["contents"])
    assert researcher["cacheable_rule"] == "ADK rule"
    async with running.client(READER) as client:
        built = await client.build_context(APP, USER, SESSION, agent_name="planner")
    assert planner["token_estimate"] == built.token_estimate.tokens
    assert planner["last_sequence"] == built.last_sequence == 16
    assert len(planner["contents"]) == len(built.contents)


async def test_the_token_plot_ends_at_the_context_size(running: Running) -> None:
    context = (await get(running, f"{SESSION_PATH}/context?agent=planner", READER)).json()
    plot = (await get(running, f"{SESSION_PATH}/tokens?agent=planner", READER)).json()
    points = plot["points"]
    assert plot["compactions"] == [10]
    assert plot["rewinds"] == [13]
    assert [p["sequence"] for p in points] == sorted(p["sequence"] for p in points)
    assert points[-1]["sequence"] == 16
    assert points[-1]["tokens"] == context["token_estimate"]
    by_sequence = {p["sequence"]: p["tokens"] for p in points}
    assert by_sequence[10] < by_sequence[9]  # the summary shrank the context
    few = (await get(running, f"{SESSION_PATH}/tokens?agent=planner&points=3", READER)).json()
    assert len(few["points"]) <= 3
    assert few["points"][-1]["sequence"] == 16


@pytest.mark.parametrize(
    ("path", "status", "reason"),
    [
        (f"api/apps/{APP}/users/{USER}/sessions/nope", 404, "SESSION_NOT_FOUND"),
        (f"api/apps/{APP}/users/{USER}/sessions/nope/context", 404, "SESSION_NOT_FOUND"),
        (f"api/apps/{APP}/users/{USER}/sessions/nope/tokens", 404, "SESSION_NOT_FOUND"),
        (f"api/apps/{APP}/users/{USER}/sessions/nope/events", 404, "SESSION_NOT_FOUND"),
        (f"{SESSION_PATH}/context?agent=not%20a%20name", 400, "INVALID_ID"),
        (f"{SESSION_PATH}/context?provider=acme", 400, "INVALID_ARGUMENT"),
        (f"{SESSION_PATH}/context?branch=..", 400, None),
        (f"{SESSION_PATH}/tokens?points=1", 400, "INVALID_ARGUMENT"),
        (f"{SESSION_PATH}/tokens?points=many", 400, "INVALID_ARGUMENT"),
        (f"{SESSION_PATH}/events?after=-1", 400, "INVALID_ARGUMENT"),
        (f"{SESSION_PATH}/events?after=1000", 400, None),
        ("api/apps?limit=0", 400, "INVALID_ARGUMENT"),
        (f"api/apps/{APP}/users/{USER}/sessions?page_token=garbage", 400, "INVALID_PAGE_TOKEN"),
        (f"api/apps/{APP}/users/%20spaced%20/sessions", 400, None),
        (f"{SESSION_PATH}/elsewhere", 404, None),
        ("api/apps/x/y", 404, None),
    ],
)
async def test_bad_requests_are_4xx_json(
    running: Running, path: str, status: int, reason: str | None
) -> None:
    _error(await get(running, path), status, reason)


async def test_nothing_is_written_through_the_inspector(running: Running) -> None:
    for method in ("POST", "PUT", "DELETE", "PATCH"):
        response = await running.http.request(
            method, running.base + SESSION_PATH, headers=bearer(ADMIN)
        )
        _error(response, 405)
        assert "GET" in response.headers["allow"]
    head = await running.http.head(running.base + f"{SESSION_PATH}/events", headers=bearer(ADMIN))
    assert (head.status_code, head.headers["allow"]) == (405, "GET")
    page = await running.http.head(running.base)
    assert page.status_code == 200
    assert page.content == b""


async def test_server_sent_events_deliver_an_appended_event(running: Running) -> None:
    frames: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
    async with running.http.stream(
        "GET", running.base + f"{SESSION_PATH}/events?after=15", headers=bearer(READER)
    ) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        reading = asyncio.create_task(read_frames(response, frames))
        try:
            assert await asyncio.wait_for(frames.get(), 5) == (
                "appended",
                {"sequence": 16, "author": "planner", "kind": "message", "id": AnyId()},
            )
            name, _ = await asyncio.wait_for(frames.get(), 5)
            assert name == "caught_up"
            async with running.client(ADMIN) as client:
                await client.append_event(APP, USER, SESSION, message("user", "inv-9", "Hi", 30))
            name, data = await asyncio.wait_for(frames.get(), 5)
            assert (name, data["sequence"], data["author"]) == ("appended", 17, "user")
        finally:
            reading.cancel()
    view = (await get(running, SESSION_PATH, READER)).json()
    assert view["last_sequence"] == 17


async def _subscribers(running: Running) -> float:
    """The sidecar's open subscriptions (``/metrics`` on the same port, read by
    prometheus_client's parser)."""
    samples = await scrape(running.ops_port)
    return value(samples, "contextengine_subscribers")


async def test_a_client_going_away_ends_its_subscription(running: Running) -> None:
    assert await _subscribers(running) == 0
    last = (await get(running, SESSION_PATH, READER)).json()["last_sequence"]
    async with running.http.stream(
        "GET", running.base + f"{SESSION_PATH}/events?after={last}", headers=bearer(READER)
    ) as response:
        assert response.status_code == 200
        frames: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        reading = asyncio.create_task(read_frames(response, frames))
        try:
            name, _ = await asyncio.wait_for(frames.get(), 5)
            assert name == "caught_up"
            assert await _subscribers(running) == 1
        finally:
            reading.cancel()
    # the connection is closed: the server notices at once, not at the next heartbeat (15 s)
    for _ in range(100):
        if await _subscribers(running) == 0:
            break
        await asyncio.sleep(0.05)
    assert await _subscribers(running) == 0


class AnyId(str):
    """Equal to any non-empty string (an event id the server made)."""

    def __new__(cls) -> AnyId:
        return super().__new__(cls, "<any id>")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, str) and bool(other)

    def __hash__(self) -> int:
        return 0


async def test_the_inspector_is_open_without_tokens(tmp_path: Path) -> None:
    server = ContextEngineServer(
        ServerSettings(
            db=str(tmp_path / "open.db"),
            listen="127.0.0.1:0",
            ops_listen="127.0.0.1:0",
            inspector=True,
        )
    )
    await server.start()
    try:
        from contextengine.client import ContextEngineClient

        async with ContextEngineClient(server.target, attempts=1) as client:
            await script(client, "open-one")
            await client.create_session(APP, USER, "open-two")
            await client.create_session(APP, "zoe", "z1")
            await client.create_session("another-app", "u", "s")
        async with httpx.AsyncClient() as http:
            base = f"http://127.0.0.1:{server.ops_port}/inspector/api/"
            apps = await http.get(base + "apps")
            session = await http.get(base + f"apps/{APP}/users/{USER}/sessions/open-one")
            metrics = await http.get(f"http://127.0.0.1:{server.ops_port}/metrics")
            # paging: apps and users by name, sessions by ListSessions' page token
            first_app = (await http.get(base + "apps?limit=1")).json()
            next_app = await http.get(base + f"apps?limit=1&after={first_app['next_after']}")
            users = (await http.get(base + f"apps/{APP}/users?limit=1")).json()
            sessions = (await http.get(base + f"apps/{APP}/users/{USER}/sessions?limit=1")).json()
            rest = await http.get(
                base + f"apps/{APP}/users/{USER}/sessions",
                params={"page_token": sessions["next_page_token"]},
            )
        assert apps.json()["apps"] == ["another-app", APP]
        assert session.json()["events_total"] == 16
        assert metrics.status_code == 200  # the operations endpoints are unchanged
        assert first_app == {"apps": ["another-app"], "next_after": "another-app"}
        assert next_app.json()["apps"] == [APP]
        assert users == {"users": [USER], "next_after": USER}
        assert [s["id"] for s in sessions["sessions"]] == ["open-one"]
        assert [s["id"] for s in rest.json()["sessions"]] == ["open-two"]
    finally:
        await server.stop(grace=0.5)


async def test_the_inspector_is_off_by_default(tmp_path: Path) -> None:
    server = ContextEngineServer(
        ServerSettings(db=":memory:", listen="127.0.0.1:0", ops_listen="127.0.0.1:0")
    )
    await server.start()
    try:
        async with httpx.AsyncClient() as http:
            response = await http.get(f"http://127.0.0.1:{server.ops_port}/inspector/")
        assert response.status_code == 404
    finally:
        await server.stop(grace=0.5)


async def test_the_inspector_needs_the_operations_port() -> None:
    with pytest.raises(ValueError, match="inspector needs ops_listen"):
        ServerSettings(inspector=True)
    with pytest.raises(ValueError, match="non-loopback ops_listen"):
        ServerSettings(inspector=True, ops_listen="0.0.0.0:50152")
    ServerSettings(inspector=True, ops_listen="0.0.0.0:50152", auth_token="a-long-token-1234")
    ServerSettings(inspector=True, ops_listen="127.0.0.1:0")
