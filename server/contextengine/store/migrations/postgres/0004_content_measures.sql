-- What BuildContext's token estimate costs at a cold start, kept: the token count and the
-- characters of each content a session's context has held, by the content's digest (BLAKE2b-128
-- of its deterministic serialization) and the counter that counted it ("tiktoken/cl100k_base").
-- A cache: counting again gives the same numbers, so a lost or missing row only costs a count
-- (several sidecars writing the same digest write the same numbers: ON CONFLICT DO NOTHING).
-- Written off the append path (the engine's event cache, in the background, in batches); read
-- whole for one session when a sidecar first reads that session's log. The rows go with the
-- session (ON DELETE CASCADE).
CREATE TABLE content_measures (
    session BIGINT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    counter TEXT COLLATE "C" NOT NULL,
    digest BYTEA NOT NULL,
    tokens INTEGER NOT NULL,
    chars INTEGER NOT NULL,
    PRIMARY KEY (session, counter, digest)
);
