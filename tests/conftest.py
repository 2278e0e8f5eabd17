"""Shared fixtures for the harness's own tests: one export cache per test session, real yolo26n exports."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory) -> Path:
    """Export/checkpoint cache shared by every test of the session, so each real export happens once."""
    return tmp_path_factory.mktemp("bench-cache")
