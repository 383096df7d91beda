"""Numbered schema migrations as shipped (``migrations/NNNN_name.sql`` for SQLite,
``migrations/postgres/NNNN_name.sql`` for PostgreSQL): what both backends' runners apply
(``sqlite._migrations``, ``postgres._migrations``).

The files stay in this package's ``migrations`` folder (package data, found with
``importlib.resources``), whichever backend's subpackage runs them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources

_FILE_NAME = re.compile(r"^(\d{4})_\w+\.sql$")


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


def shipped_migrations(*folder: str) -> list[Migration]:
    """The migrations shipped in ``contextengine/store/migrations`` (in its subfolder ``folder``,
    e.g. ``postgres``), numbered 1, 2, 3, ..."""
    path = resources.files("contextengine.store").joinpath("migrations")
    for part in folder:
        path = path.joinpath(part)
    prefix = "".join(f"{part}/" for part in folder)
    found: list[Migration] = []
    for entry in path.iterdir():
        match = _FILE_NAME.match(entry.name)
        if match:
            found.append(Migration(int(match.group(1)), entry.name, entry.read_text("utf-8")))
    found.sort(key=lambda migration: migration.version)
    for expected, migration in enumerate(found, start=1):
        if migration.version != expected:
            raise RuntimeError(
                f"migration {prefix}{migration.name} is out of order: expected {expected:04d}"
            )
    return found
