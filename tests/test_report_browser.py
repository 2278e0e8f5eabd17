"""The report opened in headless Chromium from file://, offline; the screenshot is kept as a test artifact."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from harness.report import render_report

DATA = Path(__file__).parent / "data" / "report"
CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parent.parent / "reports" / "test-artifacts"

pytestmark = pytest.mark.browser


def chromium(*args: str, profile: Path) -> subprocess.CompletedProcess:
    cmd = [
        str(CHROMIUM),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        "--no-first-run",
        f"--user-data-dir={profile}",
        # offline: any network request would fail to resolve, so the page must need none
        "--host-resolver-rules=MAP * ~NOTFOUND",
        "--proxy-server=http://127.0.0.1:9",
        *args,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180)


@pytest.mark.skipif(not CHROMIUM.exists(), reason="/usr/bin/chromium is absent (Debian package chromium)")
def test_report_renders_in_headless_chromium(tmp_path):
    index = render_report([DATA / "cpu_run", DATA / "gpu_run"], tmp_path / "reports")
    url = index.resolve().as_uri()
    dom = chromium("--dump-dom", url, profile=tmp_path / "profile")
    assert dom.returncode == 0, dom.stderr[-2000:]
    # Chromium parsed the whole page: the last section and the plots are in its DOM
    assert 'id="notes"' in dom.stdout and dom.stdout.count('class="plot"') == 4

    shot = tmp_path / "report.png"
    res = chromium("--window-size=1400,2400", f"--screenshot={shot}", url, profile=tmp_path / "profile")
    assert res.returncode == 0 and shot.is_file(), res.stderr[-2000:]
    from PIL import Image

    with Image.open(shot) as im:
        assert im.size == (1400, 2400)
        colors = im.convert("RGB").getcolors(maxcolors=1 << 16)
    # a blank or error page has a handful of colours; the rendered report has text, badges and tables
    assert colors is None or len(colors) > 50
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(shot, ARTIFACTS / "report.png")
