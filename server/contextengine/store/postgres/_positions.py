"""Global positions on PostgreSQL: the writing transaction's id, then the change's place in it.

``position = xid * 2**20 + n``, where ``xid`` is the 64-bit id of the transaction that recorded
the change (``pg_current_xact_id()``, an ``xid8``: it never wraps around) and ``n`` its place
among that transaction's changes (0, 1, ...). So a transaction's positions are consecutive,
nobody else's lie between them, and sorting by position sorts by transaction id, then by place:
the order (transaction id, then sequence number) that the PostgreSQL event stores cited in
docs/design/concurrent-commits.md read in, packed into the one ``BIGINT`` every cursor already
is. Nothing is locked to take one: concurrent transactions commit at once, in any order. (Two
transactions that change one session, or one user's or app's state, take their ids in the order
they change it: ``_write_locks``.)

Transactions commit in another order than their ids, so a reader must not pass a position whose
transaction may still commit. ``BOUND`` is the first position a reader may not pass yet: the
oldest transaction still in flight, ``pg_snapshot_xmin(pg_current_snapshot())``, times ``2**20``.
Every transaction with a smaller id has ended, so every position below the bound is final (it is
in the table, read in the same statement's snapshot, or it never will be: rolled back), and every
change committed later takes a position at or above it. Readers take rows below the bound, in
position order, and hold their cursor there.

Limits: 2**20 (1,048,576) changes per transaction, and transaction ids below 2**43 (8.8 * 10**12:
about 28 years at 10,000 write transactions a second; the multiplication fails loudly with
"bigint out of range" beyond). Positions recorded before migration 0005 came from a counter and
are all below the first position of the migration's own transaction (the migration checks it),
so they stay in front, and cursors handed out before still mean the same place.
"""

from __future__ import annotations

__all__ = ["BASE", "BOUND", "MAX_PER_TRANSACTION", "transaction_of"]

#: positions one transaction can take (``n`` is below it)
MAX_PER_TRANSACTION = 1 << 20

#: SQL: the current transaction's first position (assigns its transaction id if it has none)
BASE = f"(pg_current_xact_id()::text::bigint * {MAX_PER_TRANSACTION})"

#: SQL: the first position a reader may not pass yet (everything below it is final), in the
#: statement's own snapshot
BOUND = f"(pg_snapshot_xmin(pg_current_snapshot())::text::bigint * {MAX_PER_TRANSACTION})"


def transaction_of(position: int) -> int:
    """The id of the transaction that took ``position`` (positions of migration 0005 on)."""
    return position // MAX_PER_TRANSACTION
