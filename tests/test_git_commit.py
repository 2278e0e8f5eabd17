"""env.json's git_commit names the project's own commit, never that of a repository the copy happens to sit in."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from harness.core.envinfo import KIT_COMMIT_ENV, git_commit_info

pytestmark = [
    pytest.mark.process,
    pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed"),
]


def _git(cwd, *args):
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(autouse=True)
def _no_kit_commit(monkeypatch):
    monkeypatch.delenv(KIT_COMMIT_ENV, raising=False)


@pytest.fixture
def outer(tmp_path):
    """A repository with one commit, holding a plain copy of the code (no .git of its own) in `copy/`."""
    _git(tmp_path, "init", "-q")
    (tmp_path / "a.txt").write_text("a")
    _git(tmp_path, "add", "a.txt")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "outer")
    copy = tmp_path / "copy"
    copy.mkdir()
    return tmp_path, copy


def test_the_projects_own_repository_gives_its_commit(outer):
    root, _ = outer
    commit, source = git_commit_info(root)
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True
    ).stdout.strip()
    assert commit == head and "project's repository" in source


def test_a_copy_inside_another_repository_is_null_with_the_reason(outer):
    root, copy = outer
    commit, why = git_commit_info(copy)
    assert commit is None  # not the outer repository's commit, which the old lookup climbed to
    assert "no git repository of its own" in why and str(root) in why


def test_the_kits_commit_comes_first(outer, monkeypatch):
    # on the H200 the copy carried a .git of the session's first commit: git alone named the wrong one
    root, _ = outer
    monkeypatch.setenv(KIT_COMMIT_ENV, "0123456789abcdef0123456789abcdef01234567-dirty")
    commit, source = git_commit_info(root)
    assert commit == "0123456789abcdef0123456789abcdef01234567-dirty" and "KIT_COMMIT" in source


def test_outside_any_repository_is_null_with_the_reason(tmp_path):
    commit, why = git_commit_info(tmp_path)
    assert commit is None and "not in a git repository" in why
