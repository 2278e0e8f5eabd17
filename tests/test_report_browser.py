"""The report opened in headless Chromium from file://, offline; the screenshot is kept as a test artifact."""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from harness.report import render_report

DATA = Path(__file__).parent / "data" / "report"
CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parent.parent / "reports" / "test-artifacts"

pytestmark = [pytest.mark.browser, pytest.mark.process]  # each test starts headless Chromium


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
    # Chromium parsed the whole page: the last section and the plots (4, and a roofline per machine) are in it
    assert 'id="notes"' in dom.stdout and dom.stdout.count('class="plot"') == 4 + 2

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


# -- the page as a reader sees it: Chromium driven over the DevTools protocol on a pipe (no extra packages) ----------
class Page:
    """One headless Chromium tab at an exact viewport, driven over `--remote-debugging-pipe` (fds 3 and 4): the
    report itself stays script-free, the measurements run in the tab."""

    def __init__(self, profile: Path) -> None:
        cmd_r, self._w = os.pipe()
        self._r, out_w = os.pipe()

        def child_fds() -> None:  # the pipe's ends become fds 3 (commands in) and 4 (replies out)
            a, b = os.dup(cmd_r), os.dup(out_w)
            os.dup2(a, 3)
            os.dup2(b, 4)

        self.proc = subprocess.Popen(
            [
                str(CHROMIUM),
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
                "--no-first-run",
                f"--user-data-dir={profile}",
                "--host-resolver-rules=MAP * ~NOTFOUND",
                "--proxy-server=http://127.0.0.1:9",
                "--remote-debugging-pipe",
                "about:blank",
            ],
            pass_fds=(3, 4),
            preexec_fn=child_fds,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(cmd_r)
        os.close(out_w)
        self._n, self._buf, self.session = 0, b"", None
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]

    def send(self, method: str, params: dict | None = None, timeout: float = 60.0) -> dict:
        self._n += 1
        msg = {"id": self._n, "method": method, "params": params or {}}
        if self.session:
            msg["sessionId"] = self.session
        os.write(self._w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            while b"\0" not in self._buf:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([self._r], [], [], left)[0]:
                    raise TimeoutError(f"chromium did not answer {method} in {timeout:.0f} s")
                chunk = os.read(self._r, 1 << 20)
                if not chunk:
                    raise RuntimeError(f"chromium closed the pipe during {method}")
                self._buf += chunk
            raw, self._buf = self._buf.split(b"\0", 1)
            reply = json.loads(raw)
            if reply.get("id") == self._n:
                assert "error" not in reply, (method, reply["error"])
                return reply["result"]

    def open(self, url: str, width: int, height: int) -> None:
        metrics = {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600}
        self.send("Emulation.setDeviceMetricsOverride", metrics)
        self.send("Page.navigate", {"url": url})
        deadline = time.monotonic() + 60
        while self.js("document.readyState") != "complete":
            assert time.monotonic() < deadline, f"{url} did not load"
            time.sleep(0.05)

    def js(self, expression: str):
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        assert "exceptionDetails" not in result, result
        return result["result"].get("value")

    def screenshot(self, path: Path) -> None:
        path.write_bytes(base64.b64decode(self.send("Page.captureScreenshot", {"format": "png"})["data"]))

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=30)
        os.close(self._w)
        os.close(self._r)


#: every table wider than the window or than the box it scrolls in: (class, its width, how far it overflows)
OVERFLOWING_TABLES = """(() => {
  const out = [];
  for (const t of document.querySelectorAll("table")) {
    const r = t.getBoundingClientRect(), box = t.closest(".wrap");
    const over = Math.max(r.right - innerWidth, box ? box.scrollWidth - box.clientWidth : 0);
    if (over > 0.5) out.push([t.className, Math.round(r.width), Math.round(over)]);
  }
  return out;
})()"""
FIRST_SCREEN = """(() => {
  const d = document.querySelector("#decision table.decision").getBoundingClientRect();
  const rows = [...document.querySelectorAll("#decision tr[data-key]")].map(tr => {
    const a = tr.querySelector("td.answer"), r = tr.getBoundingClientRect();
    return {key: tr.dataset.key, state: a.dataset.state, backends: a.dataset.backends, text: a.innerText,
            visible: r.top >= 0 && r.bottom <= innerHeight};
  });
  return {bottom: d.bottom, scrollY, height: innerHeight, rows};
})()"""


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    if not CHROMIUM.exists():
        pytest.skip("/usr/bin/chromium is absent (Debian package chromium)")
    p = Page(tmp_path_factory.mktemp("profile"))
    yield p
    p.close()


@pytest.fixture(scope="module")
def scenario_page(tmp_path_factory) -> str:
    from test_report_scenarios import scenario_run

    tmp = tmp_path_factory.mktemp("scenario")
    return render_report([scenario_run(tmp)], tmp / "reports").resolve().as_uri()


def test_first_screen_answers_every_use_case_without_scrolling(page, scenario_page):
    page.open(scenario_page, 1400, 900)
    first = page.js(FIRST_SCREEN)
    assert first["scrollY"] == 0 and first["height"] == 900
    assert first["bottom"] <= 900, f"the decision ends at {first['bottom']:.0f} px, below the fold"
    rows = {r["key"]: r for r in first["rows"]}
    for key in ("camera", "camera-capacity", "server", "offline", "lowest-memory", "mobile-embedded"):
        row = rows[key]
        assert row["visible"] and row["state"] in ("pick", "tied"), row
        assert all(b in row["text"] for b in row["backends"].split()), row  # the pick is named on screen
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(ARTIFACTS / "first-screen-1400x900.png")


def test_no_table_overflows_at_1400_px(page, scenario_page, tmp_path):
    two_machines = (
        render_report([DATA / "cpu_run", DATA / "gpu_run"], tmp_path / "reports").resolve().as_uri()
    )
    for url in (scenario_page, two_machines):
        page.open(url, 1400, 900)
        assert page.js("document.documentElement.scrollWidth") <= page.js("innerWidth")
        assert page.js(OVERFLOWING_TABLES) == [], url


def test_the_page_fits_a_phone_width(page, scenario_page):
    """At 390 px wide tables scroll inside their own box; the page itself does not scroll sideways."""
    page.open(scenario_page, 390, 844)
    assert page.js("innerWidth") == 390
    assert page.js("document.documentElement.scrollWidth") <= 390
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(ARTIFACTS / "first-screen-390x844.png")
