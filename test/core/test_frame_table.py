"""Frame-table YAML: safe expressions, units, Table 2.2 numbers, cross-check against the URDF."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wmr_model.errors import ModelError
from wmr_model.io.frame_table import evaluate, load_frame_table, unit_names
from wmr_model.io.urdf import load_urdf
from wmr_model.vehicles.model import compile_vehicle

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "test" / "data"
TABLE = ROOT / "config" / "frame_tables" / "rocky7.yaml"


# ---- expression evaluator -------------------------------------------------------------------

@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("1 + 2 * 3", 7.0),
        ("(1 + 2) * 3", 9.0),
        ("2 ** 3 ** 2", 512.0),
        ("-2 ** 2", -4.0),
        ("7 / 2", 3.5),
        ("16*sin(49 deg)", 16 * math.sin(math.radians(49))),
        ("16*cos(49deg)", 16 * math.cos(math.radians(49))),
        ("sqrt(9) + atan2(1, 1)", 3 + math.pi / 4),
        ("pi/2", math.pi / 2),
        ("90 deg", math.pi / 2),
        (3, 3.0),
        (2.5, 2.5),
    ],
)
def test_evaluate_arithmetic(expr, expected):
    assert evaluate(expr) == pytest.approx(expected, rel=1e-15)


def test_evaluate_units_are_in_the_table_units():
    si = unit_names("m", "kg")
    assert evaluate("11 in", si) == pytest.approx(0.2794, rel=1e-15)
    assert evaluate("11*inch", si) == pytest.approx(0.2794, rel=1e-15)
    assert evaluate("(10 + 1) in", si) == pytest.approx(0.2794, rel=1e-15)
    cm = unit_names("cm", "lbm")
    assert evaluate("11 in", cm) == pytest.approx(27.94, rel=1e-15)
    assert evaluate("2 m + 3 mm", cm) == pytest.approx(200.3, rel=1e-15)
    assert evaluate("1 kg", cm) == pytest.approx(1 / 0.45359237, rel=1e-15)
    assert evaluate("k + 1", {"k": 2.0}) == 3.0


@pytest.mark.parametrize(
    ("expr", "match"),
    [
        ("__import__('os')", r"function '__import__' is not allowed"),
        ("(1).real", r"Attribute is not allowed"),
        ("os.system('true')", r"function 'os.system' is not allowed"),
        ("[1, 2][0]", r"Subscript is not allowed"),
        ("(lambda: 1)()", r"function .* is not allowed"),
        ("sin(x=1)", r"keyword arguments are not allowed"),
        ("'a' * 3", r"only numbers are allowed"),
        ("k9 + 1", r"unknown name 'k9'"),
        ("1 +", r"cannot parse expression"),
        ("9.0 ** 9 ** 9", r"cannot be evaluated"),
        ("sqrt(-1)", r"cannot be evaluated"),
        ("1 / 0", r"cannot be evaluated"),
        ("True", r"only numbers are allowed"),
        ("1 < 2", r"Compare is not allowed"),
    ],
)
def test_evaluate_rejects(expr, match):
    with pytest.raises(ModelError, match=match):
        evaluate(expr, where="t.yaml: constants.k")


def test_evaluate_rejects_non_numbers():
    with pytest.raises(ModelError, match=r"expected a number or an expression"):
        evaluate(True)
    with pytest.raises(ModelError, match=r"expected a number or an expression"):
        evaluate([1])


@settings(max_examples=200, deadline=None)
@given(
    a=st.floats(-1e6, 1e6, allow_nan=False),
    b=st.floats(-1e6, 1e6, allow_nan=False),
    c=st.floats(0.5, 10.0),
)
def test_evaluate_matches_python_arithmetic(a, b, c):
    assert evaluate(f"({a!r} - {b!r}) * {c!r} + {a!r} / {c!r}") == pytest.approx(
        (a - b) * c + a / c, rel=1e-12, abs=1e-9
    )


# ---- the Rocky 7 table ----------------------------------------------------------------------

def test_rocky7_table_numbers_match_table_2_2():
    m = compile_vehicle(load_frame_table(TABLE))
    assert m.frame_names == ("body", "D1", "S1", "A1", "B1", "A3", "A5",
                             "D2", "S2", "A2", "B2", "A4", "A6")
    # Table 2.2 col 1 (1-based): parents 1,2,3,2,5,5,1,8,9,8,11,11 (A4/A6 under B2)
    assert (m.parent[1:] + 1).tolist() == [1, 2, 3, 2, 5, 5, 1, 8, 9, 8, 11, 11]
    cm = 0.01
    k1, k2, k3, k4, k5, k7, k8 = 10.5, 12.075, 20, 28.8, 12.5, 6.9, 2
    k6x, k6z = 16 * math.sin(math.radians(49)), 16 * math.cos(math.radians(49))
    expected_xyz = {
        "D1": (k2, k3, k1), "S1": (k4, 0, 0), "A1": (0, 0, -k5), "B1": (-k6x, 0, -k6z),
        "A3": (k7, 0, -k8), "A5": (-k7, 0, -k8), "D2": (k2, -k3, k1), "S2": (k4, 0, 0),
        "A2": (0, 0, -k5), "B2": (-k6x, 0, -k6z), "A4": (k7, 0, -k8), "A6": (-k7, 0, -k8),
    }
    for name, xyz in expected_xyz.items():
        i = m.frame_index(name)
        np.testing.assert_allclose(m.T0[i][:3, 3], np.array(xyz) * cm, atol=1e-15, err_msg=name)
        np.testing.assert_allclose(m.T0[i][:3, :3], np.eye(3), err_msg=name)
    axes = {"S1": 2, "S2": 2}
    for i, name in enumerate(m.frame_names[1:], start=1):
        np.testing.assert_allclose(m.axis[i], np.eye(3)[axes.get(name, 1)], err_msg=name)
    act = {"S1", "A1", "A3", "A5", "S2", "A2", "A4", "A6"}  # Table 2.2 "Act." column
    assert {n for n, a in zip(m.frame_names, m.actuated) if a} == act
    assert m.wheel_names == ("A1", "A3", "A5", "A2", "A4", "A6")
    np.testing.assert_allclose(m.wheel_radius, 6.5 * cm)
    assert m.total_mass == pytest.approx(11.0, rel=1e-12)
    # eq. 2.26: ones at joint-space indices 7 and 13 (1-based)
    expected = np.zeros((1, 18))
    expected[0, [6, 12]] = 1.0
    np.testing.assert_array_equal(m.A_joint, expected)


def test_rocky7_table_and_urdf_compile_to_the_same_model():
    a = compile_vehicle(load_frame_table(TABLE))
    b = compile_vehicle(load_urdf(ROOT / "urdf" / "rocky7.urdf",
                                  ROOT / "config" / "vehicles" / "rocky7.yaml"))
    assert a.frame_names[1:] == b.frame_names[1:]
    for key in ("parent", "joint_type", "axis", "T0", "actuated", "lower", "upper",
                "wheel_frame", "wheel_radius", "wheel_width", "A_joint", "joint_offset",
                "mass", "com", "inertia"):
        np.testing.assert_allclose(getattr(a, key), getattr(b, key), atol=1e-12, err_msg=key)


def test_list_rows_equal_mapping_rows_and_shapes():
    text_list = """
