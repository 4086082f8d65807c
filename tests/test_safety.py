"""Nothing lost, nothing half-trusted, at the command line: output folders, bounded inputs, the
report's run folder, and one-line errors with their exit codes (2 usage, 1 bad data)."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import synthetic_run as syn  # noqa: E402
from inquire_lib import cli
from inquire_lib.data import external
from inquire_lib.runs import bounds
from inquire_lib.runs import outputs
from inquire_lib.runs.integrity import MARKER, write_marker

GRPO = Path(external.__file__).parent / "samples" / "inquiremobile" / "interactive_grpo.sample.jsonl"
if not GRPO.exists():  # before the samples moved into the package
    GRPO = Path(__file__).parent / "fixtures" / "inquiremobile" / "interactive_grpo.sample.jsonl"


def _err_line(capsys) -> str:
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


# ------------------------------------------------------------------------------ output folders
def _fill(names):
    def fill(tmp: Path):
        for n in names:
            (tmp / n).write_text(n)
        write_marker(tmp)

    return fill


def test_build_refuses_a_folder_it_did_not_write_and_deletes_nothing(tmp_path, capsys):
    victim = tmp_path / "victim"
    (victim / "sub").mkdir(parents=True)
    (victim / "notes.txt").write_text("mine")
    (victim / "sub" / "data.csv").write_text("1,2")
    os.chmod(victim, 0o751)
    assert cli.main(["build", "--tasks", "5", "--out", str(victim)]) == 2
    line = _err_line(capsys)
    assert line == (
        f"inquire build: {victim}: folder is not empty and holds files this command did not "
        "write (notes.txt, sub); choose a new or empty folder, or pass --force to write beside them"
    )
    assert sorted(p.name for p in victim.iterdir()) == ["notes.txt", "sub"]
    assert (victim / "sub" / "data.csv").read_text() == "1,2"
    assert stat.S_IMODE(victim.stat().st_mode) == 0o751


def test_build_force_writes_beside_foreign_files_and_replaces_only_its_own(tmp_path, capsys):
    victim = tmp_path / "victim"
    (victim / "sub").mkdir(parents=True)
    (victim / "notes.txt").write_text("mine")
    os.chmod(victim, 0o751)
    assert cli.main(["build", "--tasks", "5", "--out", str(victim), "--force"]) == 0
    first = capsys.readouterr().out
    ours = {"dataset_dict.json", "inquirebench.json", "train", "test", MARKER}
    assert {p.name for p in victim.iterdir()} == ours | {"notes.txt", "sub"}
    assert cli.main(["build", "--tasks", "6", "--out", str(victim), "--force"]) == 0
    assert {p.name for p in victim.iterdir()} == ours | {"notes.txt", "sub"}
    assert (victim / "notes.txt").read_text() == "mine" and (victim / "sub").is_dir()
    assert stat.S_IMODE(victim.stat().st_mode) == 0o751
    assert "fingerprint: " in first


def test_rebuild_into_own_folder_needs_no_force_and_keeps_mode(tmp_path):
    out = tmp_path / "own"
    out.mkdir(mode=0o750)
    os.chmod(out, 0o750)
    outputs.write_owned_dir(out, _fill(["a", "b"]))
    outputs.write_owned_dir(out, _fill(["a"]))  # replaced whole: "b" was ours and goes
    assert sorted(p.name for p in out.iterdir()) == ["a", MARKER]
    assert stat.S_IMODE(out.stat().st_mode) == 0o750
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp left


def test_force_never_replaces_a_foreign_entry_with_our_name(tmp_path):
    out = tmp_path / "o"
    out.mkdir()
    (out / "train").mkdir()
    (out / "train" / "keep").write_text("x")
    with pytest.raises(outputs.OutputExistsError, match="would replace train, which this command did not write"):
        outputs.write_owned_dir(out, _fill(["train"]), force=True)
    assert (out / "train" / "keep").read_text() == "x"


def test_out_under_a_file_and_out_a_file(tmp_path, capsys):
    f = tmp_path / "f"
    f.write_text("x")
    assert cli.main(["build", "--tasks", "5", "--out", str(f / "sub")]) == 2
    assert _err_line(capsys) == f"inquire build: {f / 'sub'}: lies under {f}, which is a file, not a folder"
    assert cli.main(["build", "--tasks", "5", "--out", str(f)]) == 2
    assert _err_line(capsys) == f"inquire build: {f}: is a file, not a folder"
    assert f.read_text() == "x"


@pytest.mark.parametrize(
    "tasks,message",
    [
        ("0", "argument --tasks: expected a positive number of tasks, got 0"),
        ("-3", "argument --tasks: expected a positive number of tasks, got -3"),
        (
            "6000",
            "argument --tasks: 6000 is above 5000 without --large (estimate: 6000 tasks, about 960 MB on "
            "disk and 180-420 s of one core)",
        ),
    ],
)
def test_build_tasks_bounds(tmp_path, capsys, tasks, message):
    assert cli.main(["build", "--tasks", tasks, "--out", str(tmp_path / "x")]) == 2
    assert _err_line(capsys) == f"inquire build: {message}"
    assert not (tmp_path / "x").exists()


def test_build_huge_count_refused_even_with_large(tmp_path, capsys):
    assert cli.main(["build", "--tasks", str(10**12), "--out", str(tmp_path / "x"), "--large"]) == 2
    assert "is above the limit of 1,000,000" in _err_line(capsys)


def test_build_prints_estimate_on_stderr_and_the_same_stdout(tmp_path, capsys):
    assert cli.main(["build", "--tasks", "5", "--seed", "7", "--out", str(tmp_path / "d")]) == 0
    cap = capsys.readouterr()
    assert cap.err.startswith("estimate: 5 tasks, about 1 MB on disk")
    assert cap.out.splitlines()[-2].startswith("fingerprint: ")


# ------------------------------------------------------------------------------ bounded inputs
def _grpo_rows() -> list[dict]:
    return [json.loads(line) for line in GRPO.read_text(encoding="utf-8").splitlines() if line.strip()]


def _write(path: Path, rows) -> Path:
    path.write_text(
        "".join((r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)) + "\n" for r in rows), encoding="utf-8"
    )
    return path


def test_line_without_breaks_is_refused_without_reading_it_whole(tmp_path, capsys, monkeypatch):
    path = tmp_path / "one_line.jsonl"
    path.write_bytes(b"[" + b"1," * 600_000 + b"1]")  # 1.2 MB, no line break
    assert cli.main(["validate", str(path)]) == 1
    assert _err_line(capsys) == (
        f"error: {path}:1: line longer than 1048576 bytes (raise it with --max-line-bytes or $INQUIRE_MAX_LINE_BYTES)"
    )
    reads = []
    real = open

    def spy(*a, **k):
        fh = real(*a, **k)
        orig = fh.readline
        fh.readline = lambda n=-1: (reads.append(n), orig(n))[1]
        return fh

    monkeypatch.setattr(bounds, "open", spy, raising=False)
    assert list(bounds.iter_lines(path, 1000))[0][1].line == 1
    assert reads and all(0 < n <= 1 << 16 for n in reads)  # bounded reads only


def test_max_line_bytes_is_configurable(tmp_path, capsys, monkeypatch):
    rows = _grpo_rows()
    path = _write(tmp_path / "g.jsonl", rows)
    longest = max(len(json.dumps(r, ensure_ascii=False).encode()) for r in rows)
    assert cli.main(["validate", str(path), "--max-line-bytes", str(longest)]) == 0
    capsys.readouterr()
    assert cli.main(["validate", str(path), "--max-line-bytes", "100"]) == 1
    assert "line longer than 100 bytes" in _err_line(capsys)
    monkeypatch.setenv("INQUIRE_MAX_LINE_BYTES", "100")
    assert cli.main(["validate", str(path)]) == 1
    assert "line longer than 100 bytes" in _err_line(capsys)
    assert cli.main(["validate", str(path), "--max-line-bytes", "0"]) == 2
    assert _err_line(capsys) == "inquire validate: argument --max-line-bytes: expected a positive number, got 0"


@pytest.mark.parametrize(
    "key,value,field,message",
    [
        ("width", 10**400, "width", "expected a positive integer up to 10000, got int 1000000000"),
        ("height", 1e300, "height", "expected a positive integer up to 10000, got float 1e+300"),
        ("bbox", [0, 0, 10**30, 5], "bbox", "expected 4 numbers"),
        ("bbox", [600, 1200, 900, 1500], "bbox", "[600, 1200, 900, 1500] lies outside the 720x1280 screen"),
    ],
)
def test_numbers_checked_before_arithmetic_and_against_the_screen(tmp_path, capsys, key, value, field, message):
    rows = _grpo_rows()
    rows[0][key] = value
    path = _write(tmp_path / "g.jsonl", rows)
    assert cli.main(["validate", str(path)]) == 1
    line = _err_line(capsys)
    assert line.startswith(f"error: {path}:1: field '{field}': ") and message in line


def test_point_far_outside_the_screen_is_a_named_error(tmp_path, capsys):
    rows = _grpo_rows()
    rows[0]["action"] = json.dumps({"name": "mobile_use", "arguments": {"action": "click", "coordinate": [5000, 90]}})
    path = _write(tmp_path / "g.jsonl", rows)
    assert cli.main(["validate", str(path)]) == 1
    assert _err_line(capsys) == (
        f"error: {path}:1: field 'action': coordinate (5000, 90) lies outside the "
        "720x1280 screen and its 448x840 resized frame"
    )
    with pytest.raises(external.RecordError, match="lies outside"):
        external.load_inquiremobile_grpo(path)


def test_skip_bad_with_no_good_row_fails(tmp_path, capsys):
    rows = _grpo_rows()
    for r in rows:
        r["width"] = -1
    path = _write(tmp_path / "g.jsonl", rows)
    assert cli.main(["validate", str(path), "--skip-bad"]) == 1
    assert _err_line(capsys) == (
        f"error: {path}:1: field 'width': expected a positive integer up to 10000, got "
        f"int -1 (and no good row: all {len(rows)} rows are bad)"
    )
    with pytest.raises(external.RecordError, match="no good row"):
        external.load_inquiremobile_grpo(path, skip_bad=True)
    # one good row is enough
    rows[1]["width"] = 720
    assert cli.main(["validate", str(_write(path, rows)), "--skip-bad"]) == 0


# ------------------------------------------------------------------------------ the report
def _with_screenshot(run: Path, value: str) -> None:
    preds = run / "eval" / "sft" / "step_predictions.jsonl"
    recs = [json.loads(line) for line in preds.read_text().splitlines()]
    recs[0]["screenshot"] = value
    preds.write_text("".join(json.dumps(r) + "\n" for r in recs))


@pytest.mark.parametrize("kind", ["dotdot", "absolute", "symlink"])
def test_report_embeds_only_files_inside_the_run(tmp_path, capsys, kind):
    run = syn.write_run(tmp_path / "r")
    secret = tmp_path / "secret.png"
    syn.screenshot(0).save(secret)
    if kind == "dotdot":
        value = os.path.relpath(secret, run / "eval")
        assert value.startswith("..")
    elif kind == "absolute":
        value = str(secret)
    else:
        (run / "eval" / "screens" / "link.png").symlink_to(secret)
        value = "screens/link.png"
    _with_screenshot(run, value)
    out = tmp_path / "report.html"
    assert cli.main(["report", str(run), "-o", str(out)]) == 0
    cap = capsys.readouterr()
    line = cap.err.strip()
    assert len(line.splitlines()) == 1 and line.startswith("inquire report: skipped prediction ")
    assert ("is an absolute path" if kind == "absolute" else f"resolves to {secret}, outside the run folder") in line
    assert "1 step(s) skipped" in cap.out
    doc = out.read_text()
    assert "1 step(s) skipped" in doc and doc.count("class='card'") == len(syn.all_preds()) - 1


def test_report_non_png_screenshot_is_skipped_and_named(tmp_path, capsys):
    run = syn.write_run(tmp_path / "r")
    (run / "eval" / "screens" / "t0_risk_0.png").write_text("not an image")
    out = tmp_path / "report.html"
    assert cli.main(["report", str(run), "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert "t0_risk_0.png of prediction 't0_risk/0'" in err and "is not a readable PNG" in err


def test_report_non_utf8_predictions_name_file_and_line(tmp_path, capsys):
    run = syn.write_run(tmp_path / "r")
    preds = run / "eval" / "sft" / "step_predictions.jsonl"
    lines = preds.read_bytes().splitlines(keepends=True)
    lines[2] = b'{"id": "\xff\xfe"}\n'
    preds.write_bytes(b"".join(lines))
    assert cli.main(["report", str(run), "-o", str(tmp_path / "r.html")]) == 1
    assert _err_line(capsys) == f"inquire report: {preds}:3: not valid UTF-8 (invalid start byte at byte 8)"


def test_report_out_a_folder_or_run_missing(tmp_path, capsys):
    run = syn.write_run(tmp_path / "r")
    assert cli.main(["report", str(run), "-o", str(tmp_path)]) == 2
    assert _err_line(capsys) == (
        f"inquire report: argument -o/--out: {tmp_path} is a folder; give the path of the .html file to write"
    )
    assert cli.main(["report", str(tmp_path / "nope")]) == 2
    assert _err_line(capsys) == f"inquire report: {tmp_path / 'nope'}: run folder does not exist or is not a folder"


# ------------------------------------------------------------------------------ usage errors
@pytest.mark.parametrize(
    "argv,message",
    [
        (
            ["run", "--profile", "nope"],
            "inquire run: unknown profile 'nope'; choose one of cpu, gpu, quick, small, smoke",
        ),
        (["profile", "nope"], "inquire profile: unknown profile 'nope'; choose one of cpu, gpu, quick, small, smoke"),
        (["run", "--profile", "smoke", "--only", "99"], "inquire run: argument --only: no notebook matches '99'"),
    ],
)
def test_usage_errors_are_one_line_exit_2(capsys, argv, message):
    assert cli.main(argv) == 2
    assert _err_line(capsys).startswith(message)


def test_argparse_errors_are_one_line(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["build", "--tasks", "many", "--out", "x"])
    assert exc.value.code == 2
    assert _err_line(capsys) == "inquire build: error: argument --tasks: invalid int value: 'many'"


def test_debug_shows_the_traceback(capsys):
    with pytest.raises(cli.UsageError, match="unknown profile"):
        cli.main(["profile", "nope", "--debug"])
    with pytest.raises(cli.UsageError):
        cli.main(["--debug", "profile", "nope"])


def test_unexpected_error_is_one_line_exit_1(monkeypatch, capsys):
    import inquire_lib.profiles as profiles

    def boom(name):
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr(profiles, "get_profile", boom)
    assert cli.main(["profile", "smoke"]) == 1
    assert _err_line(capsys) == (
        "inquire profile: internal error: ZeroDivisionError: division by zero (run with --debug for the traceback)"
    )
