"""The suite's options, validated before any work starts.

Each check raises SelectionError or WeightsError with one line for the user; the plugin turns it into pytest's
usage error (one `ERROR:` line, exit status 4), before any results directory, export or record exists.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from pathlib import Path

from harness import threads
from harness.core import allocator, axes, run_id
from harness.core.axes import SelectionError
from harness.core.results_dir import unwritable_reason
from harness.plan.matrix import PlannedCell, Selection, validate_backends
from harness.yolo.models import ModelSource, WeightsError, check_checkpoint

DEFAULT_RESULTS_DIR = "results"
DEFAULT_REPORTS_DIR = "reports"
#: the random-init seed seeds torch's generator; kept to numpy's range so any seeding library accepts it
MAX_SEED = 2**32 - 1


@dataclass(frozen=True)
class NumberRule:
    """A numeric option's valid range: above (or at least) `low`, at most `high`; never NaN or infinite."""

    name: str
    low: float
    strict: bool  # value must be > low (else >= low)
    high: float | None = None

    def check(self, value: float | None) -> None:
        if value is None:
            return
        above = value > self.low if self.strict else value >= self.low
        if not math.isfinite(value) or not above or (self.high is not None and value > self.high):
            want = f"{'>' if self.strict else '>='} {_number(self.low)}"
            if self.high is not None:
                want += f" and <= {_number(self.high)}"
            raise SelectionError(f"--{self.name.replace('_', '-')}: {value} is out of range (must be {want})")


