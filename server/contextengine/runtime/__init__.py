"""The engine's shared in-process state: the session event cache, the app and session
configuration caches. No gRPC; the engine and the components under it use it."""

from __future__ import annotations
