"""No writes outside the output (issue 26): a lock, a temporary file or an index is never opened through a
link, a name given by a person cannot lead out of its folder, and a damaged figures index is one line."""
import json
import os
from pathlib import Path

import pytest

import bench.files
from analysis import cli as analysis_cli
from analysis import files as analysis_files
from analysis_fixtures import make_cell
from bench.cache import locked, update_json
from bench.errors import BenchError
from bench.files import atomic_write_text, inside, open_lock, plain_name, write_new
from bench.perf import output_path
from hostile import LSQ as FAST, assert_refused, run_bench, run_cli

PRECIOUS = b"someone else's file\n"


def _plant(kind, where: Path, victim: Path) -> None:
    """Put at ``where`` a symbolic link to ``victim``, a link to a missing file, or a hard link to it."""
    if kind == "symlink":
        victim.write_bytes(PRECIOUS)
        where.symlink_to(victim)
    elif kind == "dangling":
        where.symlink_to(victim)  # O_CREAT through it would create the victim
    else:
        victim.write_bytes(PRECIOUS)
        os.link(victim, where)


def assert_untouched(kind, victim: Path) -> None:
    if kind == "dangling":
        assert not victim.exists()
    else:
        assert victim.read_bytes() == PRECIOUS


LINKS = ["symlink", "dangling", "hardlink"]
WHY = {"symlink": "symbolic link", "dangling": "symbolic link", "hardlink": "hard link"}


# ---- locks -------------------------------------------------------------------------------------
def _run_lock(tmp_path, capsys, monkeypatch):
    out = tmp_path / "run"
    out.mkdir()
    return out / ".bench.lock", lambda: run_bench(["run", *FAST, "--out", str(out)], capsys)[::2]


def _figures_lock(tmp_path, capsys, monkeypatch):
    make_cell(tmp_path, "choco", (0.80, 0.81, 0.79))
    (tmp_path / "figures").mkdir()
    return tmp_path / "figures" / ".index.lock", lambda: run_cli(
        analysis_cli.main, ["figures", str(tmp_path), "--only", "accuracy_curves"], capsys)[::2]


def _cache_lock(tmp_path, capsys, monkeypatch):
    (tmp_path / "cache").mkdir()
    monkeypatch.setenv("CHOCO_BENCH_CACHE", str(tmp_path / "cache"))  # a run tunes γ there
    argv = ["run", *FAST, "--compressor", "top:0.5", "--set", "gamma_tune_steps=5", "--out", str(tmp_path / "run")]
    return tmp_path / "cache" / ".gamma.json.lock", lambda: run_bench(argv, capsys)[::2]


# where a lock lives -> (its path, the command that takes it) after setting up what it guards
LOCKS = {"run directory": _run_lock, "figures index": _figures_lock, "cache": _cache_lock}


@pytest.mark.parametrize("kind", LINKS)
@pytest.mark.parametrize("site", list(LOCKS))
def test_a_linked_lock_is_refused_and_its_target_untouched(site, kind, tmp_path, capsys, monkeypatch):
    """bench's locks (a run's, the cache's) and analysis's (the figures index) alike: one line naming the lock,
    nothing followed, nothing written beside it (no run, no figure, no cache entry)."""
    lock, take = LOCKS[site](tmp_path, capsys, monkeypatch)
    victim = tmp_path / "victim.txt"
    _plant(kind, lock, victim)
    line = assert_refused(*take(), lock, WHY[kind])
    assert site != "run directory" or "remove" in line
    assert_untouched(kind, victim)
    assert sorted(p.name for p in lock.parent.iterdir()) == [lock.name]
    assert not (tmp_path / "run" / "run.json").exists()


def test_locks_of_plain_files_still_lock(tmp_path):
    with locked(tmp_path / "data.npz"):
        assert (tmp_path / ".data.npz.lock").is_file()
    fd = open_lock(tmp_path / ".data.npz.lock")  # the file a lock leaves behind opens again
    os.close(fd)
    assert update_json(tmp_path / "gamma.json", "k", 1.0) == 1.0  # a cache file not there yet: made under its lock
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(BenchError, match="fifo is not a plain file"):
        open_lock(tmp_path / "fifo")


# ---- temporary files -----------------------------------------------------------------------------
def _fixed_token(monkeypatch, module):
    monkeypatch.setattr(module.secrets, "token_hex", lambda n: "feedbeef")


WRITERS = {
    "atomic_write_text": (bench.files, lambda path: atomic_write_text(path, "new")),
    "write_new": (bench.files, lambda path: write_new(path.parent, path.stem, "new")),
    "analysis write_text_atomically": (analysis_files, lambda path: analysis_files.write_text_atomically(path, "new")),
}


