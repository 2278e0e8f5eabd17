"""The suite's options, validated before any work starts.

Each check raises SelectionError or WeightsError with one line for the user; the plugin turns it into pytest's
usage error (one `ERROR:` line, exit status 4), before any results directory, export or record exists.
"""

from __future__ import annotations

import sys
from pathlib import Path

from harness import threads
from harness.core import allocator, axes, numeric_options, run_id
from harness.core.axes import SelectionError
from harness.core.cli_args import OutputPathError, not_a_file, output_file, printable
from harness.core.results_dir import unwritable_reason
from harness.execute.config import DECISION
from harness.plan.matrix import PlannedCell, Selection, validate_backends
from harness.yolo.models import ModelSource, WeightsError, check_checkpoint

DEFAULT_RESULTS_DIR = "results"
DEFAULT_REPORTS_DIR = "reports"
#: the suite's numeric options, declared once (harness.core.numeric_options) and shared with `report`
NUMBER_RULES = numeric_options.SUITE


SCENARIO_MODES = (DECISION, "n640", "all", "none")
#: the scenario phase's seconds where --scenario-budget is not given (harness.execute.scenario_phase)
DEFAULT_SCENARIO_BUDGET_S = 240.0
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
    """--scenarios (validated): which cells run the scenarios; default all in the nightly profile, else decision
    (harness.execute.scenario_phase)."""
    value = opt("scenarios")
    if value is None:
        return "all" if profile == "nightly" else DECISION
    if value not in SCENARIO_MODES:
        raise SelectionError(f"--scenarios: unknown {value!r}; valid: {', '.join(SCENARIO_MODES)}")
    return value


def scenario_budget(value: float | None) -> float:
    """--scenario-budget (parsed by its number rule): the scenario phase's seconds, DEFAULT_SCENARIO_BUDGET_S when
    not given."""
    return DEFAULT_SCENARIO_BUDGET_S if value is None else float(value)


def scenario_durations(opt) -> str:
    """--scenario-durations (validated): LoadGen's durations, short (the default) or mlperf."""
    from harness.scenarios.settings import DURATIONS

    value = opt("scenario_durations") or "short"
    if value not in DURATIONS:
        raise SelectionError(f"--scenario-durations: unknown {value!r}; valid: {', '.join(DURATIONS)}")
    return value


def numbers(opt) -> dict[str, int | float | None]:
    """Every numeric option parsed and range-checked by its one declaration (`opt` is config.getoption): name ->
    value; one SelectionError line naming the first bad option."""
    out = {}
    for rule in NUMBER_RULES:
        try:
            out[rule.name] = rule.parse(opt(rule.name))
        except numeric_options.OptionValueError as e:
            raise SelectionError(str(e)) from None
    return out


def with_numbers(opt, parsed: dict):
    """`opt` that answers the numeric options with their parsed values (the command line holds their text)."""
    return lambda name: parsed[name] if name in parsed else opt(name)


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
        families=axes.parse_families(opt("families")),
    )


def thread_budget(opt) -> tuple[int, str]:
    """--threads (validated), or the machine's physical cores; with where the number came from."""
    if opt("threads") is None:
        return threads.physical_cores(), threads.default_source()
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
    if Path(results_dir) == Path(DEFAULT_RESULTS_DIR):
        return Path(DEFAULT_REPORTS_DIR)
    return results_dir / DEFAULT_REPORTS_DIR


def check_writable(path: Path, option: str) -> None:
    """`path` exists as a writable directory, or can be created: its nearest existing ancestor is one. A store the
    run adds to (results, reports, the export cache), not a file it replaces: a link to an existing directory is
    followed (results on a bigger disk), but a link to nothing, above the path or the path itself, is refused (the
    directory could not be created there), as is a name that is empty, holds a NUL byte or cannot be looked up."""
    text = str(path)
    shown = printable(text if len(text) <= 200 else text[:200] + "...")
    if not text or "\0" in text:
        raise SelectionError(f"{option} {text[:200]!r}: not a usable path (empty, or holding a NUL byte)")
    try:
        probe = Path(path)
        while not probe.exists():
            if probe.is_symlink():
                raise SelectionError(
                    f"{option} {shown}: {printable(str(probe))} is a symbolic link to nothing"
                )
            probe = probe.parent
        why = unwritable_reason(path)
    except OSError as e:  # a name too long, a loop of links
        raise SelectionError(f"{option} {shown}: cannot be checked ({e.strerror or e})") from None
    if why and why[1] == "not writable":
        raise SelectionError(f"{option} {shown} is not writable")
    if why:
        raise SelectionError(f"{option} {shown}: {printable(str(why[0]))} is {why[1]}")


