-- PostgreSQL schema of the event store (contextengine.store.postgres): sessions, their event
-- logs, scoped state, app and session configuration, secrets. Applied once per database by
-- contextengine.store._pg_migrations under pg_advisory_lock (several sidecars may start together).
--
-- Ids are COLLATE "C" (byte order of UTF-8 = code point order), the order of the SQLite store,
-- of Python and of page tokens, whatever the database's default collation is.
--
-- State columns hold JSON text (prefixes removed: app_states.state['x'] is `app:x`), written and
-- read like the SQLite store's (store._sqlite_rows): text, not jsonb, because jsonb refuses
-- "\u0000" in strings, which event state may hold, and nothing queries inside a state.
--
-- POSITIONS (the global cursor of subscriptions). `positions` is one row holding the last position
-- taken. A write transaction that takes positions (an append, a session created with app:/user:
-- state) updates that row as its LAST step before COMMIT (after the session row lock, the state
-- rows and the duplicate checks), inserts its events with the positions it got, and commits. The
-- row lock is held until the commit is visible (PostgreSQL releases locks after the commit is
-- visible to new snapshots), so the next transaction takes higher positions only after this one is
-- visible: positions are in commit order, and a reader that sees position p sees every position
-- below p that will ever exist. Readers therefore never skip an event by advancing a cursor past a
-- gap that a slower transaction fills later (the problem of a plain sequence/bigserial, whose
-- values are taken in start order, not commit order). Gaps of deleted sessions, of sessions
-- created with shared state and of rolled-back transactions (the row's update is rolled back too,
-- so none) are never refilled. The cost: transactions that take positions commit one at a time
-- per database (measured in docs/adr/0011-postgresql-store.md).
--
-- NOTIFY (for other sidecars on the same database; contextengine.store._pg_notify reads them).
-- Every write transaction that changes something another sidecar caches calls
--     pg_notify('contextengine', payload)
-- inside the transaction (so a rolled-back one notifies nothing, and notifications arrive in
-- commit order). payload is a JSON object (compact, UTF-8) with these keys:
--     "o": the writing store's origin id (a random hex string per open PostgresStore; a sidecar
--          skips its own notifications: its commit listeners were told in process)
--     "k": the kind:
--          "events"          events appended to session (a, u, s): positions "p".."q" (one
--                            transaction's events, consecutive)
--          "created"         session (a, u, s) created; "p" = "q" = its position when it took one
--                            (initial app:/user: state), else 0; the shared state is on its row
--                            (sessions.created_shared, sessions.create_position)
--          "deleted"         session (a, u, s) and its events deleted (no position)
--          "app_config"      the app configuration of "a" was replaced
--          "session_config"  the configuration of session (a, u, s) was replaced
--     "a", "u", "s": app name, user id, session id ("u" and "s" absent for app_config)
--     "p", "q": first and last position (only for "events" and "created")
-- Ids are at most 256 characters each, so a payload stays far below NOTIFY's 8000 bytes.

CREATE TABLE positions (
    only_row BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (only_row),
    last_position BIGINT NOT NULL
);

INSERT INTO positions (only_row, last_position) VALUES (TRUE, 0);

CREATE TABLE app_states (
    app_name TEXT COLLATE "C" PRIMARY KEY,
    state TEXT NOT NULL,
    update_time DOUBLE PRECISION NOT NULL
);

CREATE TABLE user_states (
    app_name TEXT COLLATE "C" NOT NULL,
    user_id TEXT COLLATE "C" NOT NULL,
    state TEXT NOT NULL,
    update_time DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (app_name, user_id)
);

-- id: an identity never reused, so caches keyed by it stay safe after a delete and re-create.
-- last_sequence is the session's counter: appends lock this row (SELECT ... FOR UPDATE), which
-- keeps sequences contiguous under concurrent writers on any number of sidecars.
-- config: a serialized SessionConfig (NULL: none set). created_shared / create_position: the
-- app:/user: keys of the initial state (JSON text, prefixed; NULL when none) and the position
-- the creation took (0 when none), for other sidecars' SessionCreated.
CREATE TABLE sessions (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    app_name TEXT COLLATE "C" NOT NULL,
    user_id TEXT COLLATE "C" NOT NULL,
    session_id TEXT COLLATE "C" NOT NULL,
    state TEXT NOT NULL,
    create_time DOUBLE PRECISION NOT NULL,
    update_time DOUBLE PRECISION NOT NULL,
    last_sequence BIGINT NOT NULL DEFAULT 0,
    config BYTEA,
    created_shared TEXT,
    create_position BIGINT NOT NULL DEFAULT 0,
    UNIQUE (app_name, user_id, session_id)
);

-- ListSessions in google-adk's order (last update, user, session) as index ranges.
CREATE INDEX sessions_by_user_update ON sessions (app_name, user_id, update_time, session_id);
CREATE INDEX sessions_by_update ON sessions (app_name, update_time, user_id, session_id);

-- `data` is the serialized Event (deterministic), including its sequence; the other columns are
-- copies of its fields for queries. app_name / user_id are copies of the session's, so that a
-- subscription's read by position (one app, or one user of it) is one index range.
CREATE TABLE events (
    position BIGINT PRIMARY KEY,
    session BIGINT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    app_name TEXT COLLATE "C" NOT NULL,
    user_id TEXT COLLATE "C" NOT NULL,
    sequence BIGINT NOT NULL,
    event_id TEXT COLLATE "C" NOT NULL,
    timestamp DOUBLE PRECISION NOT NULL,
    is_compaction BOOLEAN NOT NULL,
    data BYTEA NOT NULL,
    UNIQUE (session, sequence),
    UNIQUE (session, event_id)
);

CREATE INDEX events_by_app ON events (app_name, position);
CREATE INDEX events_by_user ON events (app_name, user_id, position);
CREATE INDEX events_compactions ON events (session, sequence) WHERE is_compaction;

CREATE TABLE app_configs (
    app_name TEXT COLLATE "C" PRIMARY KEY,
    config BYTEA NOT NULL,
    update_time DOUBLE PRECISION NOT NULL
);

-- Secrets of this database, generated once, when it is created: `page_token` keys the HMAC of
-- page tokens (contextengine.core.page_tokens), so a token is valid on every sidecar of the
-- database and after restarts. 32 bytes from two gen_random_uuid() (PostgreSQL's
-- pg_strong_random: 244 random bits), no extension needed.
CREATE TABLE secrets (
    name TEXT COLLATE "C" PRIMARY KEY,
    value BYTEA NOT NULL
);

INSERT INTO secrets (name, value)
VALUES ('page_token', uuid_send(gen_random_uuid()) || uuid_send(gen_random_uuid()));
