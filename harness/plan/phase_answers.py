"""Which of the scenario phase's answers a run cannot measure, known before any cell runs, so that the phase's price
(harness.plan.price.scenario_phase_price) leaves them out.

The scenario phase measures what the decision's answers show (harness.execute.scenario_phase): the camera's
single-stream, the cameras' capacity search, the server's rate, the offline sweep. Its price is the seconds a
reference run's phase took for the answers it measured (prices.yaml `scenario_phase_s`, `scenario_phase_answers`),
shared evenly over them; a run that cannot measure some of them is priced at the share of the others.

One rule, from the CPU quota (harness.core.cpu_quota): a CFS quota of q CPUs a period P lets a run's t threads
(t > q) run for q P / t of each period, then holds them for the rest, a stall of P (1 - q / t). A camera answer
needs a configuration whose single-stream p99 (one query in a hundred) meets the frame time. Where the stall is
longer than the frame, each query that meets a stall misses the frame, and a query of L ms meets one about L in
q P / t times: in a half-CPU quota at 100 ms periods and 1 thread, 9 ms queries (yolo26n at 320, the fastest CPU
cells measured) meet one 18 times in a hundred. So the camera and cameras answers are out of reach there: the
main job in a half-CPU quota on a 2-core AMD EPYC answered neither (docs/journal/2026-11-29-main-job-in-a-cpu-quota.md).
"""

from __future__ import annotations

from harness.core import cpu_quota

#: the answers a camera's frame time bounds
CAMERA_ANSWERS = ("camera", "camera-capacity")


def quota_stall_s(quota: cpu_quota.Quota, threads: int) -> float | None:
    """The seconds a quota holds `threads` threads each period once its allowance is spent (None: no quota, or no
    stall: the quota runs them all at once)."""
    if quota.cpus is None or not quota.period_us or threads <= quota.cpus:
        return None
    return quota.period_us / 1e6 * (1 - quota.cpus / threads)


def out_of_reach(camera_fps: float | None, threads: int, quota: cpu_quota.Quota) -> dict[str, str]:
    """The answers this run cannot measure, each with the reason in words (empty: all are in reach)."""
    if not camera_fps or camera_fps <= 0:
        return {}
    stall = quota_stall_s(quota, threads)
    frame_s = 1.0 / camera_fps
    if stall is None or stall <= frame_s:
        return {}
    why = (
        f"{quota.words()} holds {threads} thread(s) {stall * 1000:.0f} ms a period, longer than the "
        f"{frame_s * 1000:.1f} ms frame at {camera_fps:g} FPS: no single-stream p99 can meet it"
    )
    return dict.fromkeys(CAMERA_ANSWERS, why)


def for_this_run(camera_fps: float | None) -> dict[str, str]:
    """`out_of_reach` for this process: its thread budget and its CPU quota (harness.threads)."""
    from harness import threads

    return out_of_reach(camera_fps, threads.budget(), threads.quota())
