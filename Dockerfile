# contextengine sidecar image. Multi-stage: the environment is built in the first stage; the runtime
# stage has the virtual environment and nothing else (no compilers, no sources, no uv).
FROM python:3.11-slim-bookworm AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 \
  UV_PROJECT_ENVIRONMENT=/opt/venv UV_PYTHON_DOWNLOADS=never UV_NO_CACHE=1 UV_COMPILE_BYTECODE=1
# uv at the version pyproject.toml requires ([tool.uv] required-version; the Makefile's too).
RUN pip install uv==0.13.8
WORKDIR /src
COPY pyproject.toml uv.lock README.md LICENSE ./
COPY clients/python/pyproject.toml clients/python/README.md ./clients/python/
COPY clients/python/contextengine ./clients/python/contextengine
COPY clients/adk_python/pyproject.toml ./clients/adk_python/
COPY server ./server
COPY proto ./proto
# The server and the client (contextengine.client and the generated contextengine.v1, which the
# server imports), installed as wheels, and every other package at the version uv.lock names with
# its hash: the versions the tests ran with (`make lock`). No extra: no test or dev tools.
RUN uv sync --frozen --no-editable --python /usr/local/bin/python3.11

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
