-- A session's own configuration (a serialized SessionConfig; NULL: none set). It lives on the
-- session's row, so it goes with the session.
ALTER TABLE sessions ADD COLUMN config BLOB;