def _number(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


NUMBER_RULES = (
    NumberRule("export_timeout", 0, strict=True),
    NumberRule("export_memory_gb", 0, strict=True),
    NumberRule("max_time", 0, strict=True),
    NumberRule("export_workers", 1, strict=False, high=256),
    NumberRule("warmup", 0, strict=False),
    NumberRule("rounds", 1, strict=False),
    NumberRule("timing_episodes", 1, strict=False, high=20),
    NumberRule("accuracy_images", 1, strict=False, high=100_000),
    NumberRule("seed", 0, strict=False, high=MAX_SEED),
    NumberRule("server_bound_ms", 0, strict=True, high=3_600_000),
    NumberRule("camera_fps", 0, strict=True, high=10_000),
    NumberRule("memory_cap", 0, strict=True),
    NumberRule("min_shape", axes.MIN_SIDE, strict=False, high=axes.MAX_SIDE),
)

SCENARIO_MODES = ("screen", "n640", "all", "none")
#: planned cells past which the run says how many it plans (a long --shapes list multiplies every axis)
LARGE_PLAN = 500


def warn_if_large(planned: list[PlannedCell], limit: int = LARGE_PLAN) -> str | None:
    """A warning on stderr (returned too) when the selection plans more than `limit` cells: a 2000-shape list is
    4000 cells, days of exports, and should not start without a word."""
    if len(planned) <= limit:
        return None
    runnable = sum(1 for p in planned if not p.excluded)
    shapes = len({p.cell.shape.label for p in planned})
    msg = (
        f"yolo26-bench: warning: this selection plans {len(planned)} cells ({runnable} not excluded, {shapes} "
        f"shapes), more than {limit}; narrow --shapes/--sizes/--backends, or check the count with --collect-only -q"
    )
    print(msg, file=sys.stderr, flush=True)
    return msg


def scenario_mode(opt, profile: str) -> str:
    """--scenarios (validated): which cells run the scenarios; default all in the nightly profile, else screen."""
    value = opt("scenarios")
    if value is None:
        return "all" if profile == "nightly" else "screen"
    if value not in SCENARIO_MODES:
        raise SelectionError(f"--scenarios: unknown {value!r}; valid: {', '.join(SCENARIO_MODES)}")
    return value


def scenario_durations(opt) -> str:
    """--scenario-durations (validated): LoadGen's durations, short (the default) or mlperf."""
    from harness.scenarios.settings import DURATIONS

    value = opt("scenario_durations") or "short"
    if value not in DURATIONS:
        raise SelectionError(f"--scenario-durations: unknown {value!r}; valid: {', '.join(DURATIONS)}")
    return value


def check_numbers(opt) -> None:
    """Range-check every numeric option (`opt` is config.getoption)."""
    for rule in NUMBER_RULES:
        rule.check(opt(rule.name))


def selection(opt, backend_names: tuple[str, ...], devices: tuple[str, ...]) -> Selection:
    """The axes the command line selects; shapes and batches bounded unless --force-shapes."""
    backends = axes.parse_list(opt("backends"), backend_names, "backends")
    validate_backends(backends)
    force = bool(opt("force_shapes"))
    return Selection(
        sizes=axes.parse_list(opt("sizes"), axes.SIZES, "sizes"),
        tasks=axes.parse_list(opt("tasks"), axes.TASKS, "tasks"),
        heads=axes.parse_list(opt("heads"), axes.HEADS, "heads"),
        backends=backends,
        devices=axes.parse_list(opt("devices"), devices, "devices"),
        shapes=axes.parse_shapes(opt("shapes"), force=force),
        batches=axes.parse_batches(opt("batches"), force=force),
        precisions=axes.parse_list(opt("precisions"), axes.PRECISIONS, "precisions"),
    )


def thread_budget(opt) -> tuple[int, str]:
    """--threads (validated), or the machine's physical cores; with where the number came from."""
    if opt("threads") is None:
        return threads.physical_cores(), threads.DEFAULT_SOURCE
    try:
        return threads.parse(opt("threads")), "--threads"
    except ValueError as e:
        raise SelectionError(str(e)) from None


def malloc_policy(opt) -> str:
    """--malloc (validated): the heap policy of the run's processes (harness.core.allocator)."""
    try:
        return allocator.parse(opt("malloc") or allocator.DEFAULT)
    except ValueError as e:
        raise SelectionError(str(e)) from None


def the_run_id(opt) -> str:
    """--run-id, which must be a safe directory name, or the default (timestamp and host)."""
    text = opt("run_id")
    if text is None:
        return run_id.default()
    try:
        return run_id.check(text)
    except run_id.RunIdError as e:
        raise SelectionError(str(e)) from None


def reports_dir(opt, results_dir: Path) -> Path:
    """--reports-dir; by default `reports/` beside the default results dir, else <results-dir>/reports."""
    if opt("reports_dir"):
        return Path(opt("reports_dir"))
    if Path(opt("results_dir")) == Path(DEFAULT_RESULTS_DIR):
        return Path(DEFAULT_REPORTS_DIR)
    return results_dir / DEFAULT_REPORTS_DIR


def check_writable(path: Path, option: str) -> None:
    """`path` exists as a writable directory, or can be created: its nearest existing ancestor is one."""
    why = unwritable_reason(path)
    if why and why[1] == "not writable":
        raise SelectionError(f"{option} {path} is not writable")
    if why:
        raise SelectionError(f"{option} {path}: {why[0]} is {why[1]}")


def weights_dir(opt) -> Path | None:
    path = Path(opt("weights_dir")) if opt("weights_dir") else None
    if path is not None and not path.is_dir():
        raise WeightsError(f"--weights-dir {path} is not a directory")
    return path


def dataset(opt) -> Path | None:
    """--data: a dataset YAML in the ultralytics layout whose val split has images and labels; one error line
    otherwise."""
    if not opt("data"):
        return None
    path = Path(opt("data"))
    why = dataset_problem(path)
    if why:
        raise SelectionError(f"--data {path}: {why}")
    return path.resolve()


def dataset_problem(path: Path) -> str | None:
    """What is wrong with a dataset YAML for accuracy and calibration, or None."""
    import yaml

    from harness.yolo.dataset import split_images

    if not path.is_file():
        return "no such file"
    try:
        doc = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as e:
        return f"not readable YAML ({type(e).__name__}: {str(e).splitlines()[0]})"
    if not isinstance(doc, dict) or "val" not in doc or "names" not in doc:
        return "not an ultralytics dataset YAML (needs `val` and `names`)"
    try:
        images = split_images(path, "val")
    except (OSError, KeyError) as e:
        return f"its val split cannot be read ({e})"
    if not images:
        return "its val split has no images"
    return None


def check_weights(planned: list[PlannedCell], weights: Path | None, allow_unsafe: bool) -> None:
    """Every weights file this run needs exists, is readable and loads as an ultralytics checkpoint (safely,
    unless --allow-unsafe-weights) before any work."""
    if weights is None:
        return
    for size, task in sorted({(p.cell.size, p.cell.task) for p in planned if not p.excluded}):
        src = ModelSource(size, task, weights)
        src.check()
        check_checkpoint(src.weights_file(), allow_unsafe=allow_unsafe)


def add_report_options(group) -> None:
    """The decision options the run forwards to the report it renders; `python -m harness report RUN` takes the
    same ones to decide again from the records (--server-bound-ms is the scenario's own option, forwarded too)."""
    group.addoption(
        "--camera-fps",
        type=float,
        default=30.0,
        help="the camera use cases' frame rate: how many cameras each scenario cell serves at it (a search over "
        "LoadGen MultiStream runs), and the report's camera frame time (default 30)",
    )
    group.addoption(
        "--accuracy-floor",
        action="append",
        default=[],
        metavar="PRECISION=SHARE",
        help="report: share of the fp32 reference's mAP50-95 a pick must keep (default fp32=0.99 fp16=0.99 "
        "int8=0.95); repeatable",
    )
    group.addoption(
        "--memory-cap", type=float, help="report: pick only configurations within this host peak MiB"
    )
    group.addoption(
        "--min-shape", type=int, help="report: pick only configurations whose smaller side is >= PX"
    )


def report_constraints(opt):
    """The report's constraints from the run's options (after check_numbers); one SelectionError line on a bad
    --accuracy-floor."""
    from harness.decide.picks import Constraints
    from harness.report.cli import accuracy_floors

    try:
        floors = accuracy_floors(opt("accuracy_floor") or [])
    except ValueError as e:
        raise SelectionError(str(e)) from e
    return Constraints(floors, opt("memory_cap"), opt("camera_fps"), opt("server_bound_ms"), opt("min_shape"))