def expected_file(opt) -> Path:
    """--expected-file; with --update-expected, which rewrites it whole at the end of the run, checked as every
    `-o` is (harness.core.cli_args.output_file: not a symbolic link, not a directory, its directory existing and
    writable) before any work, so hours of cells never end in a file that cannot be written."""
    text = str(opt("expected_file"))
    if opt("update_expected"):
        try:
            return output_file(text, "--expected-file")
        except OutputPathError as e:
            raise SelectionError(printable(str(e))) from None
    return Path(text)


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


#: the most bytes a --data file may have: a dataset YAML is a few lines (ultralytics' coco.yaml: 2.6 kB)
MAX_DATASET_YAML_BYTES = 2**20


def dataset_problem(path: Path) -> str | None:
    """What is wrong with a dataset YAML for accuracy and calibration, or None."""
    import codecs

    import yaml

    from harness.yolo.dataset import split_images

    why = not_a_file(path)  # a directory or a FIFO is named as what it is, never "no such file"
    if why is not None:
        return "no such file" if why == "does not exist" else why
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_DATASET_YAML_BYTES + 1)
    except OSError as e:
        return f"cannot be read ({e.strerror or e})"
    whole = len(data) <= MAX_DATASET_YAML_BYTES
    try:  # an image, an archive, a checkpoint given by mistake is named so, whatever its size
        text = codecs.getincrementaldecoder("utf-8")().decode(data[:MAX_DATASET_YAML_BYTES], final=whole)
    except UnicodeDecodeError as e:
        return f"not a text file (byte 0x{data[e.start]:02x} at offset {e.start} is not UTF-8): not a dataset YAML"
    if not whole:
        return f"is over {MAX_DATASET_YAML_BYTES // 2**20} MiB: not a dataset YAML"
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:
        return f"not readable YAML ({type(e).__name__}: {str(e).splitlines()[0]})"
    if not isinstance(doc, dict) or "val" not in doc or "names" not in doc:
        return "not an ultralytics dataset YAML (needs `val` and `names`)"
    try:
        images = split_images(path, "val")
    except (OSError, KeyError, TypeError, ValueError) as e:  # TypeError: a `val` or `path` that is no path
        return f"its val split cannot be read ({e})"
    if not images:
        return "its val split has no images"
    return None


def use_standin(no_standin: bool, planned: list[PlannedCell]) -> bool:
    """Whether yolo26n runs on the committed stand-in weights: unless --no-standin, and unless the run pairs the
    model families (--families, the families profile). Such a run builds YOLO26 as it builds YOLO11, from the YAML
    with the seed and COCO's 80 classes: the stand-in's 5 classes would make YOLO26's head lighter than the head it
    is compared with."""
    return not no_standin and all(p.cell.family == axes.DEFAULT_FAMILY for p in planned)


def check_weights(planned: list[PlannedCell], weights: Path | None, allow_unsafe: bool) -> None:
    """Every weights file this run needs exists, is readable and loads as an ultralytics checkpoint (safely,
    unless --allow-unsafe-weights) before any work."""
    if weights is None:
        return
    models = {(p.cell.family, p.cell.size, p.cell.task) for p in planned if not p.excluded}
    for family, size, task in sorted(models):
        src = ModelSource(size, task, weights, family=family)
        src.check()
        check_checkpoint(src.weights_file(), allow_unsafe=allow_unsafe)


def add_report_options(group) -> None:
    """The decision options the run forwards to the report it renders; `python -m harness report RUN` takes the
    same ones to decide again from the records (--server-bound-ms is the scenario's own option, forwarded too)."""
    # numeric options are declared as text (no `type=`) and parsed by their declaration in `numbers`: a bad
    # value is one `ERROR:` line naming the option, not argparse's usage block
    group.addoption(
        "--camera-fps",
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
    group.addoption("--memory-cap", help="report: pick only configurations within this host peak MiB")
    group.addoption("--min-shape", help="report: pick only configurations whose smaller side is >= PX")
    group.addoption(
        "--headroom", default=1.0, help="report: keep each latency figure within this share of its bound"
    )


def report_constraints(opt):
    """The report's constraints from the run's options (`opt` answering the parsed numbers, `with_numbers`); one
    SelectionError line on a bad --accuracy-floor."""
    from harness.decide.picks import Constraints
    from harness.report.cli import accuracy_floors

    try:
        floors = accuracy_floors(opt("accuracy_floor") or [])
    except ValueError as e:
        raise SelectionError(str(e)) from e
    return Constraints(
        floors,
        opt("memory_cap"),
        opt("camera_fps"),
        opt("server_bound_ms"),
        opt("min_shape"),
        opt("headroom"),
    )
