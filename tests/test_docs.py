"""Docs that cannot rot: every Python block in README.md and docs/*.md runs here.

How a page's blocks run (the pages are written to this convention):

- A fenced block whose first line is `# name.ext` (in any language) is a file: it is written
  to the page's own temporary directory under that name, as a reader would save it; a block
  whose first line is `# name.ext (continued)` is appended to that file.
- Every other ```python block is a script. The page's scripts and its Python files (except
  `test_*.py`) run in page order in one fresh interpreter, with the directory as the working
  directory and on `sys.path`: a file is imported (so code under `if __name__ == "__main__":`
  does not run), and the scripts share one namespace and run as `__main__`, the way a reader
  pastes them one after another.
- `test_*.py` files are then run by pytest in that directory, with the page's own
  `pyproject.toml` if it has one, and every test function in them must pass.
- A block that talks to `http://127.0.0.1:8000/mcp` gets a real server there: the test serves
  the page's `server.py` with `mrtr-trio serve server.py --http 127.0.0.1:0` and puts the real
  URL into the blocks, then stops the server.
- A ```typescript block is parsed by Node (its types stripped, as Node runs a `.mts` file). One
  that talks to the documented URL is a client: it runs with Node and the official TypeScript
  SDK (pinned, `tests.node`) against the page's `server.py`, must exit 0, and must print what
  each of its `// prints: ...` comments says. (A block that does not, such as another
  product's configuration shown for comparison, is only parsed.)

A page's blocks run as in a new shell after the README's setup: `MRTR_TRIO_KEYS` exported, and
the virtual environment not activated (its console scripts are not on `PATH`, so a block
reaches them through `sys.executable`, as `python -m mrtr_trio`).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path

import attrs
import pytest
import trio
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from mrtr_trio._keys import generate_key

from .node import installed_node_modules, node_paths
from .server.clients import CALLBACKS, text_of
from .server.processes import http_server

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
DOCUMENTED_URL = "http://127.0.0.1:8000/mcp"
FENCE = re.compile(r"^```([\w+-]*)[^\n]*\n(.*?)^```\s*$", re.MULTILINE | re.DOTALL)
FILE_NAME = re.compile(r"#\s*([\w.-]+\.(?:py|toml|ini|cfg|txt|json))(\s*\(continued\))?\s*$")


@attrs.frozen
class Block:
    language: str
    code: str
    line: int  # the line of the page the code starts on
    file: str | None  # the name it is saved under, for a file block
    continued: bool = False  # appended to the file of an earlier block

    @property
    def is_python(self) -> bool:
        return self.language in ("python", "py")

    @property
    def is_typescript(self) -> bool:
        return self.language in ("typescript", "ts")


def blocks_of(page: Path) -> list[Block]:
    text = page.read_text()
    found = []
    for match in FENCE.finditer(text):
        language, code = match.group(1), match.group(2)
        line = text.count("\n", 0, match.start(2)) + 1
        named = FILE_NAME.fullmatch(code.split("\n", 1)[0].strip())
        file = named.group(1) if named else None
        found.append(Block(language, code, line, file, bool(named and named.group(2))))
    return found


# The interpreter that runs a page: its files and scripts in order, scripts in one namespace.
RUNNER = """
import importlib, json, sys
sys.path.insert(0, ".")
namespace = {"__name__": "__main__", "__builtins__": __builtins__}
for step in json.loads(sys.argv[1]):
    if step["file"]:
        importlib.import_module(step["file"].removesuffix(".py"))
    else:
        code = "\\n" * (step["line"] - 1) + step["code"]
        exec(compile(code, step["where"], "exec"), namespace)
