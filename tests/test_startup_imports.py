"""``contextengine serve`` loads only what serving needs (docs/design/startup.md).

google-genai takes a second or more to import; it is imported on first use (a Gemini summary, a
managed Gemini cache, a BuildContext whose system instruction, tools or tool config must be
validated), never at start-up. google-adk is never imported by the server, and neither are the
demo (an example now) nor the test helpers. Each check runs in a fresh interpreter, since this
test process has long imported everything.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

#: modules no start-up may load (a name, or a package and everything under it)
NOT_AT_START_UP = ("google.genai", "google.adk", "contextengine.testing")

_REPORT = """
import json, sys
banned = {banned!r}
loaded = sorted(
    name
    for name in sys.modules
    if any(name == b or name.startswith(b + ".") for b in banned) or "demo" in name
)
print(json.dumps(loaded))
"""


def _loaded_after(code: str, banned: tuple[str, ...] = NOT_AT_START_UP) -> list[str]:
    """The banned modules (and any demo) ``code`` leaves in ``sys.modules``, in a new process."""
    script = textwrap.dedent(code) + _REPORT.format(banned=banned)
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    loaded: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    return loaded


def test_importing_the_cli_and_the_server_loads_no_genai_adk_or_demo() -> None:
    code = "import contextengine.cli, contextengine.process, contextengine.transport"
    assert _loaded_after(code) == []


#: the gRPC runtime and what is built on it
GRPC = ("grpc", "grpc_health", "grpc_reflection", "grpc_status")


def test_the_settings_and_loading_a_configuration_load_no_grpc() -> None:
    """Settings are data and their checks: only the transport (contextengine.transport) and the
    TLS credentials it builds load grpc."""
    code = """
    import contextengine.settings, contextengine.config
    config = contextengine.config.load({"listen": "127.0.0.1:0"}, environ={})
    assert config.settings.listen == "127.0.0.1:0"
    """
    assert _loaded_after(code, GRPC) == []


def test_the_settings_check_tokens_without_grpc(tmp_path: Path) -> None:
    """Bad token settings are refused, with the setting named, before grpc is loaded."""
    tokens = tmp_path / "tokens.toml"
    tokens.write_text("not toml [")
    code = f"""
    from contextengine.settings import ServerSettings
    try:
        ServerSettings(auth_tokens_file={str(tokens)!r})
    except ValueError as error:
        assert "auth_tokens_file" in str(error), error
    else:
        raise AssertionError("accepted")
    ServerSettings(auth_token="secret")
    """
    assert _loaded_after(code, GRPC) == []


def test_serve_help_loads_no_genai_adk_or_demo() -> None:
    code = """
    from contextengine.cli import main
    assert main(["serve", "--help"]) == 0
    """
    assert _loaded_after(code) == []


#: what the operator console (contextengine.console) loads, which ``serve`` must not (click is
#: the whole command line's)
CONSOLE_ONLY = ("rich", "contextengine.console", "contextengine.client")


def test_serve_help_loads_neither_the_console_nor_rich_or_the_client() -> None:
    code = """
    from contextengine.cli import main
    assert main(["serve", "--help"]) == 0
    """
    assert _loaded_after(code, CONSOLE_ONLY) == []


def test_the_command_list_loads_neither_the_console_nor_the_settings() -> None:
    """``contextengine --help`` lists every command from the help lines ``cli`` holds."""
    code = """
    from contextengine.cli import main
    assert main(["--help"]) == 0
    assert main(["config", "--help"]) == 0
    """
    server = ("contextengine.settings", "contextengine.config", "pydantic")
    assert _loaded_after(code, CONSOLE_ONLY + server) == []


def test_a_console_command_loads_no_server_module() -> None:
    """``contextengine sessions ...`` is a client: the settings, transport and engine stay out."""
    code = """
    from contextengine.cli import main
    assert main(["sessions", "list", "--help"]) == 0
    """
    server = (
        "contextengine.settings",
        "contextengine.transport",
        "contextengine.process",
        "contextengine.config",
        "contextengine.engine",
        "pydantic",
    )
    assert _loaded_after(code, server) == []


def test_the_modules_that_use_genai_import_it_on_first_use_only() -> None:
    code = """
    import contextengine.compaction.summarizers.factory
    import contextengine.compaction.summarizers.gemini
    import contextengine.prompt_cache.gemini_caches
    import contextengine.prompt_cache.request
    import contextengine.prompt_cache.service
    """
    assert _loaded_after(code) == []


def test_a_request_without_fixed_parts_never_imports_genai() -> None:
    code = """
    from contextengine.prompt_cache.request import read_model_request_parts
    parts = read_model_request_parts("gemini-2.5-flash", None, [], None)
    assert parts.fixed_chars == 0 and parts.tools == ()
    """
    assert _loaded_after(code, ("google.genai",)) == []


def test_the_first_request_with_a_system_instruction_imports_genai() -> None:
    """The deferred import happens, and the instruction is validated as before."""
    code = """
    from contextengine.prompt_cache.request import read_model_request_parts
    from contextengine.v1 import content_pb2
    instruction = content_pb2.Content(parts=[content_pb2.Part(text="Be brief.")])
    parts = read_model_request_parts("gemini-2.5-flash", instruction, [], None)
    assert parts.system_instruction is not None
    assert parts.system_instruction.parts[0].text == "Be brief."
    """
    assert _loaded_after(code, ("google.genai",)) != []
