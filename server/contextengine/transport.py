"""The gRPC transport: :class:`ContextEngineServer` builds, starts and stops one sidecar (the
engine behind the servicers, health, reflection, TLS and tokens, graceful shutdown).

Its settings are :class:`~contextengine.settings.ServerSettings`; the process around it (signals,
the garbage collector, malloc, the event loop) is ``contextengine.process``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection
from opentelemetry.trace import TracerProvider

from contextengine.auth import Edge, apply_socket_permissions, build_edge, socket_umask
from contextengine.compaction.compactor import Compactor, SummarizerFactory
from contextengine.core.errors import ContextEngineError
from contextengine.engine import Engine, open_engine
from contextengine.inspector import PREFIX as INSPECTOR_PREFIX, Inspector
from contextengine.memory.service import MemoryService
from contextengine.observability import GcSource, Observability
from contextengine.prompt_cache.service import PromptCache
from contextengine.runtime.session_configs import SessionConfigs
from contextengine.service import generic_handler
from contextengine.service.compaction_service import CompactionServicer
from contextengine.service.context_service import ContextServicer
from contextengine.service.context_tools_service import ContextToolsServicer
from contextengine.service.memory_service import MemoryServicer
from contextengine.service.session_service import SessionServicer
from contextengine.service.subscription_service import SubscriptionServicer
from contextengine.settings import ServerSettings
from contextengine.store import EventStore, mask_dsn
from contextengine.subscriptions.broadcaster import Broadcaster
from contextengine.v1 import (
    compaction_service_pb2,
    context_service_pb2,
    context_tools_service_pb2,
    memory_service_pb2,
    session_service_pb2,
    subscription_service_pb2,
)

_LOG = logging.getLogger("contextengine.server")

__all__ = ["SERVICES", "ContextEngineServer", "server_edge"]

SESSION_SERVICE = session_service_pb2.DESCRIPTOR.services_by_name["SessionService"]
CONTEXT_SERVICE = context_service_pb2.DESCRIPTOR.services_by_name["ContextService"]
SUBSCRIPTION_SERVICE = subscription_service_pb2.DESCRIPTOR.services_by_name["SubscriptionService"]
COMPACTION_SERVICE = compaction_service_pb2.DESCRIPTOR.services_by_name["CompactionService"]
MEMORY_SERVICE = memory_service_pb2.DESCRIPTOR.services_by_name["MemoryService"]
CONTEXT_TOOLS_SERVICE = context_tools_service_pb2.DESCRIPTOR.services_by_name["ContextToolsService"]
SERVICES = (
    SESSION_SERVICE,
    CONTEXT_SERVICE,
    SUBSCRIPTION_SERVICE,
    COMPACTION_SERVICE,
    MEMORY_SERVICE,
    CONTEXT_TOOLS_SERVICE,
)

#: how long open subscription streams get, on shutdown, to end with UNAVAILABLE
_STREAMS_END_SECONDS = 2.0


def server_edge(settings: ServerSettings) -> Edge:
    """The API port's security from ``settings`` (reads the token and certificate files;
    ValueError naming the setting when one is unusable)."""
    return build_edge(
        methods=[m.full_name for svc in SERVICES for m in svc.methods],
        tokens_file=settings.auth_tokens_file,
        token=settings.auth_token,
        cert_file=settings.tls_cert_file,
        key_file=settings.tls_key_file,
        client_ca_file=settings.tls_client_ca_file,
        unix_socket_mode=settings.unix_socket_mode,
        unix_socket_group=settings.unix_socket_group,
    )


class ContextEngineServer:
    """One running sidecar: the engine (``open_engine``) behind the gRPC transport. ``start``
    opens the engine, binds and serves; ``stop`` drains and closes it."""

    def __init__(
        self,
        settings: ServerSettings,
        store: EventStore | None = None,
        *,
        summarizers: SummarizerFactory | None = None,
        tracer_provider: TracerProvider | None = None,
    ) -> None:
        """``store`` replaces the one made from ``settings.db``; ``summarizers`` replaces how
        summarizers are made from app configurations (tests); ``tracer_provider`` traces the
        RPCs (else one exporting to ``tracing_otlp_endpoint``, if set). Settings no engine can
        run with raise ValueError here, before anything starts."""
        self.settings = settings
        self._engine_settings = settings.engine()
        self._edge = server_edge(settings)
        self._observability = Observability(
            ops_listen=settings.ops_listen,
            otlp_endpoint=settings.tracing_otlp_endpoint,
            sample_ratio=settings.tracing_sample_ratio,
            tracer_provider=tracer_provider,
        )
        self._store = store
        self._summarizers = summarizers
        self._engine: Engine | None = None
        self._server: grpc.aio.Server | None = None
        self._health = health.aio.HealthServicer()
        self._port = 0
        self._stopped = False
        #: the health every service should have (NOT_SERVING while the store cannot write) and
        #: the one last set; ``_health_task`` brings the second to the first
        self._health_wanted = health_pb2.HealthCheckResponse.SERVING
        self._health_set: int | None = None
        self._health_task: asyncio.Task[None] | None = None
        self._unwatch_storage: Callable[[], None] | None = None

    @property
    def engine(self) -> Engine:
        """The engine served (once ``start`` opened it)."""
        if self._engine is None:
            raise RuntimeError("the server is not started")
        return self._engine

    @property
    def store(self) -> EventStore:
        return self.engine.store

    @property
    def compactor(self) -> Compactor:
        return self.engine.compactor

    @property
    def memory(self) -> MemoryService:
        """Long-term memory."""
        return self.engine.memory

    @property
    def prompt_cache(self) -> PromptCache:
        """Prompt-cache fields of BuildContext and managed Gemini caches."""
        return self.engine.prompt_cache

    @property
    def session_configs(self) -> SessionConfigs:
        """Sessions' own configurations."""
        return self.engine.session_configs

    @property
    def broadcaster(self) -> Broadcaster:
        return self.engine.broadcaster

    @property
    def port(self) -> int:
        """The bound TCP port (0 for a unix socket)."""
        return self._port

    @property
    def ops_port(self) -> int:
        """The operations HTTP server's bound port (0: ``ops_listen`` is off)."""
        return self._observability.ops_port

    def _not_ready(self) -> str | None:
        """Why ``/readyz`` fails: the engine is not open yet (migrations), the store cannot
        write, or the sidecar is shutting down; None when ready."""
        if self._stopped:
            return "shutting down"
        if self._engine is None:
            return "starting"
        problem = self._engine.storage_problem
        return None if problem is None else f"{problem.reason}: {problem.message}"

    @property
    def target(self) -> str:
        """What a client passes to ``grpc.aio.insecure_channel``."""
        listen = self.settings.listen
        if listen.startswith("unix:"):
            return listen
        host = listen.rsplit(":", 1)[0]
        return f"{host}:{self._port}"

    async def start(self) -> None:
        observability = self._observability
        await observability.start_ops(self._not_ready)
        try:
            engine = await open_engine(
                self._engine_settings,
                store=self._store,
                summarizers=self._summarizers,
                telemetry=observability.telemetry,
            )
        except BaseException:
            await observability.stop()
            raise
        self._engine = engine
        observability.watch(engine)
        if self.settings.inspector:
            observability.mount(INSPECTOR_PREFIX, Inspector(engine, self._edge.authorizer).handle)
        limit = self.settings.max_request_bytes
        server = grpc.aio.server(
            options=[
                # The transport accepts up to twice the limit so that oversized requests reach our
                # own check and get an ErrorInfo (REQUEST_TOO_LARGE). Beyond that grpc core refuses
                # the message from its length prefix, without buffering it, with a bare
                # RESOURCE_EXHAUSTED: -1 (no bound) would give every oversized request the
                # ErrorInfo but let one request make the sidecar hold about three times its size
                # (a 256 MiB request: +790 MB peak RSS; with the bound: flat). See errors.proto.
                ("grpc.max_receive_message_length", 2 * limit),
                ("grpc.max_send_message_length", -1),
                ("grpc.keepalive_time_ms", 30_000),
                ("grpc.keepalive_timeout_ms", 10_000),
                ("grpc.keepalive_permit_without_calls", 1),
                ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
                ("grpc.http2.max_pings_without_data", 0),
                ("grpc.so_reuseport", 0),
            ]
        )
        servicers = {
            SESSION_SERVICE: SessionServicer(engine),
            CONTEXT_SERVICE: ContextServicer(engine),
            COMPACTION_SERVICE: CompactionServicer(engine),
            SUBSCRIPTION_SERVICE: SubscriptionServicer(engine),
            MEMORY_SERVICE: MemoryServicer(engine),
            CONTEXT_TOOLS_SERVICE: ContextToolsServicer(engine),
        }
        guard = self._edge.authorizer
        server.add_generic_rpc_handlers(
            tuple(
                generic_handler(svc, impl, limit, guard, observability.rpc_observer)
                for svc, impl in servicers.items()
            )
        )
        health_pb2_grpc.add_HealthServicer_to_server(self._health, server)
        names = [svc.full_name for svc in SERVICES]
        reflection.enable_server_reflection(
            [
                *names,
                health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
                reflection.SERVICE_NAME,
            ],
            server,
        )
        listen = self.settings.listen
        edge = self._edge
        with socket_umask(listen, edge.socket_mode):
            if edge.credentials is None:
                self._port = server.add_insecure_port(listen)
            else:
                self._port = server.add_secure_port(listen, edge.credentials)
        if listen.startswith("unix:"):
            self._port = 0
            apply_socket_permissions(listen, edge.socket_mode, edge.socket_gid)
        await server.start()
        self._server = server
        self._watch_storage(engine)
        await self._apply_health()
        tls = "mtls" if self.settings.tls_client_ca_file else "on"
        _LOG.info(
            "serving on %s (db=%s, tls=%s, auth=%s, loop=%s)",
            self.target,
            mask_dsn(self.settings.db),  # a postgresql:// URL may hold a password
            "off" if edge.credentials is None else tls,
            "off" if edge.authorizer is None else "tokens",
            type(asyncio.get_running_loop()).__module__.partition(".")[0],
        )

    def observe_gc(self, policy: GcSource) -> None:
        """Exposes the garbage collector's pauses and frozen objects in the metrics (when the
        operations port is on); ``serve`` installs the process's policy and calls this."""
        self._observability.watch_gc(policy)

    def _watch_storage(self, engine: Engine) -> None:
        """Health follows whether the store can write: NOT_SERVING while it cannot."""
        self._unwatch_storage = engine.add_storage_listener(self._storage_changed)
        self._health_wanted = _health_of(engine.storage_problem)

    def _storage_changed(self, problem: ContextEngineError | None) -> None:
        self._health_wanted = _health_of(problem)
        if self._health_task is None or self._health_task.done():
            self._health_task = asyncio.get_running_loop().create_task(
                self._apply_health(), name="health-follows-storage"
            )

    async def _apply_health(self) -> None:
        while not self._stopped and self._health_set != self._health_wanted:
            status = self._health_wanted
            for name in ["", *(svc.full_name for svc in SERVICES)]:
                await self._health.set(name, status)
            self._health_set = status

    async def stop(self, grace: float | None = None) -> None:
        """Graceful shutdown: health goes NOT_SERVING, open subscription streams end with
        UNAVAILABLE / SHUTTING_DOWN (their clients resubscribe elsewhere), new RPCs are refused,
        in-flight RPCs get ``grace`` seconds to finish, then the engine closes (the store
        flushes). Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        if self._unwatch_storage is not None:
            self._unwatch_storage()
        if self._health_task is not None:
            await self._health_task
        await self._health.enter_graceful_shutdown()
        seconds = self.settings.grace_seconds if grace is None else grace
        engine = self._engine
        # Streams never finish by themselves: end them first, or grpc would wait out the grace
        # period and then cancel them (CANCELLED, which tells a client nothing).
        if engine is not None:
            await engine.end_streams(min(seconds, _STREAMS_END_SECONDS))
        if self._server is not None:
            await self._server.stop(seconds)
        if engine is not None:
            await engine.close()
        await self._observability.stop()
        _LOG.info("stopped")

    async def wait_for_termination(self) -> None:
        if self._server is not None:
            await self._server.wait_for_termination()


def _health_of(
    problem: ContextEngineError | None,
) -> health_pb2.HealthCheckResponse.ServingStatus.ValueType:
    if problem is None:
        return health_pb2.HealthCheckResponse.SERVING
    return health_pb2.HealthCheckResponse.NOT_SERVING
