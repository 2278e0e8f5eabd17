"""Nothing leaves the machine at run time: a small real suite (one ONNX Runtime and one OpenVINO cell of yolo26n at
160, exports in isolated workers, the report and the history import included) makes no network attempt.

Two watchers, one run. A sitecustomize.py on PYTHONPATH (so in the suite's process and in every worker it starts)
replaces socket.socket and socket.getaddrinfo with versions that refuse, and record, any non-loopback attempt from
Python code (OpenVINO's telemetry is Python). Native code (ONNX Runtime's telemetry uploader is C++) does not go
through Python's socket module, so where strace can run, the suite also runs under `strace -f` and every connect
or send to a non-loopback address, from any process, is an attempt.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest

from tests.conftest import REPO

SITECUSTOMIZE = '''
"""Test watcher: refuse and record every non-loopback network attempt made through Python's socket module."""
import errno
import os
import socket

_LOG = os.environ["NO_NETWORK_LOG"]
_getaddrinfo = socket.getaddrinfo
_socket = socket.socket


def _loopback(host):
    if host is None:
        return True
    host = host.decode() if isinstance(host, bytes) else str(host)
    return host in ("", "localhost", "::1", "0.0.0.0", "::") or host.startswith("127.")


def _record(what, target):
    with open(_LOG, "a") as f:
        f.write(f"{os.getpid()} {what} {target!r}\\n")


def getaddrinfo(host, *args, **kwargs):
    if not _loopback(host):
        _record("getaddrinfo", host)
        raise socket.gaierror(socket.EAI_NONAME, "network blocked by the test")
    return _getaddrinfo(host, *args, **kwargs)


class GuardedSocket(_socket):
    def _check(self, what, address):
        if self.family in (socket.AF_INET, socket.AF_INET6) and not _loopback(address[0]):
            _record(what, address)
            raise OSError(errno.ENETUNREACH, "network blocked by the test")

    def connect(self, address):
        self._check("connect", address)
        return super().connect(address)

    def connect_ex(self, address):
        self._check("connect_ex", address)
        return super().connect_ex(address)

    def sendto(self, data, *args):
        self._check("sendto", args[-1])
        return super().sendto(data, *args)


socket.getaddrinfo = getaddrinfo
socket.socket = GuardedSocket
'''

# Every process, only the calls that reach an address; --seccomp-bpf: only those calls stop the traced process.
STRACE = ["strace", "-f", "-qq", "--seccomp-bpf", "-e", "trace=connect,sendto,sendmsg,sendmmsg"]
# strace lines: connect(5, {sa_family=AF_INET, sin_port=htons(53), sin_addr=inet_addr("10.0.0.1")}, 16) = 0
_ADDR = re.compile(r'sa_family=AF_INET6?, .*?(?:inet_addr\("([^"]+)"\)|inet_pton\(AF_INET6, "([^"]+)")')


def _non_loopback(strace_log: str) -> list[str]:
    hits = []
    for line in strace_log.splitlines():
        if not re.search(r"\b(connect|sendto|sendmsg|sendmmsg)\(", line):
            continue
        m = _ADDR.search(line)
        if m:
            addr = m.group(1) or m.group(2)
            if not (addr.startswith("127.") or addr in ("::1", "0.0.0.0", "::")):
                hits.append(line.strip())
    return hits


def _strace_works() -> str | None:
    """Why strace cannot watch the run here, or None."""
    if shutil.which("strace") is None:
        return "strace is not installed"
    p = subprocess.run([*STRACE, "-o", os.devnull, "true"], capture_output=True, text=True)
    return None if p.returncode == 0 else f"strace cannot trace here: {p.stderr.strip()[:200]}"


@pytest.fixture(scope="module")
def watched_run(tmp_path_factory):
    """The suite, watched; returns (process, python attempts, strace attempts or None, why no strace, work dir)."""
    tmp = tmp_path_factory.mktemp("no-network")
    site = tmp / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    py_log, strace_log = tmp / "python-attempts.log", tmp / "strace.log"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), str(REPO), env.get("PYTHONPATH")]))
    env["NO_NETWORK_LOG"] = str(py_log)
    for name in ("ORT_DISABLE_TELEMETRY", "YOLO_OFFLINE", "CI"):  # the harness must switch them itself
        env.pop(name, None)
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "suites/",
        "--benchmark-only",
        "--sizes",
        "n",
        "--backends",
        "onnxruntime,openvino",
        "--devices",
        "cpu",
        "--shapes",
        "160",
        "--max-time",
        "0.2",
        "--results-dir",
        str(tmp / "results"),
        "--cache-dir",
        str(tmp / "fresh-cache"),  # a fresh cache: the exports (OpenVINO's converter sends its events) run
        "--run-id",
        "offline",
        # LoadGen's scenarios and the end-to-end pairs call the same runtimes again as the timed rounds, which
        # are watched: the exports (fp32 and int8), load, runs, accuracy, report and history import stay
        "--scenarios",
        "none",
        "--no-e2e",
    ]
    no_strace = _strace_works()
    if no_strace is None:
        cmd = [*STRACE, "-o", str(strace_log), *cmd]
    p = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    python_hits = py_log.read_text().splitlines() if py_log.exists() else []
    native_hits = _non_loopback(strace_log.read_text()) if no_strace is None else None
    return p, python_hits, native_hits, no_strace, tmp


@pytest.mark.slow
@pytest.mark.export
def test_the_suite_ran_its_cells(watched_run):
    p, _, _, _, tmp = watched_run
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "4 ok" in p.stdout, p.stdout[-3000:]  # fp32 and int8 (the default profile's int8 block) of each
    assert (tmp / "results" / "reports" / "latest" / "index.html").is_file()  # reports follow --results-dir


@pytest.mark.slow
@pytest.mark.export
def test_no_network_attempt_from_python_code(watched_run):
    _, python_hits, _, _, _ = watched_run
    assert python_hits == [], "network attempts:\n" + "\n".join(python_hits)


@pytest.mark.slow
@pytest.mark.export
def test_no_network_attempt_from_native_code(watched_run):
    _, _, native_hits, no_strace, _ = watched_run
    if native_hits is None:
        pytest.skip(no_strace)
    assert native_hits == [], "network attempts:\n" + "\n".join(native_hits[:20])


@pytest.mark.process
def test_the_watcher_sees_an_attempt(tmp_path):
    """The other way: the watcher records an attempt and refuses it (so an empty log means none was made)."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    log = tmp_path / "attempts.log"
    env = dict(os.environ, PYTHONPATH=str(site), NO_NETWORK_LOG=str(log))
    code = "import urllib.request; urllib.request.urlopen('http://www.google-analytics.com', timeout=5)"
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode != 0 and "blocked by the test" in p.stderr
    assert "www.google-analytics.com" in log.read_text()
    assert _non_loopback(
        'connect(7, {sa_family=AF_INET, sin_port=htons(53), sin_addr=inet_addr("10.255.255.53")}, 16) = 0\n'
        'connect(8, {sa_family=AF_INET, sin_port=htons(80), sin_addr=inet_addr("127.0.0.1")}, 16) = 0\n'
    ) == ['connect(7, {sa_family=AF_INET, sin_port=htons(53), sin_addr=inet_addr("10.255.255.53")}, 16) = 0']