"""


def page_id(page: Path) -> str:
    return str(page.relative_to(ROOT))


def test_every_page_with_python_is_covered() -> None:
    with_python = [page_id(p) for p in PAGES if any(b.is_python for b in blocks_of(p))]
    assert {"README.md", "docs/guide.md", "docs/mcp.md", "docs/testing.md"} <= set(with_python)
    assert all(b.language for p in PAGES for b in blocks_of(p)), "every block names its language"


@pytest.mark.parametrize(
    "page", [p for p in PAGES if any(b.is_python for b in blocks_of(p))], ids=page_id
)
def test_every_python_block_runs(page: Path, tmp_path: Path) -> None:
    blocks = blocks_of(page)
    env = {**fresh_shell(), "MRTR_TRIO_KEYS": generate_key()}
    write_files(blocks, tmp_path, url=None)
    needs_server = any(DOCUMENTED_URL in b.code for b in blocks if b.is_python)
    with serving(tmp_path, env) if needs_server else nullcontext() as url:
        write_files(blocks, tmp_path, url)
        steps = [
            {
                "file": block.file,
                "code": _at(block.code, url),
                "line": block.line,
                "where": f"{page_id(page)}:{block.line}",
            }
            for block in blocks
            if block.is_python and not block.continued and not is_test(block)
        ]
        run = python(["-c", RUNNER, json.dumps(steps)], tmp_path, env, timeout=120)
        assert run.returncode == 0, f"{page_id(page)}:\n{run.stdout}\n{run.stderr}"
        tests = [b for b in blocks if is_test(b)]
        if tests:
            expected = sum(len(re.findall(r"^(?:async )?def test_", b.code, re.M)) for b in tests)
            pytest_args = ["-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "error"]
            ran = python(pytest_args, tmp_path, env, timeout=300)
            assert ran.returncode == 0, f"{page_id(page)} tests:\n{ran.stdout}\n{ran.stderr}"
            assert f"{expected} passed" in ran.stdout, ran.stdout


def fresh_shell() -> dict[str, str]:
    """This environment as a new shell has it: no `MRTR_TRIO_KEYS`, and the virtual
    environment's scripts off `PATH` (a block reaches them through `sys.executable`)."""
    scripts = str(Path(sys.executable).parent)
    path = [p for p in os.environ.get("PATH", "").split(os.pathsep) if p and p != scripts]
    env = {k: v for k, v in os.environ.items() if k not in ("MRTR_TRIO_KEYS", "VIRTUAL_ENV")}
    return {**env, "PATH": os.pathsep.join(path), "PYTHONDONTWRITEBYTECODE": "1"}


