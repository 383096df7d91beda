"""ListSessions in google-adk's order (SESSION_ORDER_LAST_UPDATE_ASC), with pages, over gRPC and in
process on memory and SQLite; and a differential check of that order (and of GetUserState)
against google-adk's own SqliteSessionService on generated sessions."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.adk.events.event import Event as AdkEvent
from google.adk.events.event_actions import EventActions
from google.adk.sessions.sqlite_session_service import SqliteSessionService
from hypothesis import HealthCheck, Phase, given, settings, strategies as st

from contextengine.client import ContextEngineClient, ContextEngineError
from contextengine.core.structs import dict_to_struct, struct_to_dict
from contextengine.engine import Engine, EngineSettings, open_engine
from contextengine.v1 import session_service_pb2 as pb
from tests.service.helpers import text_event
from tests.service.test_user_state import (
    MODES,
    Api,
    RefusedError,
    in_every_mode,
    open_api,
    refused,
)

pytestmark = pytest.mark.service

APP = "app"
BY_UPDATE = pb.SESSION_ORDER_LAST_UPDATE_ASC
Row = tuple[float, str, str]
#: more pages than any listing here has: a listing that goes on is a failure, not a hang
MAX_PAGES = 100


@pytest.fixture(params=MODES)
async def api(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Api]:
    async with AsyncExitStack() as stack:
        yield await open_api(request.param, tmp_path, stack)


async def add_session(api: Api, user_id: str, session_id: str, *timestamps: float) -> None:
    """A session whose events have these timestamps (its last update is the last one)."""
    await api(
        "create_session",
        pb.CreateSessionRequest(app_name=APP, user_id=user_id, session_id=session_id),
    )
    for i, when in enumerate(timestamps):
        await api(
            "append_event",
            pb.AppendEventRequest(
                app_name=APP,
                user_id=user_id,
                session_id=session_id,
                event=text_event(f"e{i}", event_id=f"{session_id}-{i}", timestamp=when),
            ),
        )


async def listed(
    api: Api,
    user_id: str = "",
    page_size: int = 0,
    order: pb.SessionOrder.ValueType = BY_UPDATE,
) -> list[Row]:
    """Every page of ListSessions, as (last_update_time, user_id, session_id)."""
    rows: list[Row] = []
    token = ""
    for _ in range(MAX_PAGES):
        response = await api(
            "list_sessions",
            pb.ListSessionsRequest(
                app_name=APP, user_id=user_id, page_size=page_size, page_token=token, order=order
            ),
        )
        rows.extend((s.last_update_time, s.user_id, s.id) for s in response.sessions)
        token = response.next_page_token
        if not token:
            return rows
    raise AssertionError("the listing does not end")


async def seed(api: Api) -> list[Row]:
    """Sessions with ties on the time (and on time and user); returns them in ADK's order."""
    await add_session(api, "b", "s1", 30.0)
    await add_session(api, "a", "s2", 10.0)
    await add_session(api, "a", "s1", 10.0)
    await add_session(api, "c", "s0", 50.0, 20.0)  # the last event's time, even if older
    await add_session(api, "b", "s9", 10.0)
    await add_session(api, "a", "s3", 40.0)
    return [
        (10.0, "a", "s1"),
        (10.0, "a", "s2"),
        (10.0, "b", "s9"),
        (20.0, "c", "s0"),
        (30.0, "b", "s1"),
        (40.0, "a", "s3"),
    ]


async def test_oldest_update_first_in_pages(api: Api) -> None:
    expected = await seed(api)
    for page_size in (0, 1, 2, 5, 6, 1000):
        assert await listed(api, page_size=page_size) == expected, page_size
        assert await listed(api, "a", page_size) == [r for r in expected if r[1] == "a"]
    assert await listed(api, "nobody") == []
    # The default order is still (user_id, session_id).
    assert await listed(api, order=pb.SESSION_ORDER_UNSPECIFIED) == sorted(
        expected, key=lambda r: (r[1], r[2])
    )


async def test_an_update_moves_a_session_to_the_end(api: Api) -> None:
    expected = await seed(api)
    await api(
        "append_event",
        pb.AppendEventRequest(
            app_name=APP, user_id="a", session_id="s1", event=text_event("x", timestamp=99.0)
        ),
    )
    assert await listed(api, page_size=4) == [*expected[1:], (99.0, "a", "s1")]


