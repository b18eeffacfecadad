"""`lifetime-lint server`: the real server in a subprocess, spoken to in JSON-RPC over stdio."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("pygls")

from lsp_client import LspClient, apply_text_edits  # tests/ is on sys.path

FINDING = """import torch


def free_memory():
    torch.cuda.empty_cache()
    return 1
"""

CLEAN = """import torch


def free_memory():
    return 1
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    # A project that declares lifetime-lint, so LL004's fix is safe there.
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "demo"\ndependencies = ["lifetime-lint"]\n', encoding="utf-8"
    )
    return tmp_path


@pytest.fixture
def client(project: Path):
    lsp = LspClient(cwd=str(project))
    lsp.initialize(project, {"lifetime-lint": {"debounce": 0.05}})
    yield lsp
    lsp.close()


def open_document(client: LspClient, path: Path, text: str, version: int = 1) -> str:
    uri = path.as_uri()
    client.notify(
        "textDocument/didOpen",
        {"textDocument": {"uri": uri, "languageId": "python", "version": version, "text": text}},
    )
    return uri


def change(client: LspClient, uri: str, text: str, version: int) -> None:
    client.notify(
        "textDocument/didChange",
        {"textDocument": {"uri": uri, "version": version}, "contentChanges": [{"text": text}]},
    )


def fixed_by_cli(project: Path, text: str, *extra: str) -> str:
    target = project / "cli_copy.py"
    target.write_text(text, encoding="utf-8")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "lifetime_lint",
            "check",
            "--fix",
            "--no-cache",
            *extra,
            str(target),
        ],
        cwd=str(project),
        capture_output=True,
        check=False,
    )
    return target.read_text(encoding="utf-8")


def test_diagnostics_follow_the_unsaved_buffer(client: LspClient, project: Path) -> None:
    path = project / "model.py"
    path.write_text(CLEAN, encoding="utf-8")  # the file on disk has no finding
    uri = open_document(client, path, FINDING)
    diagnostics = client.diagnostics(uri, version=1)
    assert [d["code"] for d in diagnostics] == ["LL004"]
    (diagnostic,) = diagnostics
    assert diagnostic["source"] == "lifetime-lint"
    assert diagnostic["range"]["start"] == {"line": 4, "character": 4}
    assert diagnostic["range"]["end"] == {"line": 4, "character": 28}
    assert diagnostic["codeDescription"]["href"].startswith("http")

    change(client, uri, CLEAN, 2)
    assert client.diagnostics(uri, version=2) == []


def test_quick_fix_equals_what_fix_writes(client: LspClient, project: Path) -> None:
    uri = open_document(client, project / "model.py", FINDING)
    (diagnostic,) = client.diagnostics(uri, version=1)
    actions = client.request(
        "textDocument/codeAction",
        {
            "textDocument": {"uri": uri},
            "range": diagnostic["range"],
            "context": {"diagnostics": [diagnostic]},
        },
    )
    quick = [a for a in actions if a["kind"] == "quickfix" and a.get("isPreferred")]
    assert len(quick) == 1, actions
    edited = apply_text_edits(FINDING, quick[0]["edit"]["changes"][uri])
    assert edited == fixed_by_cli(project, FINDING)
    assert "reclaim()" in edited

    fix_all = [a for a in actions if a["kind"].startswith("source.fixAll")]
    assert len(fix_all) == 1
    assert apply_text_edits(FINDING, fix_all[0]["edit"]["changes"][uri]) == edited

    disable = [a for a in actions if a["title"] == "LL004: disable for this line"]
    assert len(disable) == 1
    suppressed = apply_text_edits(FINDING, disable[0]["edit"]["changes"][uri])
    assert "torch.cuda.empty_cache()  # noqa: LL004\n" in suppressed
    change(client, uri, suppressed, 2)
    assert client.diagnostics(uri, version=2) == []


def test_a_syntax_error_is_a_diagnostic_and_the_server_lives_on(
    client: LspClient, project: Path
) -> None:
    uri = open_document(client, project / "broken.py", "import torch\ndef f(:\n    pass\n")
    (diagnostic,) = client.diagnostics(uri, version=1)
    assert diagnostic["code"] == "E999"
    assert diagnostic["severity"] == 1  # Error
    change(client, uri, FINDING, 2)
    assert [d["code"] for d in client.diagnostics(uri, version=2)] == ["LL004"]
    hover = client.request(
        "textDocument/hover",
        {"textDocument": {"uri": uri}, "position": {"line": 4, "character": 10}},
    )
    assert "LL004" in hover["contents"]["value"]
    assert "raw-empty-cache" in hover["contents"]["value"]


def test_per_file_config_and_reload_without_restart(client: LspClient, project: Path) -> None:
    package = project / "pkg"
    package.mkdir()
    (package / "pyproject.toml").write_text(
        '[project]\nname = "pkg"\n\n[tool.lifetime-lint]\nignore = ["LL004"]\n', encoding="utf-8"
    )
    uri = open_document(client, package / "model.py", FINDING)
    assert client.diagnostics(uri, version=1) == []  # the nearest config ignores LL004

    time.sleep(0.05)  # a new modification time
    (package / "pyproject.toml").write_text('[project]\nname = "pkg"\n', encoding="utf-8")
    client.notify(
        "workspace/didChangeWatchedFiles",
        {"changes": [{"uri": (package / "pyproject.toml").as_uri(), "type": 2}]},
    )
    assert [d["code"] for d in client.diagnostics(uri)] == ["LL004"]


def test_broken_config_is_reported_on_the_document(client: LspClient, project: Path) -> None:
    (project / "pyproject.toml").write_text("[tool.lifetime-lint]\nselect = [\n", encoding="utf-8")
    uri = open_document(client, project / "model.py", FINDING)
    (diagnostic,) = client.diagnostics(uri, version=1)
    assert diagnostic["severity"] == 1
    assert "pyproject.toml" in diagnostic["message"]


def test_shutdown_and_exit(project: Path) -> None:
    lsp = LspClient(cwd=str(project))
    lsp.initialize(project)
    assert lsp.close() == 0


def test_an_edited_pyproject_changes_what_a_fix_is_without_restart(tmp_path: Path) -> None:
    """Whether the project declares lifetime-lint decides if the runtime-importing fix is
    safe; the long-running service re-reads the project once its files change."""
    from lifetime_lint.project import RACY_SECONDS
    from lifetime_lint.server import LintService

    (tmp_path / "pyproject.toml").write_text('[project]\nname = "demo"\n')
    time.sleep(RACY_SECONDS + 0.2)  # the memo is trusted only for files older than this
    source = (
        "import torch\n\n\ndef decode(vae, latents):\n"
        "    video = vae.decode(latents).sample\n    torch.cuda.empty_cache()\n    return video\n"
    )
    path = str(tmp_path / "decode.py")
    service = LintService()
    (finding,) = service.lint(path, source)
    assert finding.code == "LL004" and finding.fix is not None and not finding.fix.is_safe
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "demo"\ndependencies = ["lifetime-lint"]\n'
    )
    (finding,) = service.lint(path, source)
    assert finding.fix is not None and finding.fix.is_safe
