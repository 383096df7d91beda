#!/usr/bin/env bash
# Fails when the committed generated Python differs from what the protos generate now.
set -euo pipefail
cd "$(dirname "$0")/.."
GEN=clients/python/contextengine/v1
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
scripts/gen_proto.sh "$TMP" >/dev/null
if ! diff -r -x __pycache__ "$TMP/contextengine/v1" "$GEN"; then
  echo "generated code is stale: run 'make gen' and commit $GEN" >&2
  exit 1
fi
echo "generated code is up to date"