version: 1
vehicle: t
length_unit: in
mass_unit: lbm
constants: {l: 42, w: 32.25}
body: {mass: 100, inertia: [1, 2, 3]}
frames:
  - [FL, body, RY, Y, l, w, 0, 0, 0, 0, {radius: 16.5, mass: 10,
                                         inertia: {cylinder: [16.5, 12], axis: y}}]
  - [S, body, PZ, N, 0, 0, 0, 0, 0, 0, {lower: -2, upper: 2}]
"""
    text_map = """
version: 1
vehicle: t
length_unit: in
mass_unit: lbm
constants: {l: 42, w: 32.25}
body: {mass: 100, inertia: [1, 2, 3]}
frames:
  - {name: FL, parent: body, joint: revolute, axis: [0, 1, 0], actuated: true, xyz: [l, w, 0],
     radius: 16.5, mass: 10, inertia: {cylinder: [16.5, 12], axis: y}}
  - {name: S, parent: body, type: PZ, act: N, lower: -2, upper: 2}
"""
    a = compile_vehicle(load_frame_table(text_list))
    b = compile_vehicle(load_frame_table(text_map))
    for key in ("parent", "axis", "T0", "actuated", "mass", "inertia", "wheel_radius", "lower",
                "upper", "joint_type"):
        np.testing.assert_allclose(getattr(a, key), getattr(b, key), err_msg=key)
    lbm, inch = 0.45359237, 0.0254
    np.testing.assert_allclose(a.T0[1][:3, 3], [42 * inch, 32.25 * inch, 0], rtol=1e-15)
    assert a.wheel_radius[0] == pytest.approx(16.5 * inch, rel=1e-15)
    assert a.mass[0] == pytest.approx(100 * lbm, rel=1e-15)
    np.testing.assert_allclose(np.diag(a.inertia[0]), np.array([1, 2, 3]) * lbm * inch**2)
    r, h, mw = 16.5 * inch, 12 * inch, 10 * lbm
    side = mw * (3 * r * r + h * h) / 12
    np.testing.assert_allclose(np.diag(a.inertia[1]), [side, mw * r * r / 2, side], rtol=1e-14)
    assert (a.lower[2], a.upper[2]) == pytest.approx((-2 * inch, 2 * inch), rel=1e-15)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("frames: [[A, body, RQ, Y, 0, 0, 0, 0, 0, 0]]", r"frames\[0\] \(A\)\.type must be one"),
        ("frames: [[A, body, RY, maybe, 0, 0, 0, 0, 0, 0]]", r"frames\[0\] \(A\)\.act must be"),
        ("frames: [[A, body, RY, Y, 0, 0]]", r"frames\[0\] must be a mapping or a list"),
        ("frames: [{name: A, parent: body, type: RY, colour: red}]",
         r"frames\[0\] \(A\): unknown key\(s\) \['colour'\]"),
        ("frames: [[A, body, RY, Y, 0, 0, 0, 0, 0, 0, {radius: -1}]]",
         r"frames\[0\] \(A\)\.radius must be > 0 m"),
        ("frames: [{name: A, parent: body, joint: revolute, axis: [0, 0, 0]}]",
         r"frames\[0\] \(A\)\.axis must be nonzero"),
        ("length_unit: furlong\nframes: []", r"length_unit must be one of"),
        ("constants: {sin: 1}\nframes: []", r"constants\.sin: not a usable name"),
        ("frames: [[A, body, RY, Y, 0, 0, 0, 0, 0, 0]]\nwheels: {B: {radius: 1}}",
         r"wheels\.B: no frame of that name"),
        ("frames: [[A, body, RY, Y, 0, 0, 0, 0, 0, 0]]\n"
         "joint_constraints: [{name: c, terms: {Z: 1}}]",
         r"joint_constraints \(c\): joint 'Z' is not a frame"),
        ("frames: [[A, nowhere, RY, Y, 0, 0, 0, 0, 0, 0]]",
         r"frame 'A': parent 'nowhere' is not defined"),
        ("bogus: 1\nframes: []", r"unknown key\(s\) \['bogus'\]"),
    ],
)
def test_table_errors_name_row_and_field(text, match):
    with pytest.raises(ModelError, match=match):
        compile_vehicle(load_frame_table("version: 1\n" + text))


def test_table_error_names_the_file():
    with pytest.raises(
        ModelError,
        match=r"table_unknown_constant\.yaml: frames\[0\] \(W1\)\.xyz\[1\]: 'k9': unknown name",
    ):
        load_frame_table(DATA / "table_unknown_constant.yaml")
