-- The change feed (contextengine.store._pg_notify) reads what other sidecars committed after a
-- position: events by their primary key, and sessions created with shared state (app:/user: keys)
-- by create_position. Only those sessions take a position (0 for the others), so a partial index
-- keeps that read an index range however many sessions there are.
CREATE INDEX sessions_by_create_position ON sessions (create_position) WHERE create_position > 0;
