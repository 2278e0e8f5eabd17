"""The run's heap policy (harness.core.allocator): what `retain` changes, measured in fresh processes, and that
the choice is validated and recorded."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys

import pytest

from harness.core import allocator

# A fresh process under a policy: 12 rounds of a 48 MiB malloc written whole (as an activation is) and freed; the
# minor page faults of the last 8 rounds, per round. 48 MiB is above glibc's largest dynamic mmap threshold (32 MiB),
# so under the C library's defaults every round maps fresh pages from the kernel.
PROBE = """
import ctypes, json, resource
from harness.core import allocator
info = allocator.apply()
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
n = 48 * 2**20
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for i in range(12):
    if i == 4:
        f0 = faults()
    p = libc.malloc(n)
    ctypes.memset(p, 1, n)
    libc.free(p)
print(json.dumps({"faults_per_round": (faults() - f0) / 8, "info": info}))
"""


def _probe(policy: str) -> dict:
    env = dict(os.environ, **{allocator.ENV: policy})
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt thresholds are glibc's")
@pytest.mark.process
def test_retain_keeps_freed_memory_for_the_next_round_and_system_gives_it_back():
    retain, system = _probe("retain"), _probe("system")
    pages = 48 * 2**20 / 4096
    assert retain["info"]["applied"] is True and retain["info"]["policy"] == "retain"
    assert retain["info"]["settings"]["M_MMAP_THRESHOLD"] == allocator.MMAP_THRESHOLD
    assert retain["faults_per_round"] < 0.05 * pages, retain
    # the other way: the C library's defaults fault every page in again each round
    assert system["info"]["applied"] is False and "defaults" in system["info"]["reason"]
    assert system["faults_per_round"] > 0.5 * pages, system


def test_an_unknown_policy_is_one_line_naming_the_valid_ones():
    with pytest.raises(ValueError, match=r"--malloc: unknown 'jemalloc'; valid: retain, system"):
        allocator.parse("jemalloc")
    assert allocator.parse(" Retain ") == "retain"


@pytest.mark.process
def test_env_json_records_the_policy(tmp_path):
    from harness.core import envinfo
    from harness.measure import machine

    env = envinfo.collect("r1", facts=machine.facts())
    assert set(env["allocator"]) >= {"policy", "applied", "reason"}
