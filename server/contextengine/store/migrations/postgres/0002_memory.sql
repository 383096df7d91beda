-- Long-term memory on PostgreSQL (contextengine.memory.pg_index; docs/design/memory.md): one row
-- per remembered event, searched with PostgreSQL's full-text search.
-- `words` and `tokens` are the entry's index terms (contextengine.memory.text), each list
-- space-separated with a leading and a trailing space (as in SQLite's memory_entries).
-- `terms` is the same, pre-tokenized, as a tsvector built by the index itself (no text search
-- parser or dictionary runs: the 'simple' equivalent, so CJK and every other script are indexed
-- exactly as SQLite's FTS5 columns are): ASCII words with weight A, the character bigrams of
-- non-ASCII words with weight B, their single non-ASCII characters with weight C.

CREATE TABLE memory_entries (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    app_name TEXT COLLATE "C" NOT NULL,
    user_id TEXT COLLATE "C" NOT NULL,
    session_id TEXT COLLATE "C" NOT NULL,
    sequence BIGINT NOT NULL,
    event_id TEXT NOT NULL,
    invocation_id TEXT NOT NULL,
    author TEXT NOT NULL,
    timestamp DOUBLE PRECISION NOT NULL,
    content BYTEA NOT NULL,
    words TEXT NOT NULL,
    tokens TEXT NOT NULL,
    terms TSVECTOR NOT NULL,
    UNIQUE (app_name, user_id, session_id, sequence)
);

CREATE INDEX memory_entries_terms ON memory_entries USING GIN (terms);

-- Flags of the memory index: `tokenizer` = the TOKENIZER_VERSION its terms were made with.
CREATE TABLE memory_meta (
    key TEXT COLLATE "C" PRIMARY KEY,
    value TEXT NOT NULL
);
