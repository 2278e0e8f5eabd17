"""What every `yolo26-bench` command does with its arguments: one parser class and one check of output paths.

- `Parser`: argparse with the console script's name in `usage:` (`yolo26-bench report ...`; `python -m harness
  report ...` when run so) and every error one
  line (`yolo26-bench report: error: argument --camera-fps: inf is out of range (...)`), exit status 2, before
  the command does any work.
- `input_file` / `database_file`: a file read (or a database opened) is a regular file, never a FIFO that would
  block the read.
- `output_file` / `output_dir`: an `-o` (or `--json`, `--markdown`, ...) checked before any work: not a symbolic
  link, not an existing path of the wrong kind, its parent (a file's) or nearest existing ancestor (a directory's,
  which is created with its parents) a writable directory, no NUL or empty name.
- `guarded_stdout`: every command's standard output checked: a reader gone (`| head -1`) ends it quietly, any other
  write error (`> /dev/full`, a full disk) is one line and exit status 2.
"""

from __future__ import annotations

import argparse
import os
import stat
import sys
from pathlib import Path

#: the console script's name ([project.scripts] in pyproject.toml)
SCRIPT = "yolo26-bench"


def printable(text: str) -> str:
    """`text` on one line: every character a terminal or `splitlines` could break on (newline, carriage return,
    the record and unit separators, ...) or would not show, escaped as Python writes it."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def prog_name() -> str:
    """How this process was called: the console script's name, or `python -m harness`."""
    return SCRIPT if Path(sys.argv[0]).name == SCRIPT else "python -m harness"


class Parser(argparse.ArgumentParser):
    """argparse for a command: `prog` is `yolo26-bench COMMAND` (`python -m harness COMMAND` when called so); an
    error is one line on stderr."""

    def __init__(self, command: str, **kw) -> None:
        super().__init__(prog=f"{prog_name()} {command}", **kw)

    def parse(self, argv: list[str] | None) -> argparse.Namespace | int:
        """The arguments, or the exit status when parsing ended the command (`--help`: 0; an error, already
        printed as one line: 2), so each command's `main` returns its status rather than raising SystemExit."""
        try:
            self._refuse_dashes(sys.argv[1:] if argv is None else argv)
            return self.parse_args(argv)
        except SystemExit as e:
            return e.code if isinstance(e.code, int) else 2

    def _refuse_dashes(self, argv: list[str]) -> None:
        """`--camera-fps=--`: argparse (before Python 3.12) drops a value of `--` and takes the option's default
        silently; an option's value is never `--`."""
        for arg in argv:
            flag, eq, value = arg.partition("=")
            if eq and value == "--" and flag in self._option_string_actions:
                self.error(f"argument {flag}: expected one argument, not '--'")

    def error(self, message: str):  # type: ignore[override]
        one_line = printable(message)
        self.exit(2, f"{self.prog}: error: {one_line}\n")


class OutputPathError(ValueError):
    """An output path that cannot be written as asked: one line naming the option."""


def _refuse(option: str, path: str, why: str) -> OutputPathError:
    shown = path if len(path) <= 200 else path[:200] + "..."
    return OutputPathError(f"{option} {shown!r}: {why}")


def _basic(option: str, text: str) -> Path:
    if not text or "\0" in text:
        raise _refuse(option, text, "not a usable path (empty, or holding a NUL byte)")
    path = Path(text)
    if path.is_symlink():
        raise _refuse(
            option, text, f"is a symbolic link (to {os.readlink(path)}); name the path itself, not a link"
        )
    if path.name in ("", ".", ".."):
        raise _refuse(option, text, "names no file or directory of its own")
    return path


def output_file(text: str, option: str = "-o") -> Path:
    """A file the command will write (created or replaced whole): checked before any work."""
    try:
        path = _basic(option, text)
        if path.exists() and not path.is_file():
            raise _refuse(option, text, "exists and is not a regular file")
        parent = path.parent
        if not parent.is_dir():
            what = "does not exist" if not parent.exists() else "is not a directory"
            raise _refuse(option, text, f"its directory {parent} {what}")
        if not os.access(parent, os.W_OK | os.X_OK):
            raise _refuse(option, text, f"its directory {parent} is not writable")
    except OSError as e:  # a name too long, a loop of links above it
        raise _refuse(option, text, f"cannot be checked ({e.strerror or e})") from None
    return path


def output_dir(text: str, option: str = "-o") -> Path:
    """A directory the command will write into (created with its parents when missing): checked before any
    work."""
    try:
        path = _basic(option, text)
        if path.exists() and not path.is_dir():
            raise _refuse(option, text, "exists and is not a directory")
        probe = path
        while not probe.exists():
            if probe.is_symlink():  # a dangling link above the path
                raise _refuse(option, text, f"{probe} is a symbolic link to nothing")
            probe = probe.parent
        if not probe.is_dir():
            raise _refuse(option, text, f"{probe} is not a directory")
        if not os.access(probe, os.W_OK | os.X_OK):
            raise _refuse(option, text, f"{probe} is not writable")
    except OSError as e:
        raise _refuse(option, text, f"cannot be checked ({e.strerror or e})") from None
    return path


