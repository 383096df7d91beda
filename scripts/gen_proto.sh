#!/usr/bin/env bash
# Generates the Python code for proto/contextengine/v1 into OUT (default: clients/python/, the
# client distribution, which ships contextengine.v1 for the client and the server alike).
# The proto package path equals the Python import path, so the output drops in unchanged: the
# generated imports (`from contextengine.v1 import x_pb2`) resolve through the contextengine
# namespace package (docs/adr/0010-python-client-package.md).
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-.venv/bin/python}"
OUT="${1:-clients/python}"
mkdir -p "$OUT/contextengine/v1"
"$PY" -m grpc_tools.protoc -I proto \
  --python_out="$OUT" \
  --grpc_python_out="$OUT" \
  --plugin=protoc-gen-mypy="$(dirname "$PY")/protoc-gen-mypy" \
  --plugin=protoc-gen-mypy_grpc="$(dirname "$PY")/protoc-gen-mypy_grpc" \
  --mypy_out="$OUT" \
  --mypy_grpc_out=async_only:"$OUT" \
  proto/contextengine/v1/*.proto
cat > "$OUT/contextengine/v1/__init__.py" <<'PYEOF'
"""Generated from proto/contextengine/v1 by scripts/gen_proto.sh. DO NOT EDIT."""
PYEOF
# PEP 561: the stubs' .pyi files are the types of an installed client wheel.
: > "$OUT/contextengine/v1/py.typed"
