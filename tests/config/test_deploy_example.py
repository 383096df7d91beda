"""deploy/kubernetes/postgres/ says what it claims: two agent replicas whose sidecars take their
database (a ``postgresql://`` URL, from the Secret, as ``CONTEXTENGINE_DB``) over the ConfigMap's
configuration, which the sidecar accepts; the URL names the PostgreSQL Service, user, database and
password the StatefulSet is given; every container is non-root with a read-only root filesystem.
(``make check-deploy`` validates the manifests against the Kubernetes schemas.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from contextengine import config
from contextengine.store import is_postgres_dsn

pytestmark = pytest.mark.unit

EXAMPLE = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes" / "postgres"


def _documents() -> dict[tuple[str, str], dict[str, Any]]:
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for path in sorted(EXAMPLE.glob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text()):
            found[document["kind"], document["metadata"]["name"]] = document
    return found


def _env(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {item["name"]: item for item in container.get("env", [])}


def test_two_replicas_share_the_database_of_the_secret(tmp_path: Path) -> None:
    docs = _documents()
    deployment = docs["Deployment", "agent-scaled"]
    assert deployment["spec"]["replicas"] == 2
    pod = deployment["spec"]["template"]["spec"]
    (sidecar,) = [c for c in pod["initContainers"] if c["name"] == "contextengine"]
    assert sidecar["restartPolicy"] == "Always"
    reference = _env(sidecar)["CONTEXTENGINE_DB"]["valueFrom"]["secretKeyRef"]
    secret = docs["Secret", reference["name"]]["stringData"]
    url = secret[reference["key"]]
    assert is_postgres_dsn(url)

    # The sidecar accepts the ConfigMap with that variable, and the database is the Secret's.
    configmap = docs["ConfigMap", pod["volumes"][0]["configMap"]["name"]]
    path = tmp_path / "contextengine.toml"
    path.write_text(configmap["data"]["contextengine.toml"])
    loaded = config.load({}, environ={"CONTEXTENGINE_DB": url}, config_file=path)
    assert loaded.settings.db == url
    assert loaded.settings.listen.startswith("unix:")

    # The URL points at the Service and the credentials the PostgreSQL StatefulSet is given.
    parts = urlsplit(url)
    service = docs["Service", parts.hostname or ""]
    assert parts.port == service["spec"]["ports"][0]["port"]
    postgres = docs["StatefulSet", parts.hostname or ""]["spec"]["template"]["spec"]
    (server,) = postgres["containers"]
    env = _env(server)
    assert env["POSTGRES_USER"]["value"] == parts.username
    assert env["POSTGRES_DB"]["value"] == parts.path.lstrip("/")
    password = env["POSTGRES_PASSWORD"]["valueFrom"]["secretKeyRef"]
    assert docs["Secret", password["name"]]["stringData"][password["key"]] == parts.password


def test_every_container_is_locked_down() -> None:
    for (kind, _name), document in _documents().items():
        if kind not in ("Deployment", "StatefulSet"):
            continue
        pod = document["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        for container in pod.get("initContainers", []) + pod["containers"]:
            security = container["securityContext"]
            assert security["readOnlyRootFilesystem"] is True
            assert security["allowPrivilegeEscalation"] is False
            assert security["capabilities"]["drop"] == ["ALL"]
