"""Every command orthotune prints for the user to run is shell-quoted: a store path with a
space or an S3 URI's ``&`` stays one word when the line is pasted into a shell."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "reports"))  # the shared store builders
from report_stores import hand_row  # noqa: E402

from orthotune.cli import main  # noqa: E402
from orthotune.store import Store  # noqa: E402

#: A folder name a shell would split at the space and end the command at the ``&``.
AWKWARD = "my store&x=$HOME;'q'"


def command_after(line: str, marker: str) -> list[str]:
    """The words of the command that follows ``marker`` in ``line``, as bash reads them
    (``printf`` in place of ``orthotune`` prints each word it receives)."""
    command = line.split(marker, 1)[1].strip().strip("`")
    assert command.startswith("orthotune "), command
    shown = subprocess.run(["bash", "-c", "printf '%s\\0' " + command.removeprefix("orthotune ")],
                           capture_output=True, text=True, check=True)
    return ["orthotune", *shown.stdout.split("\0")[:-1]]


@pytest.fixture
def store(tmp_path) -> Store:
    store = Store.open(str(tmp_path / AWKWARD), create=True)
    store.save_search_meta("paused", {"options": {"name": "paused"}, "state": "interrupted"})
    for i in range(3):
        store.write_trial(hand_row(f"t{i}", search="paused", val=[0.5 + i / 20] * 2), [{"repeat": 0, "epoch": 1}])
    return store


def test_the_resume_command_in_status_is_one_word_per_argument(store, capsys):
    assert main(["status", "--store", store.uri]) == 0
    (note,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("paused:")]
    assert command_after(note, "continue with:") == ["orthotune", "launch", "--resume", "paused", "--store",
                                                       store.uri]


def test_the_store_check_commands_are_quoted(store, capsys):
    bad = Path(store.path("trials", "search=paused", "trial-t2.parquet"))
    bad.write_bytes(bad.read_bytes()[:-40])
    assert main(["status", "--store", store.uri]) == 0
    warning = capsys.readouterr().err.strip()
    assert command_after(warning, "such files with:") == ["orthotune", "store", "check", "--store", store.uri]
    assert main(["store", "check", "--store", store.uri]) == 1
    hint = capsys.readouterr().out.strip().splitlines()[-1]
    assert command_after(hint, "move them aside with:") == ["orthotune", "store", "check", "--quarantine",
                                                              "--store", store.uri]


@pytest.mark.slow
def test_a_printed_command_runs_as_printed_in_a_shell(store, capsys, tmp_path):
    """The status line's command, pasted into bash, reaches orthotune with the store intact
    (here `status` stands in for `launch --resume`, which would start a search)."""
    assert main(["status", "--store", store.uri]) == 0
    note = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("paused:"))
    pasted = note.split("continue with: ", 1)[1].replace("orthotune launch --resume paused", "orthotune status", 1)
    shown = subprocess.run(["bash", "-c", pasted.replace("orthotune", f"{shlex.quote(sys.executable)} -m "
                                                                      "orthotune.cli", 1)],
                           capture_output=True, text=True, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines()[1].split()[:3] == ["paused", "interrupted", "3"]


def test_the_best_hint_after_a_search_is_quoted():
    from orthotune.cli.launch import summary
    from orthotune.search import SearchOutcome

    uri = "s3://bucket/store?endpoint_override=127.0.0.1:9000&scheme=http"
    outcome = SearchOutcome("s", {"completed": 1}, best_by_cell={"cell": (0.5, {"trial_id": "t0"})})
    hint = summary(outcome, uri).splitlines()[-1]
    assert command_after(hint, "):") == ["orthotune", "best", "--search", "s", "--store", uri, "--yaml"]