def python(
    args: list[str], cwd: Path, env: dict[str, str], *, timeout: float
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


def is_test(block: Block) -> bool:
    return (block.file or "").startswith("test_")


def _at(code: str, url: str | None) -> str:
    return code if url is None else code.replace(DOCUMENTED_URL, url)


def write_files(blocks: list[Block], directory: Path, url: str | None) -> None:
    """Save the page's file blocks, continued ones appended, with the served URL put in."""
    files: dict[str, str] = {}
    for block in blocks:
        if block.file is not None:
            code = _at(block.code, url)
            files[block.file] = files[block.file] + "\n" + code if block.continued else code
    for name, text in files.items():
        (directory / name).write_text(text)


@contextmanager
def serving(directory: Path, env: dict[str, str]) -> Iterator[str]:
    """The page's server.py served over HTTP on a free loopback port; yields its URL."""
    assert (directory / "server.py").is_file(), "a page that calls a server shows its server.py"
    with http_server(target="server.py", cwd=directory, env=env) as served:
        assert served.url.startswith("http://127.0.0.1:") and served.url.endswith("/mcp")
        yield served.url


def readme_server() -> str:
    [server] = [b.code for b in blocks_of(ROOT / "README.md") if b.file == "server.py"]
    return server


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_the_readme_server_serves_over_stdio_and_http(tmp_path: Path, mode: str) -> None:
    """The README's server.py, saved as it is, served by `mrtr-trio serve` with MRTR_TRIO_KEYS
    set: over stdio (the client starts it) and over HTTP (the test starts it)."""
    (tmp_path / "server.py").write_text(readme_server())
    key = generate_key()
    expected = "Deployed api to prod: Paris"
    stdio = StdioServerParameters(
        command=sys.executable,
        args=["-m", "mrtr_trio._cli", "serve", "server.py"],
        cwd=tmp_path,
        env={"MRTR_TRIO_KEYS": key},
    )
    errors = tmp_path / "stdio-stderr.txt"
    with errors.open("w") as errlog, trio.fail_after(60):
        async with Client(stdio_client(stdio, errlog=errlog), mode=mode, **CALLBACKS) as client:
            result = await client.call_tool("deploy", {"service": "api", "env": "prod"})
            assert text_of(result) == expected
    assert "Warning" not in errors.read_text()  # the keys came from the environment
    env = {**os.environ, "MRTR_TRIO_KEYS": key}
    with serving(tmp_path, env) as url, trio.fail_after(60):
        async with Client(url, mode=mode, **CALLBACKS) as client:
            result = await client.call_tool("deploy", {"service": "api", "env": "prod"})
            assert text_of(result) == expected


TYPESCRIPT_BLOCKS = [(p, b) for p in PAGES for b in blocks_of(p) if b.is_typescript]
PRINTS = re.compile(r"//\s*prints:\s*(.+?)\s*$", re.MULTILINE)
# Strips a TypeScript file's types, as Node does to run it, into an ES module file.
STRIP_TYPES = (
    "const m = require('node:module'), fs = require('node:fs');"
    "fs.writeFileSync(process.argv[2], m.stripTypeScriptTypes(fs.readFileSync(process.argv[1], 'utf8')))"
)


def test_the_typescript_client_is_covered() -> None:
    assert any(DOCUMENTED_URL in b.code for _, b in TYPESCRIPT_BLOCKS), "calling.md's client"


@pytest.mark.parametrize(
    ("page", "block"),
    TYPESCRIPT_BLOCKS,
    ids=[f"{page_id(p)}:{b.line}" for p, b in TYPESCRIPT_BLOCKS],
)
def test_every_typescript_block_parses_and_every_client_runs(
    page: Path, block: Block, tmp_path: Path
) -> None:
    node, _ = node_paths()
    source = tmp_path / "block.mts"
    source.write_text(block.code)
    stripped = subprocess.run(
        [str(node), "-e", STRIP_TYPES, str(source), str(tmp_path / "block.mjs")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert stripped.returncode == 0, f"{page_id(page)}:{block.line}:\n{stripped.stderr}"
    parsed = subprocess.run(
        [str(node), "--check", str(tmp_path / "block.mjs")], capture_output=True, text=True
    )
    assert parsed.returncode == 0, f"{page_id(page)}:{block.line}:\n{parsed.stderr}"
    if DOCUMENTED_URL not in block.code:
        return
    expected = PRINTS.findall(block.code)
    assert expected, f"{page_id(page)}:{block.line}: a client says what it prints"
    (tmp_path / "node_modules").symlink_to(installed_node_modules(), target_is_directory=True)
    env = {**os.environ, "MRTR_TRIO_KEYS": generate_key()}
    write_files(blocks_of(page), tmp_path, url=None)
    with serving(tmp_path, env) as url:
        (tmp_path / "client.mts").write_text(_at(block.code, url))
        run = subprocess.run(
            [str(node), "client.mts"], cwd=tmp_path, capture_output=True, text=True, timeout=60
        )
    assert run.returncode == 0, f"{page_id(page)}:{block.line}:\n{run.stdout}\n{run.stderr}"
    for text in expected:
        assert text in run.stdout, f"{page_id(page)}:{block.line}: {text!r} not in\n{run.stdout}"


def test_the_testing_page_imports_a_server_module_without_a_key_warning(tmp_path: Path) -> None:
    """testing.md's `shop` fixture, in a test run with no MRTR_TRIO_KEYS and `-W error`: the
    module's `App()` gets the test keys, so no EphemeralKeyWarning; importing the module at the
    top of a test file instead fails that run with the warning."""
    blocks = [b for b in blocks_of(ROOT / "docs" / "testing.md") if b.file]
    write_files(blocks, tmp_path, url=None)
    env = {k: v for k, v in fresh_shell().items() if k != "MRTR_TRIO_KEYS"}
    run = ["-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "error"]
    ran = python([*run, "test_shop.py"], tmp_path, env, timeout=120)
    assert ran.returncode == 0 and "1 passed" in ran.stdout, ran.stdout + ran.stderr
    (tmp_path / "test_shop_eager.py").write_text(
        "from shop import app\n\n\ndef test_x():\n    pass\n"
    )
    eager = python([*run, "test_shop_eager.py"], tmp_path, env, timeout=120)
    assert eager.returncode != 0 and "EphemeralKeyWarning" in eager.stdout, eager.stdout
