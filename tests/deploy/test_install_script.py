"""scripts/install-system-deps.sh: valid shell, and a no-op when all is present."""

from __future__ import annotations

import shutil
from typing import Final

import pytest

from tests.deploy.support import ROOT, kustomize_command, run_tool, tool

INSTALL_SCRIPT: Final = ROOT / "scripts" / "install-system-deps.sh"
_BASH: Final = shutil.which("bash") or "/bin/bash"


class TestInstallScript:
    """scripts/install-system-deps.sh is valid shell and a no-op when all is present."""

    def test_shell_syntax(self) -> None:
        """`bash -n` accepts the script."""
        done = run_tool(_BASH, "-n", str(INSTALL_SCRIPT))
        assert done.returncode == 0, done.stderr

    def test_quiet_no_op_when_everything_is_installed(self) -> None:
        """With every tool present it exits 0 at once and prints nothing."""
        for name in ("prometheus", "promtool", "docker-compose"):
            tool(name)
        if kustomize_command() is None:
            pytest.skip("kustomize missing: the script would build it")
        done = run_tool(_BASH, str(INSTALL_SCRIPT))
        assert done.returncode == 0, done.stderr
        assert done.stdout == "" and done.stderr == ""

    def test_stack_mode_is_a_quiet_no_op_when_the_engine_is_there(self) -> None:
        """`--stack` (make stack-test) installs nothing when podman, its helpers and
        debootstrap are present."""
        for name in ("podman", "podman-compose", "runc", "catatonit", "debootstrap"):
            tool(name, "scripts/install-system-deps.sh --stack")
        if kustomize_command() is None:
            pytest.skip("kustomize missing: the script would build it")
        done = run_tool(_BASH, str(INSTALL_SCRIPT), "--stack")
        assert done.returncode == 0, done.stderr
        assert done.stdout == "" and done.stderr == ""

    def test_an_unknown_option_is_refused(self) -> None:
        """Exit 2 and a usage line, nothing installed."""
        done = run_tool(_BASH, str(INSTALL_SCRIPT), "--everything")
        assert done.returncode == 2
        assert "usage:" in done.stderr
