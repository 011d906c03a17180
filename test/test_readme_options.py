"""The README's node parameter tables are the option schema's (they cannot drift), and the
schema rows the nodes, the command line and IntervalPolicy share agree."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from wmr_model.calibration.intervals import INTERVAL_OPTIONS, IntervalPolicy
from wmr_model.calibration.stream import STREAM_OPTIONS
from wmr_model.errors import ParameterError
from wmr_model.parameters import (
    OptionSpec,
    markdown_table,
    option,
    option_default,
    options,
    readme_tables,
    register_options,
)
from wmr_model.ros.options import CALIBRATOR_NODE, NODE_GROUPS, ODOMETRY_NODE, PREDICTION_NODE

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_tables_are_the_schema():
    tables = readme_tables(README.read_text(encoding="utf-8"))
    assert sorted(tables) == sorted(NODE_GROUPS)
    for group, table in tables.items():
        assert table == markdown_table(group), (
            f"README.md table '{group}' differs from the schema: run "
            "python -m wmr_model.ros.options README.md")


def test_every_row_documented():
    for group in NODE_GROUPS:
        for name, s in options(group).items():
            assert s.description, f"{group}: {name} has no description"
            if isinstance(s.default, (int, float)) and not isinstance(s.default, bool):
                assert s.lower is not None and s.upper is not None, f"{group}: {name} unbounded"


def test_shared_rows_have_one_definition():
    # the calibrator declares the interval rows themselves; the nodes the prediction rows
    for name, s in options(INTERVAL_OPTIONS).items():
        if name.startswith("interval."):
            assert option(CALIBRATOR_NODE, name) is s
    assert option(ODOMETRY_NODE, "stabilization") is option(PREDICTION_NODE, "stabilization")
    for name, s in options(STREAM_OPTIONS).items():
        assert option(CALIBRATOR_NODE, name) is s


def test_interval_policy_defaults_from_schema():
    pol = IntervalPolicy()
    assert pol.kind == option_default(INTERVAL_OPTIONS, "interval.kind")
    assert pol.length == option_default(INTERVAL_OPTIONS, "interval.length")
    assert pol.overlap == option_default(INTERVAL_OPTIONS, "interval.overlap")
    assert pol.max_duration == option_default(INTERVAL_OPTIONS, "interval.max_duration")
    # the node/CLI defaults switch the motion filter on and the sentinels off
    node = IntervalPolicy.from_options({})
    assert node.min_distance == 0.5 and node.min_turn == 0.2
    assert node.tolerance is None and node.max_speed == float("inf")
    assert IntervalPolicy.from_options({"interval.max_speed": 3.0,
                                        "interval.tolerance": 0.1}).max_speed == 3.0


def test_cli_interval_flags_from_schema():
    from wmr_model.cli._options import INTERVAL_FLAGS, add_interval_arguments

    p = argparse.ArgumentParser()
    add_interval_arguments(p)
    args = p.parse_args([])
    for flag, name, _, _ in INTERVAL_FLAGS:
        dest = flag.lstrip("-").replace("-", "_")
        assert getattr(args, dest) == option_default(INTERVAL_OPTIONS, name)


def test_option_rules():
    s = OptionSpec("x.y", 1.0, unit="s", lower=0.0, upper=2.0)
    assert s.type == "double" and s.ros_description == "[s] "
    assert s.check(1.5) == 1.5
    with pytest.raises(ParameterError, match=r"x.y: must be <= 2.0 s, got 3.0"):
        s.check(3.0)
    c = OptionSpec("mode", "a", choices=("a", "b"))
    with pytest.raises(ParameterError, match=r"mode: must be one of \['a', 'b'\], got 'c'"):
        c.check("c")
    with pytest.raises(ParameterError, match="default 'z' is not one of"):
        OptionSpec("mode", "z", choices=("a", "b"))
    with pytest.raises(ParameterError, match="already registered with a different definition"):
        register_options(ODOMETRY_NODE, [OptionSpec("odom_frame", "map")])
    with pytest.raises(ParameterError, match="unknown option nope"):
        option(ODOMETRY_NODE, "nope")
