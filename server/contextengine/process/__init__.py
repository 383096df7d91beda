"""The sidecar as a process (what ``contextengine serve`` runs): the serve loop, with its signals
and graceful shutdown, over the transport (``contextengine.transport``), and the process-wide
tuning it applies: the garbage collector's policy (:mod:`.gc_policy`) and glibc's malloc
thresholds (:mod:`.malloc_policy`)."""

from __future__ import annotations

from contextengine.process._loop import run_server, serve

__all__ = ["run_server", "serve"]