#: what a path that is not a regular file is, by its stat mode (said instead of "no such file")
_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def not_a_file(path: Path) -> str | None:
    """Why `path` is no file to read, in words (`does not exist`, `is a directory, not a file`, `is a FIFO (named
    pipe), not a regular file`, `is a symbolic link to a missing target`), or None for a regular file (links
    followed)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "is a symbolic link to a missing target" if os.path.islink(path) else "does not exist"
    except OSError as e:
        return f"cannot be checked ({e.strerror or e})"
    if stat.S_ISREG(mode):
        return None
    kind = next((what for test, what in _KINDS if test(mode)), "not a regular file")
    return f"is {kind}, not a file" if kind == "a directory" else f"is {kind}, not a regular file"


def input_file(text: str, option: str) -> Path:
    """A file the command reads, checked before any work: a regular file (a FIFO or a device would block the read
    or never end it; a directory is not a file)."""
    if not text or "\0" in text:
        raise _refuse(option, text, "not a usable path (empty, or holding a NUL byte)")
    path = Path(text)
    try:
        if not path.exists():
            raise _refuse(option, text, "does not exist")
        if not path.is_file():
            raise _refuse(option, text, "is not a regular file")
    except OSError as e:
        raise _refuse(option, text, f"cannot be checked ({e.strerror or e})") from None
    return path


def database_file(text: str, option: str = "--db") -> Path:
    """A database the command opens (created when missing): not a FIFO, device or socket when it exists (SQLite
    would block on a FIFO), and a usable name; a directory, or a file SQLite cannot open, is the store's one-line
    error with its hint (harness.history.store.open_db)."""
    if not text or "\0" in text:
        raise _refuse(option, text, "not a usable path (empty, or holding a NUL byte)")
    path = Path(text)
    try:
        if path.exists() and not (path.is_file() or path.is_dir()):
            raise _refuse(option, text, "exists and is not a regular file")
    except OSError as e:
        raise _refuse(option, text, f"cannot be checked ({e.strerror or e})") from None
    return path


def argparse_type(check, option: str):
    """`check` (output_file or output_dir) as an argparse `type=`: its error is the parser's one line."""

    def parse(text: str) -> Path:
        try:
            return check(text, option)
        except OutputPathError as e:
            raise argparse.ArgumentTypeError(str(e).removeprefix(f"{option} ")) from None

    parse.__name__ = "path"
    return parse


class _GuardedStdout:
    """sys.stdout while a command runs: every write and flush goes to the real stream, and the first error one
    raises (a full disk, a reader gone) is kept, since argparse's `--help` swallows the OSError it gets and a
    command would otherwise end with status 0 and its output lost."""

    def __init__(self, stream) -> None:
        self.stream = stream
        self.error: OSError | None = None

    def _kept(self, e: OSError) -> OSError:
        if self.error is None:
            self.error = e
        return e

    def write(self, text: str) -> int:
        try:
            return self.stream.write(text)
        except OSError as e:
            raise self._kept(e) from None

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        try:
            self.stream.flush()
        except OSError as e:
            raise self._kept(e) from None

    def __getattr__(self, name: str):
        return getattr(self.stream, name)


def _stdout_gone() -> None:
    """Point the process's stdout at /dev/null, so the interpreter's flush at exit cannot fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout was closed before the start: nothing to flush at exit
        pass
    finally:
        os.close(devnull)


#: the exit status of a command whose output could not be written (a full disk): a usage or file error's
STDOUT_FAILED = 2
#: the status a pipe's writer gets on SIGPIPE, for a reader that closed stdout early (`| head -1`)
PIPE_CLOSED = 128 + 13


def guarded_stdout(main, prog: str):
    """Run `main()` (an exit status) with its standard output checked, the one way every command writes there.

    A reader that closes stdout early (`| head -1`) ends it quietly: status PIPE_CLOSED, nothing on stderr. Any
    other error writing stdout (`> /dev/full`, a full disk under `> out.csv`, an I/O error) is one line on stderr
    naming `prog` and the error, status STDOUT_FAILED, never a traceback, never the command's own status (`check`'s
    1 means a relation broke) nor 0 with the output lost (argparse's `--help` swallows the error it gets)."""
    guard = _GuardedStdout(sys.stdout) if sys.stdout is not None else None
    if guard is not None:
        sys.stdout = guard
    status: int | None = None
    try:
        try:
            status = main()
        except SystemExit:  # a command that exits on its own: what it printed is flushed here too
            if guard is not None:
                guard.flush()
            raise
        if guard is not None:
            guard.flush()
    except (OSError, SystemExit):
        if guard is None or guard.error is None:
            raise
    finally:
        if guard is not None:
            sys.stdout = guard.stream
    if guard is None or guard.error is None:
        return status
    e = guard.error
    _stdout_gone()
    if isinstance(e, BrokenPipeError):
        return PIPE_CLOSED
    print(f"{prog}: error: cannot write to standard output: {e.strerror or e}", file=sys.stderr)
    return STDOUT_FAILED
