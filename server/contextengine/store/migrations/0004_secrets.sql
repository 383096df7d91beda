-- Secrets of this database, generated once, when the database is created or migrated, and kept
-- with its data. `page_token` keys the HMAC of page tokens (contextengine.core.page_tokens): a
-- token stays valid across restarts and in whichever process opens the file, and nobody
-- can mint one without reading the file. randomblob draws from SQLite's CSPRNG (ChaCha20,
-- seeded by the operating system).
CREATE TABLE secrets (
    name TEXT PRIMARY KEY,
    value BLOB NOT NULL
) WITHOUT ROWID;

INSERT INTO secrets (name, value) VALUES ('page_token', randomblob(32));
