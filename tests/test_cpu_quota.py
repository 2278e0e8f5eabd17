"""The cgroup CPU quota as harness.core.cpu_quota reads it, on cgroup v1 and v2 trees laid out in a temporary
directory (a quota, none, nested limits, a fractional one, a container's own mount), its throttle counters, and the
thread budget harness.threads takes from it: what a `docker run --cpus=N` or a Kubernetes CPU limit gives a process
while `os.cpu_count()` and the affinity mask show every core of the host."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import threads
from harness.core import cpu_quota
from harness.core.cpu_quota import Quota

V2_MOUNT = "30 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw\n"
V1_CPU_MOUNT = "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
V1_MEMORY_MOUNT = "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
HYBRID_UNIFIED = "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n"


def tree(root: Path, proc_cgroup: str, mountinfo: str, files: dict[str, str]) -> Path:
    """A fake machine under `root`: /proc/self/cgroup, /proc/self/mountinfo and the cgroup files."""
    for rel, text in {"proc/self/cgroup": proc_cgroup, "proc/self/mountinfo": mountinfo, **files}.items():
        path = root / rel.lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def v2_stat(periods: int, throttled: int, usec: int) -> str:
    return f"usage_usec 1\nuser_usec 1\nsystem_usec 0\nnr_periods {periods}\nnr_throttled {throttled}\nthrottled_usec {usec}\n"


def v1_stat(periods: int, throttled: int, ns: int) -> str:
    return f"nr_periods {periods}\nnr_throttled {throttled}\nthrottled_time {ns}\nnr_bursts 0\nburst_time 0\n"


# -- cgroup v2 -----------------------------------------------------------------------------------------------------
def test_v2_quota_of_the_process_cgroup(tmp_path):
    g = "/sys/fs/cgroup/kubepods/pod1/c1"
    root = tree(tmp_path, "0::/kubepods/pod1/c1\n", V2_MOUNT,
                {f"{g}/cpu.max": "50000 100000\n", f"{g}/cpu.stat": v2_stat(40, 31, 2_500_000),
                 "/sys/fs/cgroup/kubepods/pod1/cpu.max": "max 100000\n",
                 "/sys/fs/cgroup/kubepods/cpu.max": "max 100000\n"})  # fmt: skip
    q = cpu_quota.read_quota(root)
    assert (q.cpus, q.quota_us, q.period_us, q.version) == (0.5, 50000, 100000, 2)
    assert q.source == f"{g}/cpu.max" and q.cgroup == "/kubepods/pod1/c1" and q.directory == g
    assert q.whole_cpus == 1  # half a CPU still runs one thread
    assert cpu_quota.throttle(q, root) == {"nr_periods": 40, "nr_throttled": 31, "throttled_s": 2.5}
    env = q.to_env()
    assert env["cpus"] == 0.5 and env["source"] == q.source and env["cgroup"] == "/kubepods/pod1/c1"
    assert "reason" not in env and "0.5 CPU" in q.words()


def test_v2_max_everywhere_is_no_quota(tmp_path):
    g = "/sys/fs/cgroup/user.slice/session"
    root = tree(tmp_path, "0::/user.slice/session\n", V2_MOUNT,
                {f"{g}/cpu.max": "max 100000\n", "/sys/fs/cgroup/user.slice/cpu.max": "max 100000\n"})  # fmt: skip
    q = cpu_quota.read_quota(root)
    assert q.cpus is None and q.whole_cpus is None and q.stat_file is None
    assert "cpu.max is 'max'" in q.reason and q.to_env()["reason"] == q.reason
    assert cpu_quota.throttle(q, root) is None


def test_v2_nested_the_fewest_cpus_bind_at_any_level(tmp_path):
    g = "/sys/fs/cgroup/a/b/c"
    files = {f"{g}/cpu.max": "max 100000\n", "/sys/fs/cgroup/a/b/cpu.max": "150000 100000\n",
             "/sys/fs/cgroup/a/cpu.max": "400000 100000\n", "/sys/fs/cgroup/a/b/cpu.stat": v2_stat(9, 2, 10)}  # fmt: skip
    q = cpu_quota.read_quota(tree(tmp_path / "parent", "0::/a/b/c\n", V2_MOUNT, files))
    assert q.cpus == 1.5 and q.source == "/sys/fs/cgroup/a/b/cpu.max"
    assert q.stat_file == "/sys/fs/cgroup/a/b/cpu.stat" and len(q.levels) == 3
    # the other way: the leaf's own limit is the tighter one, so it binds
    files[f"{g}/cpu.max"] = "100000 100000\n"
    q = cpu_quota.read_quota(tree(tmp_path / "leaf", "0::/a/b/c\n", V2_MOUNT, files))
    assert q.cpus == 1.0 and q.source == f"{g}/cpu.max"


def test_v2_fractional_quota_rounds_down_to_whole_cpus(tmp_path):
    g = "/sys/fs/cgroup/ci/job"
    q = cpu_quota.read_quota(tree(tmp_path, "0::/ci/job\n", V2_MOUNT, {f"{g}/cpu.max": "250000 100000\n"}))
    assert q.cpus == 2.5 and q.whole_cpus == 2
    q = cpu_quota.read_quota(
        tree(tmp_path / "b", "0::/ci/job\n", V2_MOUNT, {f"{g}/cpu.max": "20000 50000\n"})
    )
    assert q.cpus == 0.4 and q.whole_cpus == 1 and q.period_us == 50000


def test_v2_inside_a_cgroup_namespace_the_mount_is_the_process_own(tmp_path):
    # docker on cgroup v2: /proc/self/cgroup says "0::/", the container's cgroup is mounted at /sys/fs/cgroup
    q = cpu_quota.read_quota(
        tree(tmp_path, "0::/\n", V2_MOUNT, {"/sys/fs/cgroup/cpu.max": "200000 100000\n"})
    )
    assert q.cpus == 2.0 and q.directory == "/sys/fs/cgroup"


# -- cgroup v1 -----------------------------------------------------------------------------------------------------
def test_v1_quota_in_a_container_whose_mount_root_is_its_own_cgroup(tmp_path):
    mount = "1120 1119 0:29 /docker/abc /sys/fs/cgroup/cpu,cpuacct ro,nosuid - cgroup cgroup rw,cpu,cpuacct\n"
    d = "/sys/fs/cgroup/cpu,cpuacct"
    root = tree(tmp_path, "12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n", mount + V1_MEMORY_MOUNT,
                {f"{d}/cpu.cfs_quota_us": "150000\n", f"{d}/cpu.cfs_period_us": "100000\n",
                 f"{d}/cpu.stat": v1_stat(120, 80, 3_000_000_000)})  # fmt: skip
    q = cpu_quota.read_quota(root)
    assert (q.cpus, q.version, q.directory, q.whole_cpus) == (1.5, 1, d, 1)
    assert q.source == f"{d}/cpu.cfs_quota_us" and q.cgroup == "/docker/abc"
    assert cpu_quota.throttle(q, root) == {"nr_periods": 120, "nr_throttled": 80, "throttled_s": 3.0}


def test_v1_minus_one_is_no_quota(tmp_path):
    d = "/sys/fs/cgroup/cpu/job"
    root = tree(tmp_path, "3:cpu:/job\n", V1_CPU_MOUNT,
                {f"{d}/cpu.cfs_quota_us": "-1\n", f"{d}/cpu.cfs_period_us": "100000\n",
                 "/sys/fs/cgroup/cpu/cpu.cfs_quota_us": "-1\n", "/sys/fs/cgroup/cpu/cpu.cfs_period_us": "100000\n"})  # fmt: skip
    q = cpu_quota.read_quota(root)
    assert q.cpus is None and "cpu.cfs_quota_us is -1" in q.reason and q.version == 1


def test_v1_nested_limit_above_the_process_cgroup_binds(tmp_path):
    base = "/sys/fs/cgroup/cpu"
    files = {f"{base}/a/b/cpu.cfs_quota_us": "-1\n", f"{base}/a/b/cpu.cfs_period_us": "100000\n",
             f"{base}/a/cpu.cfs_quota_us": "50000\n", f"{base}/a/cpu.cfs_period_us": "100000\n",
             f"{base}/cpu.cfs_quota_us": "-1\n", f"{base}/cpu.cfs_period_us": "100000\n",
             f"{base}/a/cpu.stat": v1_stat(5, 5, 250_000_000)}  # fmt: skip
    root = tree(tmp_path, "3:cpu:/a/b\n", V1_CPU_MOUNT + HYBRID_UNIFIED, files)
    q = cpu_quota.read_quota(root)
    assert q.cpus == 0.5 and q.source == f"{base}/a/cpu.cfs_quota_us" and q.stat_file == f"{base}/a/cpu.stat"
    assert [lv.path for lv in q.levels] == [f"{base}/a/b", f"{base}/a", base]  # up to the mount, no further
    assert cpu_quota.throttle(q, root)["throttled_s"] == 0.25


def test_v1_fractional_quota(tmp_path):
    d = "/sys/fs/cgroup/cpu/x"
    q = cpu_quota.read_quota(tree(tmp_path, "3:cpu:/x\n", V1_CPU_MOUNT,
                                  {f"{d}/cpu.cfs_quota_us": "350000\n", f"{d}/cpu.cfs_period_us": "100000\n"}))  # fmt: skip
    assert q.cpus == 3.5 and q.whole_cpus == 3


def test_no_cgroups_or_no_cpu_controller_is_no_quota_with_the_reason(tmp_path):
    q = cpu_quota.read_quota(tmp_path / "nothing")
    assert q.cpus is None and "/proc/self/cgroup" in q.reason
    q = cpu_quota.read_quota(tree(tmp_path / "mem", "12:memory:/x\n", V1_MEMORY_MOUNT, {}))
    assert q.cpus is None and "no cgroup cpu controller" in q.reason


# -- the counters over a run ---------------------------------------------------------------------------------------
def test_throttle_counters_at_the_start_and_end_of_a_run(tmp_path):
    g = "/sys/fs/cgroup/job"
    root = tree(tmp_path, "0::/job\n", V2_MOUNT, {f"{g}/cpu.max": "100000 100000\n", f"{g}/cpu.stat": v2_stat(10, 1, 5000)})  # fmt: skip
    q = cpu_quota.read_quota(root)
    env = {cpu_quota.ENV_KEY: cpu_quota.env_at_start(q, root)}
    (root / g.lstrip("/") / "cpu.stat").write_text(v2_stat(110, 41, 805_000))
    cpu_quota.env_at_end(env, root)
    section = env[cpu_quota.ENV_KEY]
    assert section["start"]["nr_periods"] == 10 and section["end"]["nr_periods"] == 110
    assert section["during_run"] == {"periods": 100, "throttled": 40, "throttled_s": 0.8}
    # the other way: a run without a quota has nothing to count, and says why
    none = cpu_quota.env_at_start(Quota(None, reason="no quota"), root)
    assert none["start"] is None and "nothing throttles" in none["reason"]
    env = {cpu_quota.ENV_KEY: none}
    cpu_quota.env_at_end(env, root)
    assert env[cpu_quota.ENV_KEY]["end"] is None and "during_run" not in env[cpu_quota.ENV_KEY]


# -- the thread budget ---------------------------------------------------------------------------------------------
@pytest.fixture
def big_host(monkeypatch):
    """A 64-core host (32 physical) as psutil and the affinity mask show it, whatever this machine is."""
    import psutil

    monkeypatch.setattr(psutil, "cpu_count", lambda logical=True: 64 if logical else 32)
    monkeypatch.setattr(threads, "affinity_cpus", lambda: 64)


@pytest.mark.parametrize(("cpus", "expected"), [(4.0, 4), (1.5, 1), (0.5, 1), (None, 32), (100.0, 32)])
def test_default_threads_are_the_physical_cores_within_the_quota(big_host, cpus, expected):
    q = Quota(cpus, reason=None if cpus else "no quota")
    assert threads.physical_cores(q) == expected
    binds = cpus is not None and cpus < 32
    assert ("within the cgroup CPU quota" in threads.default_source(q)) == binds
    budget, bound = threads.cpu_budget(q)
    assert bound == ("cgroup CPU quota" if cpus is not None and cpus < 64 else "affinity mask")
    assert budget == (cpus if bound == "cgroup CPU quota" else 64)


def test_env_json_threads_say_the_cpu_budget_and_threads_over_the_quota(big_host, monkeypatch):
    monkeypatch.setattr(threads, "quota", lambda: Quota(4.0, 400000, 100000, "/x/cpu.max", version=2))
    info = threads.info(4, "physical cores within the cgroup CPU quota of 4 CPU (default)")
    assert info["cpu_budget"] == 4.0 and info["cpu_budget_bound_by"] == "cgroup CPU quota"
    assert "over_quota" not in info
    info = threads.info(2, "--threads")  # --threads below the quota: the thread budget binds
    assert info["cpu_budget"] == 2.0 and info["cpu_budget_bound_by"] == "the thread budget"
    info = threads.info(32, "--threads")  # the other way: more threads than the quota runs at once
    assert "32 threads in a cgroup v2 CPU quota of 4 CPU" in info["over_quota"]
