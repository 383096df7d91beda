"""The deployment files say what they claim: the Kubernetes example's sidecar is a native sidecar
probed on its operations port, non-root with a read-only root filesystem, its ConfigMap is a
configuration the sidecar accepts and its Secret's token matches its hash; the manifests pass the
Kubernetes schemas and a broken one does not; the image's defaults keep the API off 0.0.0.0."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from contextengine import config
from contextengine._compat import tomllib
from contextengine.auth import hash_token, load_token_file

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
SIDECAR = ROOT / "deploy" / "kubernetes" / "sidecar"
VALIDATE = Path(sys.executable).with_name("kubernetes-validate")
KUBERNETES_VERSION = "1.33.0"


def _documents() -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for path in sorted(SIDECAR.glob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text()):
            found[document["kind"]] = document
    return found


def _pod() -> dict[str, Any]:
    spec: dict[str, Any] = _documents()["Deployment"]["spec"]["template"]["spec"]
    return spec


def _sidecar() -> dict[str, Any]:
    found: list[dict[str, Any]] = [
        c for c in _pod()["initContainers"] if c["name"] == "contextengine"
    ]
    (sidecar,) = found
    return sidecar


def _settings(tmp_path: Path) -> config.Config:
    """The ConfigMap's configuration, with the Secret's token file where this test wrote it (the
    sidecar reads it when its settings are made)."""
    path = tmp_path / "contextengine.toml"
    path.write_text(_documents()["ConfigMap"]["data"]["contextengine.toml"])
    tokens = tmp_path / "tokens.toml"
    tokens.write_text(_documents()["Secret"]["stringData"]["tokens.toml"])
    return config.load({"auth_tokens_file": str(tokens)}, environ={}, config_file=path)


def test_the_sidecar_is_native_and_locked_down() -> None:
    sidecar = _sidecar()
    assert sidecar["restartPolicy"] == "Always"
    security = sidecar["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert _pod()["securityContext"]["runAsNonRoot"] is True
    assert {"requests", "limits"} <= set(sidecar["resources"])
    mounts = {m["mountPath"]: m["name"] for m in sidecar["volumeMounts"]}
    volumes = {v["name"]: v for v in _pod()["volumes"]}
    assert "persistentVolumeClaim" in volumes[mounts["/data"]]


def test_the_configmap_is_a_configuration_the_sidecar_accepts(tmp_path: Path) -> None:
    settings = _settings(tmp_path).settings
    assert settings.db.startswith("/data/")
    assert not settings.listen.startswith("0.0.0.0")


def test_the_probes_use_the_operations_port_of_the_configuration(tmp_path: Path) -> None:
    settings = _settings(tmp_path).settings
    port = int(settings.ops_listen.rsplit(":", 1)[1])
    sidecar = _sidecar()
    named = {p["name"]: p["containerPort"] for p in sidecar["ports"]}
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        get = sidecar[probe]["httpGet"]
        assert named.get(get["port"], get["port"]) == port, probe
        assert get["path"] in {"/healthz", "/readyz"}


def test_the_api_socket_is_shared_with_the_agent_only_through_an_emptydir(tmp_path: Path) -> None:
    socket = _settings(tmp_path).settings.listen.removeprefix("unix:")
    directory = str(Path(socket).parent)
    pod = _pod()
    volumes = {v["name"]: v for v in pod["volumes"]}
    (agent,) = pod["containers"]
    for container in (_sidecar(), agent):
        (mount,) = [m for m in container["volumeMounts"] if m["mountPath"] == directory]
        assert "emptyDir" in volumes[mount["name"]]
    target = {e["name"]: e.get("value") for e in agent["env"]}["CONTEXTENGINE_TARGET"]
    assert target == f"unix://{socket}"


def test_the_secrets_token_file_grants_the_agents_token(tmp_path: Path) -> None:
    secret = _documents()["Secret"]["stringData"]
    grants = load_token_file(Path(_settings(tmp_path).settings.auth_tokens_file))
    assert hash_token(secret["agent-token"]) in grants
    # where the ConfigMap says the file is, the Secret is mounted
    configured = tomllib.loads(_documents()["ConfigMap"]["data"]["contextengine.toml"])
    where = configured["auth_tokens_file"]
    sidecar = _sidecar()
    (mount,) = [m for m in sidecar["volumeMounts"] if where.startswith(m["mountPath"] + "/")]
    volumes = {v["name"]: v for v in _pod()["volumes"]}
    assert (
        volumes[mount["name"]]["secret"]["secretName"] == _documents()["Secret"]["metadata"]["name"]
    )


def _validate(*paths: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(VALIDATE), "--strict", "--quiet", "-k", KUBERNETES_VERSION, *map(str, paths)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_manifests_pass_the_kubernetes_schemas_and_a_broken_one_fails(tmp_path: Path) -> None:
    if not VALIDATE.exists():
        pytest.fail("kubernetes-validate is not installed: make install-dev")
    done = _validate(*sorted(SIDECAR.glob("*.yaml")))
    assert done.returncode == 0, done.stdout + done.stderr
    broken = tmp_path / "deployment.yaml"
    text = (SIDECAR / "deployment.yaml").read_text()
    broken.write_text(
        text.replace("restartPolicy: Always", "restartPolicy: Always\n          restartPolcy: x")
    )
    done = _validate(broken)
    assert done.returncode != 0
    assert "restartPolcy" in done.stdout + done.stderr


def test_the_image_keeps_the_api_on_loopback_and_runs_as_a_user() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    lines = [line.strip() for line in dockerfile.splitlines()]
    assert "USER 10001:10001" in lines
    assert "EXPOSE 50152" in lines
    assert "0.0.0.0:50151" not in dockerfile
    # the environment from the one lock, hashes checked, without the test and dev extras
    assert "RUN uv sync --frozen --no-editable --python /usr/local/bin/python3.11" in lines
    assert "COPY pyproject.toml uv.lock README.md LICENSE ./" in lines
    assert "--extra" not in dockerfile
    assert "--all-extras" not in dockerfile
    image_config = ROOT / "deploy" / "docker" / "contextengine.toml"
    assert f"CONTEXTENGINE_CONFIG=/etc/contextengine/{image_config.name}" in dockerfile
    settings = config.load({}, environ={}, config_file=image_config).settings
    assert settings.listen.startswith("127.0.0.1:")
    assert settings.ops_listen.endswith(":50152")
    assert settings.db == "/data/contextengine.db"


def test_the_lock_is_current() -> None:
    """uv.lock holds what the pyproject files ask for (offline: nothing is resolved anew)."""
    uv = ROOT / ".tools" / "bin" / "uv"
    if not uv.exists():
        pytest.fail("uv is not installed: make install-dev")
    done = subprocess.run(
        [str(uv), "lock", "--check", "--offline"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def test_the_dockerfile_installs_the_uv_the_project_requires() -> None:
    required = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["uv"]
    assert required["required-version"] == "==0.13.8"
    assert "RUN pip install uv==0.13.8" in (ROOT / "Dockerfile").read_text()
    assert "UV_VERSION := 0.13.8" in (ROOT / "Makefile").read_text().splitlines()
