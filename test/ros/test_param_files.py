"""Every shipped parameter file loads in rcl, with the types its author meant.

rcl parses ``--params-file`` with its own YAML reader (libyaml, YAML 1.1 booleans: a bare ``y``,
``n``, ``on``, ``off`` is a bool), not with PyYAML; a file that PyYAML reads happily can stop
every node at start (``Sequence should be of same type``) or silently turn a string into a
bool. Here each file goes through ``rclpy.init(args=[--params-file ...])`` and a node with that
name declares what rcl parsed; every value's type and value must equal PyYAML's reading of the
same file (an independent parser: they disagree exactly where rcl's YAML 1.1 rules bite).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
PARAM_FILES = sorted(p for p in (REPO / "config").rglob("*.yaml")
                     if "ros__parameters" in p.read_text(encoding="utf-8"))


def _flatten(prefix: str, value, out: dict) -> dict:
    if isinstance(value, dict):
        for k, v in value.items():
            _flatten(f"{prefix}.{k}" if prefix else str(k), v, out)
    else:
        out[prefix] = value
    return out


def _node_keys(data: dict) -> dict[str, dict]:
    """``{node name: parameters}`` flattened the way rcl names nested keys (dots)."""
    return {key.rsplit("/", 1)[-1]: _flatten("", (body or {}).get("ros__parameters") or {}, {})
            for key, body in data.items()}


def test_there_are_parameter_files():
    names = {p.name for p in PARAM_FILES}
    assert {"default.yaml", "warthog.yaml", "rocky7.yaml", "diffdrive.yaml"} <= names


@pytest.mark.parametrize("path", PARAM_FILES, ids=lambda p: str(p.relative_to(REPO)))
def test_parameter_file_loads_in_rcl_as_written(path: Path, ros_domain: int):
    import rclpy
    from rclpy.context import Context

    expected = _node_keys(yaml.safe_load(path.read_text(encoding="utf-8")))
    assert expected, f"{path}: no node keys"
    context = Context()
    # rcl parses the file here; a malformed file raises RCLError naming it.
    rclpy.init(context=context, domain_id=ros_domain,
               args=["--ros-args", "--params-file", str(path)])
    try:
        for name, params in expected.items():
            if name == "**":
                continue
            node = rclpy.create_node(name, context=context,
                                     automatically_declare_parameters_from_overrides=True)
            try:
                got = {p: node.get_parameter(p).value for p in params}
                for key, want in params.items():
                    value = got[key]
                    if isinstance(want, list):
                        assert list(value) == want, (path.name, name, key, value, want)
                        assert [type(v) for v in value] == [type(v) for v in want], \
                            (path.name, name, key, value, want)
                    else:
                        assert type(value) is type(want) and value == want, \
                            f"{path.name}: {name}.{key}: rcl reads {value!r}, PyYAML {want!r}"
            finally:
                node.destroy_node()
    finally:
        context.try_shutdown()
