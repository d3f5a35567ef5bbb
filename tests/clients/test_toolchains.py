"""A client whose toolchain is missing skips its tests on a developer's machine and fails them
under CI, where `make install` must have installed it (a green CI that skipped them would hide a
broken install step)."""

from __future__ import annotations

import pytest

from .conftest import missing


def test_a_missing_toolchain_skips_locally_and_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match=r"kcat is not installed \(apt-get install kcat"):
        missing("kcat", "apt-get install kcat")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI must have it"):
        missing("kcat", "apt-get install kcat")
