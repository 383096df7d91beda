-- Positions from transaction ids: write transactions commit concurrently (issue #32;
-- docs/design/concurrent-commits.md, docs/adr/0012-concurrent-commits-on-postgresql.md).
--
-- POSITIONS from here on (contextengine.store._pg_positions): a change's position is
--     pg_current_xact_id() * 2^20 + n
-- (the writing transaction's 64-bit id, then the change's place in it), so nothing is locked to
-- take one. Readers only read positions below
--     pg_snapshot_xmin(pg_current_snapshot()) * 2^20
-- (every transaction with a smaller id has ended: those positions are final), in position order.
-- A write transaction takes advisory locks on what it changes (its session; the user's and the
-- app's shared state when it writes user: / app: keys; contextengine.store._pg_write_locks)
-- before it writes anything, so its transaction id is assigned after they are held: two
-- transactions that change one thing take positions in the order they changed it.
--
-- last_position: the last position that changed the row (0 before this migration). A read of
-- merged state (get_state) is taken at a bound above each of its rows' last_position, so that the
-- state it returns holds exactly the changes below the bound.
ALTER TABLE sessions ADD COLUMN last_position BIGINT NOT NULL DEFAULT 0;
ALTER TABLE user_states ADD COLUMN last_position BIGINT NOT NULL DEFAULT 0;
ALTER TABLE app_states ADD COLUMN last_position BIGINT NOT NULL DEFAULT 0;

-- The one-row counter of migration 0001 is no longer taken. Every position it gave is below the
-- first position of this migration's transaction (checked here), so the positions recorded
-- before stay first in the order, and cursors handed out before mean the same place.
DO $$
BEGIN
    IF (SELECT last_position FROM positions) >= pg_current_xact_id()::text::bigint * 1048576 THEN
        RAISE EXCEPTION 'contextengine migration 0005: the position counter is above the first '
            'transaction position; cannot move to positions from transaction ids';
    END IF;
END
$$;

-- A sidecar of an earlier version still running on this database would take positions from the
-- counter, in an order readers no longer follow: its writes fail instead, naming the cause.
CREATE FUNCTION contextengine_positions_retired() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'this contextengine database is at schema version 5 or later (positions '
        'from transaction ids): this sidecar is older than the database; upgrade it'
        USING ERRCODE = 'feature_not_supported';
END
$$;

CREATE TRIGGER positions_retired BEFORE UPDATE ON positions
    FOR EACH ROW EXECUTE FUNCTION contextengine_positions_retired();

-- NOTIFY from here on: write transactions of events and session creations no longer call
-- pg_notify (a NOTIFY makes every committing transaction of the cluster that notifies wait for
-- one lock, held through the commit's flush: one commit at a time again). After their commit, a
-- sidecar sends {"o": origin, "k": "wake"} on 'contextengine' in a transaction of its own
-- (synchronous_commit off), at most one at a time: "read the table again". Deletions and
-- configuration changes still notify inside their transaction, as in 0001 ("deleted",
-- "app_config", "session_config"); "events" and "created" are no longer sent.