async def test_same_results_over_grpc_and_in_process(tmp_path: Path) -> None:
    async def scenario(api: Api) -> list[object]:
        await seed(api)
        first = await api(
            "list_sessions", pb.ListSessionsRequest(app_name=APP, page_size=4, order=BY_UPDATE)
        )
        sessions = [
            (s.id, s.user_id, s.last_update_time, s.last_sequence, struct_to_dict(s.state, "s"))
            for s in first.sessions
        ]
        return [sessions, bool(first.next_page_token), await listed(api, page_size=3)]

    result = await in_every_mode(tmp_path, scenario)
    assert isinstance(result, list)
    assert [row[0] for row in result[0]] == ["s1", "s2", "s9", "s0"]


async def test_a_token_is_bound_to_its_order_app_and_user(api: Api) -> None:
    await seed(api)
    by_update = await api(
        "list_sessions", pb.ListSessionsRequest(app_name=APP, page_size=2, order=BY_UPDATE)
    )
    by_key = await api("list_sessions", pb.ListSessionsRequest(app_name=APP, page_size=2))
    assert by_update.next_page_token
    assert by_key.next_page_token
    bad_token = RefusedError("INVALID_ARGUMENT", "INVALID_PAGE_TOKEN", "page_token")
    for request in (
        # one order's token with the other order
        pb.ListSessionsRequest(app_name=APP, page_token=by_update.next_page_token),
        pb.ListSessionsRequest(app_name=APP, page_token=by_key.next_page_token, order=BY_UPDATE),
        # with another user or app
        pb.ListSessionsRequest(
            app_name=APP, user_id="a", page_token=by_update.next_page_token, order=BY_UPDATE
        ),
        pb.ListSessionsRequest(
            app_name="other", page_token=by_update.next_page_token, order=BY_UPDATE
        ),
    ):
        assert await refused(api("list_sessions", request)) == bad_token
    # The token resumes where the page ended.
    rest = await api(
        "list_sessions",
        pb.ListSessionsRequest(app_name=APP, page_token=by_update.next_page_token, order=BY_UPDATE),
    )
    assert [s.id for s in rest.sessions] == ["s9", "s0", "s1", "s3"]


async def test_bad_input_is_invalid_argument_with_error_info(api: Api) -> None:
    assert await refused(
        api("list_sessions", pb.ListSessionsRequest(app_name=APP, order=7))  # type: ignore[arg-type]
    ) == RefusedError("INVALID_ARGUMENT", "INVALID_ARGUMENT", "order")
    assert await refused(
        api("list_sessions", pb.ListSessionsRequest(app_name=APP, order=-1))  # type: ignore[arg-type]
    ) == RefusedError("INVALID_ARGUMENT", "INVALID_ARGUMENT", "order")
    assert await refused(
        api("list_sessions", pb.ListSessionsRequest(order=BY_UPDATE))
    ) == RefusedError("INVALID_ARGUMENT", "MISSING_FIELD", "app_name")
    assert await refused(
        api("list_sessions", pb.ListSessionsRequest(app_name=APP, page_size=-1, order=BY_UPDATE))
    ) == RefusedError("INVALID_ARGUMENT", "INVALID_ARGUMENT", "page_size")
    assert await refused(
        api(
            "list_sessions",
            pb.ListSessionsRequest(app_name=APP, page_token="garbage!", order=BY_UPDATE),
        )
    ) == RefusedError("INVALID_ARGUMENT", "INVALID_PAGE_TOKEN", "page_token")


async def test_client_lists_in_either_order(client: ContextEngineClient) -> None:
    for user_id, session_id, when in (("u2", "x", 5.0), ("u1", "y", 7.0), ("u1", "z", 6.0)):
        await client.create_session(APP, user_id, session_id)
        await client.append_event(APP, user_id, session_id, text_event("hi", timestamp=when))
    by_update = [s.id async for s in client.list_sessions(APP, page_size=1, order=BY_UPDATE)]
    assert by_update == ["x", "z", "y"]
    assert [s.id async for s in client.list_sessions(APP, page_size=1)] == ["y", "z", "x"]
    page = await client.list_sessions_page(APP, "u1", page_size=1, order=BY_UPDATE)
    assert [s.id for s in page.sessions] == ["z"]
    with pytest.raises(ContextEngineError) as err:
        await client.list_sessions_page(APP, page_token=page.next_page_token)
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert err.value.reason == "INVALID_PAGE_TOKEN"


# --- differential: google-adk's SqliteSessionService ----------------------------------------------