@pytest.mark.parametrize("name", list(WRITERS))
def test_a_temporary_file_is_never_written_through_a_link(name, tmp_path, monkeypatch):
    """The temporary name is random; one planted at that name anyway is not followed, nor removed."""
    module, write = WRITERS[name]
    _fixed_token(monkeypatch, module)
    path, victim = tmp_path / "out.json", tmp_path / "victim.txt"
    tmp = tmp_path / f".out.json.{os.getpid()}.feedbeef.tmp"
    _plant("symlink", tmp, victim)
    with pytest.raises(FileExistsError) as failure:
        write(path)
    assert failure.value.filename == str(path)
    assert_untouched("symlink", victim)
    assert tmp.is_symlink() and not path.exists()
    monkeypatch.undo()
    write(path)  # another name: written
    assert path.read_text() == "new"


# ---- names that lead out of their folder (perf's --name: rows of test_bad_input.py's REFUSED) -------------
def test_perf_refuses_a_link_that_leads_out_of_out_dir(tmp_path, capsys):
    out_dir, victim = tmp_path / "perf", tmp_path / "elsewhere.json"
    out_dir.mkdir()
    _plant("symlink", out_dir / "latest.json", victim)
    assert_refused(*run_bench(["perf", "--quick", "--only", "c", "--out-dir", str(out_dir)], capsys)[::2],
                   out_dir / "latest.json", "outside")
    assert_untouched("symlink", victim)


def test_inside_resolves_links_and_dot_dot_and_a_plain_name_stays_in_its_folder(tmp_path):
    assert output_path(str(tmp_path), "cpu-2024") == tmp_path / "cpu-2024.json"
    assert plain_name("a.b-c_d", "--name") == "a.b-c_d"
    root = tmp_path / "root"
    root.mkdir()
    assert inside(root, root / "a" / "b.json") == (root / "a" / "b.json").resolve()
    with pytest.raises(BenchError, match="outside"):
        inside(tmp_path / "root", tmp_path / "root" / ".." / "b.json")
    (tmp_path / "root" / "out").symlink_to(tmp_path)
    with pytest.raises(BenchError, match="outside"):
        inside(tmp_path / "root", tmp_path / "root" / "out" / "b.json")


# ---- a damaged figures index ----------------------------------------------------------------------
DAMAGED_INDEX = {  # name -> (bytes of figures/index.json, words the line must hold)
    "truncated": (b'{"accuracy_curves": ', ["not JSON"]),
    "list": (b"[1, 2]", ["list", "mapping"]),
    "caption-number": (b'{"accuracy_curves": 3}', ["'accuracy_curves'", "int", "string"]),
    "caption-null": (b'{"accuracy_curves": null}', ["NoneType"]),
    "name-escapes": (b'{"../../outside": "x"}', ["'../../outside'", "plain file name"]),
    "not-utf8": (bytes(range(128, 256)), ["not JSON"]),
}


@pytest.fixture
def study(tmp_path):
    make_cell(tmp_path, "choco", (0.80, 0.81, 0.79))
    (tmp_path / "figures").mkdir()
    return tmp_path


@pytest.mark.parametrize("damage", list(DAMAGED_INDEX))
@pytest.mark.parametrize("command", ["report", "figures"])
def test_a_damaged_figures_index_is_one_line_and_kept(command, damage, study, capsys):
    content, words = DAMAGED_INDEX[damage]
    index = study / "figures" / "index.json"
    index.write_bytes(content)
    argv = [command, str(study), *(["--only", "accuracy_curves"] if command == "figures" else [])]
    assert_refused(*run_cli(analysis_cli.main, argv, capsys)[::2], index, "damaged", "remove it", *words)
    assert index.read_bytes() == content  # not merged into, not replaced
    assert not (study / "report.md").exists() and not (study / "figures" / "accuracy_curves.png").exists()


def test_a_sound_index_is_still_merged(study, capsys):
    index = study / "figures" / "index.json"
    (study / "figures" / "methods.png").write_bytes(b"png")
    index.write_text(json.dumps({"methods": "kept: its PNG is there", "gone": "dropped: no PNG"}))
    assert run_cli(analysis_cli.main, ["figures", str(study), "--only", "accuracy_curves"], capsys)[0] == 0
    merged = json.loads(index.read_text())
    assert set(merged) == {"methods", "accuracy_curves"} and merged["methods"] == "kept: its PNG is there"
    assert run_cli(analysis_cli.main, ["report", str(study)], capsys)[0] == 0
    assert "figures/accuracy_curves.png" in (study / "report.md").read_text()
