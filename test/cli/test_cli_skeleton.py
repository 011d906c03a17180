"""The ``wmr`` skeleton: help, version, subcommand discovery, error handling, ``--json``."""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

import wmr_model
from wmr_model import cli
from wmr_model.cli import _output
from wmr_model.errors import ParameterError

REPO = Path(__file__).resolve().parents[2]


def _fake_subcommand(monkeypatch, name, run):
    """Register module wmr_model.cli.<name> whose command runs ``run(args)``."""
    module = types.ModuleType(f"wmr_model.cli.{name}")

    def register(subparsers):
        p = subparsers.add_parser(name, help=f"fake {name}")
        p.add_argument("value", nargs="?", default="1")
        _output.add_json_flag(p)
        p.set_defaults(func=run)

    module.register = register
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setattr(cli, "SUBCOMMANDS", (*cli.SUBCOMMANDS, name))


def test_help_exits_zero_and_lists_usage(capsys):
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: wmr")
    assert "--version" in out


def test_version(capsys):
    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"wmr {wmr_model.__version__}"


def test_no_command_prints_help_and_fails(capsys):
    assert cli.main([]) == cli.EXIT_ERROR
    assert "usage: wmr" in capsys.readouterr().err


def test_unknown_command_is_a_usage_error(capsys):
    assert cli.main(["no-such-command"]) == 2
    assert "invalid choice" in capsys.readouterr().err


def test_missing_subcommand_modules_are_skipped():
    parser = cli.build_parser(("surely_not_a_module_xyz",))
    assert parser.parse_args([]).command is None


def test_broken_subcommand_module_is_not_hidden(monkeypatch):
    module = types.ModuleType("wmr_model.cli.broken_xyz")

    def register(subparsers):
        import surely_not_installed_xyz  # noqa: F401

    module.register = register
    monkeypatch.setitem(sys.modules, module.__name__, module)
    with pytest.raises(ModuleNotFoundError, match="surely_not_installed_xyz"):
        cli.build_parser(("broken_xyz",))


def test_discovered_subcommand_runs_and_returns_its_code(monkeypatch, capsys):
    _fake_subcommand(monkeypatch, "fake_ok", lambda args: int(args.value))
    assert cli.main(["fake_ok", "3"]) == 3
    assert cli.main(["fake_ok"]) == 1
    assert "fake_ok" in cli.build_parser().format_help()


def test_wmr_error_is_one_line_exit_2(monkeypatch, capsys):
    def run(args):
        raise ParameterError("rocky7.yaml: wheel.FL.radius must be > 0 m,\n  got -0.1")

    _fake_subcommand(monkeypatch, "fake_err", run)
    assert cli.main(["fake_err"]) == 2
    err = capsys.readouterr().err
    assert err == "wmr: error: rocky7.yaml: wheel.FL.radius must be > 0 m, got -0.1\n"


def test_missing_file_is_one_line_exit_2(monkeypatch, capsys):
    _fake_subcommand(monkeypatch, "fake_open", lambda args: open("/nonexistent/x.urdf"))
    assert cli.main(["fake_open"]) == 2
    assert capsys.readouterr().err == (
        "wmr: error: /nonexistent/x.urdf: No such file or directory\n"
    )


def test_traceback_flag_reraises(monkeypatch):
    def run(args):
        raise ParameterError("bad")

    _fake_subcommand(monkeypatch, "fake_tb", run)
    with pytest.raises(ParameterError, match="bad"):
        cli.main(["--traceback", "fake_tb"])


def test_other_exceptions_propagate(monkeypatch):
    def run(args):
        raise RuntimeError("a bug, not bad input")

    _fake_subcommand(monkeypatch, "fake_bug", run)
    with pytest.raises(RuntimeError):
        cli.main(["fake_bug"])


def test_json_flag_and_emit(monkeypatch, capsys):
    data = {"name": "rocky7", "mass": np.float64(12.5), "q": np.arange(3), "bad": float("nan")}

    def run(args):
        _output.emit(args, data)

    _fake_subcommand(monkeypatch, "fake_json", run)
    assert cli.main(["fake_json", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "name": "rocky7", "mass": 12.5, "q": [0, 1, 2], "bad": None,
    }
    assert cli.main(["fake_json"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "name: rocky7"


def test_to_jsonable_types():
    class Row(tuple):
        def _asdict(self):
            return {"a": 1}

    assert _output.to_jsonable({1: (np.int32(2), {3}), "p": Path("/x")}) == {
        "1": [2, [3]], "p": "/x",
    }
    assert _output.to_jsonable(np.eye(2)) == [[1.0, 0.0], [0.0, 1.0]]
    assert _output.to_jsonable(Row()) == {"a": 1}
    with pytest.raises(TypeError, match="cannot write object"):
        _output.to_jsonable(object())


def test_emit_text_forms():
    args = argparse.Namespace(json=False)
    buf = io.StringIO()
    _output.emit(args, [1, 2], text=lambda d: f"{len(d)} items", stream=buf)
    _output.emit(args, None, text="done\n", stream=buf)
    assert buf.getvalue() == "2 items\ndone\n"


def _run_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120
    )


def test_import_is_light():
    """Importing the package or the CLI loads neither numba, scipy nor rclpy."""
    proc = _run_python(
        "import sys, wmr_model, wmr_model.cli; "
        "print(sorted(m for m in ('numba', 'scipy', 'rclpy', 'matplotlib') if m in sys.modules))"
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_help_works_without_ros():
    """``wmr --help`` in a process where rclpy and the generated interfaces cannot import."""
    blocker = (
        "import sys, importlib.abc\n"
        "class Block(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('rclpy', 'rosidl_runtime_py') or name in "
        "('wmr_model.msg', 'wmr_model.srv'):\n"
        "            raise ImportError('blocked ' + name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "from wmr_model.cli import main\n"
        "sys.exit(main(['--help']))\n"
    )
    proc = _run_python(blocker)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: wmr")


def test_python_dash_m_entry_point():
    proc = subprocess.run(
        [sys.executable, "-m", "wmr_model", "--version"],
        capture_output=True, text=True, cwd=REPO, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"wmr {wmr_model.__version__}"