USERS = ("u1", "u2", "u3")
_values = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.sampled_from(["v", "w"]))
_deltas = st.dictionaries(st.sampled_from(["user:a", "user:b", "k", "app:c"]), _values, max_size=3)
_sessions = st.lists(
    st.tuples(
        st.sampled_from(USERS),
        st.sampled_from(["s1", "s2", "s3", "s4"]),
        # event timestamps (at least one: a session's creation time is each service's own
        # clock), from a few values so that ties are common
        st.lists(
            st.tuples(st.sampled_from([1.0, 2.0, 2.5, 3.0, 1e9 + 0.125]), _deltas),
            min_size=1,
            max_size=3,
        ),
    ),
    max_size=8,
    unique_by=lambda session: session[:2],
)


class Sides:
    """google-adk's SqliteSessionService and our engine on memory and on SQLite, opened once
    per test; each example writes to an app of its own."""

    def __init__(self, adk: SqliteSessionService, engines: list[Engine]) -> None:
        self.adk = adk
        self.engines = engines
        self.apps = itertools.count()


@pytest.fixture
async def sides(tmp_path: Path) -> AsyncIterator[Sides]:
    adk = SqliteSessionService(":memory:")
    try:
        async with (
            await open_engine(EngineSettings(db=":memory:")) as memory,
            await open_engine(EngineSettings(db=str(tmp_path / "ce.db"))) as sqlite,
        ):
            yield Sides(adk, [memory, sqlite])
    finally:
        await adk.close()


Seen = tuple[dict[str, list[Row]], dict[str, Any]]


async def _adk_side(service: SqliteSessionService, app: str, generated: list[Any]) -> Seen:
    for user_id, session_id, events in generated:
        session = await service.create_session(app_name=app, user_id=user_id, session_id=session_id)
        for i, (when, delta) in enumerate(events):
            await service.append_event(
                session,
                AdkEvent(
                    id=f"{session_id}-{i}",
                    invocation_id="inv",
                    author="user",
                    timestamp=when,
                    actions=EventActions(state_delta=dict(delta)),
                ),
            )
    orders: dict[str, list[Row]] = {}
    states: dict[str, Any] = {}
    for user_id in ("", *USERS):
        found = await service.list_sessions(app_name=app, user_id=user_id or None)
        orders[user_id] = [(s.last_update_time, s.user_id, s.id) for s in found.sessions]
        if user_id:
            states[user_id] = await service.get_user_state(app_name=app, user_id=user_id)
    return orders, states


async def _our_side(engine: Engine, app: str, generated: list[Any]) -> Seen:
    for user_id, session_id, events in generated:
        where = {"app_name": app, "user_id": user_id, "session_id": session_id}
        await engine.create_session(pb.CreateSessionRequest(**where))
        for i, (when, delta) in enumerate(events):
            event = text_event(f"e{i}", event_id=f"{session_id}-{i}", timestamp=when)
            event.content.Clear()
            event.actions.state_delta.CopyFrom(dict_to_struct(delta))
            await engine.append_event(pb.AppendEventRequest(**where, event=event))
    orders: dict[str, list[Row]] = {}
    states: dict[str, Any] = {}
    for user_id in ("", *USERS):
        rows: list[Row] = []
        token = ""
        for _ in range(MAX_PAGES):  # pages of 2, so that most listings take several
            response = await engine.list_sessions(
                pb.ListSessionsRequest(
                    app_name=app, user_id=user_id, page_size=2, order=BY_UPDATE, page_token=token
                )
            )
            rows.extend((s.last_update_time, s.user_id, s.id) for s in response.sessions)
            token = response.next_page_token
            if not token:
                break
        else:
            raise AssertionError("the listing does not end")
        orders[user_id] = rows
        if user_id:
            got = await engine.get_user_state(pb.GetUserStateRequest(app_name=app, user_id=user_id))
            states[user_id] = struct_to_dict(got.state, "state")
    return orders, states


@settings(
    max_examples=40,
    deadline=None,
    # no "explain" phase: its tracing of the whole engine makes a failure take minutes to report
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(generated=_sessions)
async def test_order_and_user_state_match_adk_sqlite(sides: Sides, generated: list[Any]) -> None:
    app = f"app-{next(sides.apps)}"
    adk = await _adk_side(sides.adk, app, generated)
    for engine in sides.engines:
        assert await _our_side(engine, app, generated) == adk
