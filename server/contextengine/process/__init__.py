"""The sidecar as a process (what ``contextengine serve`` runs): the serve loop, with its signals
and graceful shutdown, over the transport (``contextengine.transport``)."""

from __future__ import annotations

from contextengine.process._loop import run_server, serve

__all__ = ["run_server", "serve"]
