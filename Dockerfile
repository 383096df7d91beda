# contextengine sidecar image. Multi-stage: wheels are built in the first stage; the runtime
# stage has the virtual environment and nothing else (no compilers, no sources).
FROM python:3.11-slim AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY clients/python/pyproject.toml clients/python/README.md ./clients/python/
COPY clients/python/contextengine ./clients/python/contextengine
COPY server ./server
COPY proto ./proto
# Two distributions in one pip command: the client (contextengine.client and the generated
# contextengine.v1, which the server imports) and the server, which depends on it.
RUN python -m venv /opt/venv && /opt/venv/bin/pip install --upgrade pip \
  && /opt/venv/bin/pip install ./clients/python .

FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PATH=/opt/venv/bin:$PATH
COPY --from=build /opt/venv /opt/venv
RUN useradd --uid 10001 --create-home contextengine && mkdir /data && chown 10001 /data
USER 10001
WORKDIR /data
EXPOSE 50151
# Exec form so SIGTERM reaches the server (graceful shutdown). Kubernetes probes use the
# grpc.health.v1 service on the same port (`grpc: {port: 50151}`).
ENTRYPOINT ["contextengine", "serve", "--listen", "0.0.0.0:50151", "--db", "/data/contextengine.db"]
