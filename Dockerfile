# contextengine sidecar image. Multi-stage: wheels are built in the first stage; the runtime
# stage has the virtual environment and nothing else (no compilers, no sources).
FROM python:3.11-slim-bookworm AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
COPY pyproject.toml README.md LICENSE ./
COPY deploy/requirements.lock ./deploy/
COPY clients/python/pyproject.toml clients/python/README.md ./clients/python/
COPY clients/python/contextengine ./clients/python/contextengine
COPY server ./server
COPY proto ./proto
# Two distributions in one pip command: the client (contextengine.client and the generated
# contextengine.v1, which the server imports) and the server, which depends on it; every other
# package at the version the tests ran with (deploy/requirements.lock, `make lock`).
RUN python -m venv /opt/venv \
  && /opt/venv/bin/pip install --constraint deploy/requirements.lock ./clients/python .

FROM python:3.11-slim-bookworm
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PATH=/opt/venv/bin:$PATH \
  CONTEXTENGINE_CONFIG=/etc/contextengine/contextengine.toml
COPY --from=build /opt/venv /opt/venv
COPY deploy/docker/contextengine.toml /etc/contextengine/contextengine.toml
RUN useradd --uid 10001 --user-group --no-create-home --home-dir /data contextengine \
  && mkdir /data && chown 10001:10001 /data
USER 10001:10001
WORKDIR /data
VOLUME ["/data"]
# The operations port (/healthz, /readyz, /metrics: Kubernetes probes it with httpGet). The API
# (50151) listens on 127.0.0.1 by default (deploy/docker/contextengine.toml): reachable from the
# pod's other containers, not published; see deploy/kubernetes/README.md.
EXPOSE 50152
# Exec form so SIGTERM reaches the server (graceful shutdown). Settings: the file above, then
# CONTEXTENGINE_<NAME> variables, then arguments (`docker run IMAGE --max-request-bytes 1048576`).
ENTRYPOINT ["contextengine", "serve"]
