-- Initial schema: sessions, their event logs, scoped state and app configuration.
-- State columns hold JSON objects (prefixes removed: app_states.state['x'] is `app:x`).

CREATE TABLE app_states (
    app_name TEXT PRIMARY KEY,
    state TEXT NOT NULL,
    update_time REAL NOT NULL
);

CREATE TABLE user_states (
    app_name TEXT NOT NULL,
    user_id TEXT NOT NULL,
    state TEXT NOT NULL,
    update_time REAL NOT NULL,
    PRIMARY KEY (app_name, user_id)
);

-- AUTOINCREMENT: a deleted session's key is never reused, so caches keyed by it stay safe.
CREATE TABLE sessions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    app_name TEXT NOT NULL,
    user_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    state TEXT NOT NULL,
    create_time REAL NOT NULL,
    update_time REAL NOT NULL,
    last_sequence INTEGER NOT NULL DEFAULT 0,
    UNIQUE (app_name, user_id, session_id)
);

-- `position` orders all events of the file (a cross-session cursor); `sequence` orders one session.
-- `data` is the serialized Event (deterministic), including its sequence; the other columns are
-- copies of its fields for queries.
CREATE TABLE events (
    position INTEGER PRIMARY KEY AUTOINCREMENT,
    session INTEGER NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    sequence INTEGER NOT NULL,
    event_id TEXT NOT NULL,
    invocation_id TEXT NOT NULL,
    author TEXT NOT NULL,
    timestamp REAL NOT NULL,
    is_compaction INTEGER NOT NULL,
    data BLOB NOT NULL,
    UNIQUE (session, sequence),
    UNIQUE (session, event_id)
);

CREATE INDEX events_by_invocation ON events (session, invocation_id);

-- Summary events are few: a partial index finds the latest ones without scanning the log.
CREATE INDEX events_compactions ON events (session, sequence) WHERE is_compaction = 1;

CREATE TABLE app_configs (
    app_name TEXT PRIMARY KEY,
    config BLOB NOT NULL,
    update_time REAL NOT NULL
);
