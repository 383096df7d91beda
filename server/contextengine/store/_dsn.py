"""PostgreSQL connection strings: which ``--db`` values name one, and how they appear in logs.

A DSN may carry a password (``postgresql://user:secret@host/db``): it is a secret, so every log
line and error message shows ``mask_dsn(dsn)`` (the password replaced by ``***``), never the DSN.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

#: the URL schemes that choose the PostgreSQL store (libpq's two spellings)
SCHEMES = ("postgresql", "postgres")


def is_postgres_dsn(db: str) -> bool:
    """True when ``db`` is a ``postgresql://`` or ``postgres://`` URL."""
    scheme, sep, _ = db.partition("://")
    return bool(sep) and scheme.lower() in SCHEMES


def mask_dsn(dsn: str) -> str:
    """``dsn`` with its password (in the URL's user part, or a ``password=`` query parameter)
    replaced by ``***``; the rest (user, host, port, database) stays, for diagnosis. Anything
    that is not a PostgreSQL URL (a SQLite path) is returned unchanged."""
    if not is_postgres_dsn(dsn):
        return dsn
    try:
        parts = urlsplit(dsn)
    except ValueError:
        return "postgresql://***"
    netloc = parts.netloc
    if "@" in netloc:
        user_info, _, hosts = netloc.rpartition("@")
        user, sep, _password = user_info.partition(":")
        netloc = f"{user}:***@{hosts}" if sep else f"{user}@{hosts}"
    query = (
        "&".join(
            "password=***" if item.lower().startswith("password=") else item
            for item in parts.query.split("&")
        )
        if parts.query
        else ""
    )
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
