"""The sidecar's process: ``contextengine serve`` runs :func:`run_server`, which tunes the
process (malloc, the garbage collector), starts the transport
(:class:`~contextengine.transport.ContextEngineServer`) and serves until SIGTERM or SIGINT.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
from pathlib import Path

from contextengine.observability import use_log_format
from contextengine.process.gc_policy import GcPolicy
from contextengine.process.malloc_policy import tune_malloc
from contextengine.settings import ServerSettings
from contextengine.transport import ContextEngineServer

_LOG = logging.getLogger("contextengine.server")

__all__ = ["run_server", "serve"]


def run_server(settings: ServerSettings, port_file: Path | None = None) -> None:
    """Runs ``serve`` on the event loop ``settings.event_loop`` names, until SIGTERM or SIGINT
    (what ``contextengine serve`` does)."""
    if settings.event_loop == "uvloop":
        import uvloop  # the `uvloop` extra; ServerSettings checked that it is installed

        uvloop.run(serve(settings, port_file=port_file))
    else:
        asyncio.run(serve(settings, port_file=port_file))


async def serve(settings: ServerSettings, port_file: Path | None = None) -> None:
    """Runs until SIGTERM or SIGINT, then shuts down gracefully."""
    use_log_format(settings.log_format)
    if settings.malloc_tuning and not tune_malloc():
        _LOG.info("malloc_tuning: not applied (the C library is not glibc, or refused the values)")
    server = ContextEngineServer(settings)
    await server.start()
    # What starting made (modules, the tokenizer's vocabulary, the engine) lives as long as the
    # process: moved out of the collector's sight, so that its full collections do not scan it
    # again and again (one came during the first BuildContext of a long session after a
    # restart: some 50 ms of a 10k-event cold start).
    gc.collect()
    gc.freeze()
    collector = GcPolicy(freeze=settings.gc_freeze, thaw_seconds=settings.gc_thaw_seconds)
    collector.install()
    server.observe_gc(collector)
    if port_file is not None:
        tmp = port_file.with_suffix(port_file.suffix + ".tmp")
        tmp.write_text(f"{server.port}\n")
        tmp.replace(port_file)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
        _LOG.info("shutting down")
    finally:
        try:
            await server.stop()
        finally:
            collector.uninstall()
