-- Long-term memory (docs/design/memory.md, docs/adr/0006): one row per remembered event.
-- Each (app, user) gets a slot; its entries' ids lie in [slot << 32, (slot + 1) << 32), so that a
-- search reads one user's rows of the FTS5 index as one rowid range.
-- `words` and `tokens` are the entry's index terms (contextengine.memory.text), each list
-- space-separated with a leading and a trailing space, so that `instr(words, ' w ')` finds a
-- whole word and `instr(tokens, 'x')` text inside a word (the search without FTS5). The FTS5
-- index (`memory_fts`) is created at startup, when this SQLite build has FTS5.

CREATE TABLE memory_users (
    slot INTEGER PRIMARY KEY AUTOINCREMENT,
    app_name TEXT NOT NULL,
    user_id TEXT NOT NULL,
    UNIQUE (app_name, user_id)
);

CREATE TABLE memory_entries (
    id INTEGER PRIMARY KEY,
    app_name TEXT NOT NULL,
    user_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    sequence INTEGER NOT NULL,
    event_id TEXT NOT NULL,
    invocation_id TEXT NOT NULL,
    author TEXT NOT NULL,
    timestamp REAL NOT NULL,
    content BLOB NOT NULL,
    words TEXT NOT NULL,
    tokens TEXT NOT NULL,
    UNIQUE (app_name, user_id, session_id, sequence)
);

-- Flags of the memory index, for example `fts_stale` = '1' when entries were written while the
-- FTS5 index was not maintained (it is rebuilt at the next startup that uses it).
CREATE TABLE memory_meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
