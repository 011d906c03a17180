"""URDF + sidecar loading: string vs file, fixed-joint merging by hand, wheel handling, errors."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from wmr_model.errors import ModelError
from wmr_model.io.sidecar import load_sidecar
from wmr_model.io.urdf import combine_inertias, load_urdf, rpy_from_rot
from wmr_model.vehicles.model import compile_vehicle

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "test" / "data"


# Independent rotation helpers (not the package's): R = Rz(yaw) Ry(pitch) Rx(roll).
def _rx(a: float) -> np.ndarray:
    c, s = math.cos(a), math.sin(a)
    return np.array([[1, 0, 0], [0, c, -s], [0, s, c]])


def _ry(a: float) -> np.ndarray:
    c, s = math.cos(a), math.sin(a)
    return np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]])


def _rz(a: float) -> np.ndarray:
    c, s = math.cos(a), math.sin(a)
    return np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])


def _rpy(r: float, p: float, y: float) -> np.ndarray:
    return _rz(y) @ _ry(p) @ _rx(r)


def _models_equal(a, b) -> None:
    assert a.frame_names[1:] == b.frame_names[1:]
    for key in ("parent", "joint_type", "axis", "T0", "actuated", "lower", "upper", "mass",
                "com", "inertia", "wheel_frame", "wheel_radius", "wheel_width", "A_joint",
                "joint_offset"):
        np.testing.assert_allclose(getattr(a, key), getattr(b, key), atol=1e-12, err_msg=key)


def test_urdf_string_equals_file():
    path = ROOT / "urdf" / "rocky7.urdf"
    sidecar = ROOT / "config" / "vehicles" / "rocky7.yaml"
    from_file = load_urdf(path, sidecar)
    from_text = load_urdf(path.read_text(), sidecar)
    assert from_file.source == str(path)
    assert from_text.source == "<string>"
    _models_equal(compile_vehicle(from_file), compile_vehicle(from_text))
    # the sidecar may also be YAML text or a dict
    as_dict = load_urdf(path.read_text(), {
        "version": 1, "wheels": {f"A{i}": {"radius": 0.065, "width": 0.05} for i in range(1, 7)},
        "actuated": ["S1", "A1", "A3", "A5", "S2", "A2", "A4", "A6"],
        "joint_constraints": [{"name": "rocker_differential", "terms": {"D1": 1, "D2": 1}}],
    })
    _models_equal(compile_vehicle(from_file), compile_vehicle(as_dict))


# Body with an offset, rotated inertial; a fixed sensor link and a fixed payload on the sensor.
_M0, _C0, _RPY0, _I0 = 12.0, (0.1, -0.05, 0.2), (0.0, 0.0, 0.4), (0.5, 0.8, 1.1)
_M1, _X1, _RPY1, _C1, _I1 = 0.3, (0.3, 0.0, 0.25), (0.2, -0.1, 0.7), (0.01, 0.02, 0.0), (1e-3, 2e-3,
                                                                                         3e-3)
_M2, _X2, _RPY2, _C2, _I2 = 4.0, (-0.2, 0.1, 0.05), (0.0, 0.3, 0.0), (0.05, 0.0, -0.02), (0.04,
                                                                                         0.05,
                                                                                         0.06)


def _v(t) -> str:
    return " ".join(repr(float(x)) for x in t)


FIXED_URDF = f"""<robot name="merge">
  <link name="base_link">
    <inertial><origin xyz="{_v(_C0)}" rpy="{_v(_RPY0)}"/><mass value="{_M0}"/>
      <inertia ixx="{_I0[0]}" iyy="{_I0[1]}" izz="{_I0[2]}" ixy="0" ixz="0" iyz="0"/></inertial>
  </link>
  <link name="imu_link">
    <inertial><origin xyz="{_v(_C1)}"/><mass value="{_M1}"/>
      <inertia ixx="{_I1[0]}" iyy="{_I1[1]}" izz="{_I1[2]}" ixy="0" ixz="0" iyz="0"/></inertial>
  </link>
  <link name="payload_link">
    <inertial><origin xyz="{_v(_C2)}"/><mass value="{_M2}"/>
      <inertia ixx="{_I2[0]}" iyy="{_I2[1]}" izz="{_I2[2]}" ixy="0" ixz="0" iyz="0"/></inertial>
  </link>
  <link name="wheel_link">
    <inertial><mass value="1.0"/><inertia ixx="0.1" iyy="0.2" izz="0.1" ixy="0" ixz="0" iyz="0"/>
    </inertial>
    <collision><origin rpy="1.5707963267948966 0 0"/>
      <geometry><cylinder radius="0.2" length="0.08"/></geometry></collision>
  </link>
  <joint name="imu_joint" type="fixed">
    <parent link="base_link"/><child link="imu_link"/>
    <origin xyz="{_v(_X1)}" rpy="{_v(_RPY1)}"/>
  </joint>
  <joint name="payload_joint" type="fixed">
    <parent link="imu_link"/><child link="payload_link"/>
    <origin xyz="{_v(_X2)}" rpy="{_v(_RPY2)}"/>
  </joint>
  <joint name="wheel_joint" type="continuous">
    <parent link="payload_link"/><child link="wheel_link"/>
    <origin xyz="0 0.3 -0.1"/><axis xyz="0 1 0"/>
  </joint>
</robot>"""


def test_fixed_joints_merge_mass_com_inertia_by_hand():
    sidecar = {"sensors": {"imu": {"link": "imu_link"}, "gps": {"parent": "payload_link",
                                                                "xyz": [0, 0, 0.5]}}}
    spec = load_urdf(FIXED_URDF, sidecar)
    model = compile_vehicle(spec)
    assert model.frame_names == ("base_link", "wheel_joint")

    # Hand computation in body coordinates.
    R1, p1 = _rpy(*_RPY1), np.array(_X1)
    R2, p2 = R1 @ _rpy(*_RPY2), p1 + R1 @ np.array(_X2)
    parts = [
        (_M0, np.array(_C0), _rpy(*_RPY0) @ np.diag(_I0) @ _rpy(*_RPY0).T),
        (_M1, p1 + R1 @ np.array(_C1), R1 @ np.diag(_I1) @ R1.T),
        (_M2, p2 + R2 @ np.array(_C2), R2 @ np.diag(_I2) @ R2.T),
    ]
    m = _M0 + _M1 + _M2
    c = (parts[0][0] * parts[0][1] + parts[1][0] * parts[1][1] + parts[2][0] * parts[2][1]) / m
    inertia = np.zeros((3, 3))
    for mk, ck, Ik in parts:
        d = ck - c
        inertia += Ik + mk * (np.dot(d, d) * np.eye(3) - np.outer(d, d))
    assert model.mass[0] == pytest.approx(m, rel=1e-14)
    np.testing.assert_allclose(model.com[0], c, atol=1e-14)
    np.testing.assert_allclose(model.inertia[0], inertia, atol=1e-13)
    assert model.total_mass == pytest.approx(m + 1.0, rel=1e-14)

    # The wheel hangs from the payload: its T0 is the composed fixed chain times its origin.
    np.testing.assert_allclose(model.T0[1][:3, 3], p2 + R2 @ np.array([0, 0.3, -0.1]),
                               atol=1e-14)
    np.testing.assert_allclose(model.T0[1][:3, :3], R2, atol=1e-14)
    assert model.wheel_radius.tolist() == [0.2] and model.wheel_width.tolist() == [0.08]

    # Sensors: the IMU link's pose, and a pose relative to the payload link.
    fi, T_imu = model.sensor_frame["imu"]
    assert fi == 0
    np.testing.assert_allclose(T_imu[:3, :3], R1, atol=1e-14)
    np.testing.assert_allclose(T_imu[:3, 3], p1, atol=1e-14)
    _, T_gps = model.sensor_frame["gps"]
    np.testing.assert_allclose(T_gps[:3, 3], p2 + R2 @ np.array([0, 0, 0.5]), atol=1e-14)


def test_combine_inertias_two_point_masses():
    # Two 1 kg points at x = +-1: com at 0, Iyy = Izz = 2, Ixx = 0.
    m, c, inertia = combine_inertias([(1.0, np.array([1.0, 0, 0]), np.zeros((3, 3))),
                                      (1.0, np.array([-1.0, 0, 0]), np.zeros((3, 3)))])
    assert m == 2.0
    np.testing.assert_allclose(c, 0.0)
    np.testing.assert_allclose(inertia, np.diag([0.0, 2.0, 2.0]))


@pytest.mark.parametrize("seed", range(5))
def test_rpy_from_rot_roundtrip(seed):
    rng = np.random.default_rng(seed)
    r, p, y = rng.uniform(-math.pi, math.pi), rng.uniform(-1.5, 1.5), rng.uniform(-3, 3)
    R = _rpy(r, p, y)
    np.testing.assert_allclose(_rpy(*rpy_from_rot(R)), R, atol=1e-14)
    # gimbal lock: still reproduces the rotation
    G = _rpy(r, math.pi / 2, y)
    np.testing.assert_allclose(_rpy(*rpy_from_rot(G)), G, atol=1e-12)


def test_sidecar_radius_wins_over_cylinder_and_defaults():
    path = DATA / "one_wheel.urdf"
    m = compile_vehicle(load_urdf(path))  # no sidecar: continuous joints are actuated wheels
    assert m.wheel_names == ("wheel_joint",) and m.wheel_radius.tolist() == [0.25]
    assert m.wheel_width.tolist() == [0.1] and m.actuated[1]
    m2 = compile_vehicle(load_urdf(path, {"wheels": {"wheel_joint": {"radius": 0.3}}}))
    assert m2.wheel_radius.tolist() == [0.3] and m2.wheel_width.tolist() == [0.1]
    m3 = compile_vehicle(load_urdf(path, {"wheels": [{"joint": "wheel_joint", "width": 0.2}],
                                          "actuated": []}))
    assert m3.wheel_radius.tolist() == [0.25] and m3.wheel_width.tolist() == [0.2]
    assert not m3.actuated.any()


def test_wheel_axis_z_is_reexpressed_to_spin_about_y():
    """ROS-style wheel: origin rolled by -pi/2, axis z. Same kinematics, model axis +y."""
    xml = """<robot name="r"><link name="base_link"/>
      <link name="wheel_link">
        <inertial><origin xyz="0 0 0.01"/><mass value="2"/>
          <inertia ixx="0.1" iyy="0.1" izz="0.3" ixy="0" ixz="0" iyz="0"/></inertial>
        <collision><geometry><cylinder radius="0.15" length="0.05"/></geometry></collision></link>
      <link name="hub_link"/>
      <joint name="wheel_joint" type="continuous"><parent link="base_link"/>
        <child link="wheel_link"/><origin xyz="0.2 0.3 0.0" rpy="-1.5707963267948966 0 0.1"/>
        <axis xyz="0 0 1"/></joint>
      <joint name="hub_joint" type="fixed"><parent link="wheel_link"/><child link="hub_link"/>
        <origin xyz="0 0 0.02"/></joint>
    </robot>"""
    m = compile_vehicle(load_urdf(xml, {"sensors": {"hub": {"link": "hub_link"}}}))
    np.testing.assert_allclose(m.axis[1], [0, 1, 0])
    R_urdf = _rpy(-math.pi / 2, 0, 0.1)
    R_model = m.T0[1][:3, :3]
    # same spin axis and origin in body coordinates
    np.testing.assert_allclose(R_model @ m.axis[1], R_urdf @ [0, 0, 1], atol=1e-14)
    np.testing.assert_allclose(m.T0[1][:3, 3], [0.2, 0.3, 0.0], atol=1e-15)
    # the new frame's z is as close to the body's up as possible: here exactly up
    np.testing.assert_allclose(R_model[:, 2], [0, 0, 1], atol=1e-14)
    # inertia, com and a child sensor are unchanged in body coordinates
    np.testing.assert_allclose(R_model @ m.inertia[1] @ R_model.T,
                               R_urdf @ np.diag([0.1, 0.1, 0.3]) @ R_urdf.T, atol=1e-14)
    np.testing.assert_allclose(R_model @ m.com[1], R_urdf @ [0, 0, 0.01], atol=1e-15)
    fi, T = m.sensor_frame["hub"]
    assert m.frame_names[fi] == "wheel_joint"
    np.testing.assert_allclose(R_model @ T[:3, 3], R_urdf @ [0, 0, 0.02], atol=1e-15)
    assert m.wheel_radius.tolist() == [0.15]


def test_mimic_becomes_joint_constraint_and_body_link_reroots():
    xml = """<robot name="r"><link name="base_footprint"/><link name="base_link"/>
      <link name="l"/><link name="r"/>
      <joint name="fp" type="fixed"><parent link="base_footprint"/><child link="base_link"/>
        <origin xyz="0 0 0.4"/></joint>
      <joint name="left" type="revolute"><parent link="base_link"/><child link="l"/>
        <origin xyz="0 0.5 0"/><axis xyz="0 1 0"/>
        <limit lower="-0.4" upper="0.4" effort="0" velocity="0"/></joint>
      <joint name="right" type="revolute"><parent link="base_link"/><child link="r"/>
        <origin xyz="0 -0.5 0"/><axis xyz="0 1 0"/>
        <limit lower="-0.4" upper="0.4" effort="0" velocity="0"/>
        <mimic joint="left" multiplier="-1" offset="0.1"/></joint>
    </robot>"""
    m = compile_vehicle(load_urdf(xml, {"body_link": "base_link", "wheels": {},
                                        "parameters": {"slip.p1": 0.5}}))
    assert m.body_name == "base_link"
    np.testing.assert_allclose(m.T0[1][:3, 3], [0, 0.5, 0])  # relative to base_link, not fp
    assert m.lower[1] == -0.4 and m.upper[2] == 0.4
    assert m.joint_constraint_names == ("mimic_right",)
    row = np.zeros(m.nv)
    row[6 + m.joint_index("right")] = 1.0
    row[6 + m.joint_index("left")] = 1.0  # right - (-1) * left
    np.testing.assert_allclose(m.A_joint[0], row)
    assert m.joint_offset.tolist() == [0.1]
    assert m.options["parameters"] == {"slip.p1": 0.5}
    m_root = compile_vehicle(load_urdf(xml, {"wheels": {}}))
    assert m_root.body_name == "base_footprint"
    np.testing.assert_allclose(m_root.T0[1][:3, 3], [0, 0.5, 0.4])


# ---- malformed inputs -----------------------------------------------------------------------

@pytest.mark.parametrize(
    ("fixture", "match"),
    [
        ("bad_xml.urdf", r"bad_xml\.urdf: malformed URDF XML: .*line 4"),
        ("unknown_parent.urdf",
         r"unknown_parent\.urdf: joint 'wheel_joint': parent link 'chassis_link' is not defined"),
        ("cycle.urdf", r"cycle\.urdf: links \['a_link', 'b_link'\] form a cycle"),
        ("zero_axis.urdf", r"zero_axis\.urdf: joint 'rocker_joint': axis must be nonzero"),
        ("nan_origin.urdf", r"nan_origin\.urdf: joint 'rocker_joint': origin must be finite"),
        ("no_radius.urdf", r"no_radius\.urdf: wheel joint 'wheel_joint' has no radius"),
        ("floating.urdf",
         r"floating\.urdf: joint 'world_joint': type 'floating' is not supported"),
    ],
)
def test_malformed_urdf(fixture, match):
    with pytest.raises(ModelError, match=match):
        compile_vehicle(load_urdf(DATA / fixture))


@pytest.mark.parametrize(
    ("fixture", "match"),
    [
        ("sidecar_missing_joint.yaml",
         r"sidecar_missing_joint\.yaml: actuated: joint 'steer_joint' is not a joint of "
         r"one_wheel\.urdf; joints are \['wheel_joint'\]"),
        ("sidecar_unknown_key.yaml",
         r"sidecar_unknown_key\.yaml: unknown key\(s\) \['wheel_radius'\]; allowed keys are "
         r"\['version', "),
        ("sidecar_negative_radius.yaml",
         r"sidecar_negative_radius\.yaml: wheels\.wheel_joint\.radius must be > 0 m, got -0\.1"),
        ("sidecar_nan_radius.yaml",
         r"sidecar_nan_radius\.yaml: wheels\.wheel_joint\.radius must be finite, got nan"),
    ],
)
def test_malformed_sidecar(fixture, match):
    with pytest.raises(ModelError, match=match):
        load_urdf(DATA / "one_wheel.urdf", DATA / fixture)


@pytest.mark.parametrize(
    ("sidecar", "match"),
    [
        ({"version": 2}, r"<dict>: version must be 1, got 2"),
        ({"wheels": {"nope": {}}}, r"wheels\.nope: joint 'nope' is not a joint of "),
        ({"joint_constraints": [{"name": "c", "terms": {"ghost": 1}}]},
         r"joint_constraints \(c\): joint 'ghost' is not a joint"),
        ({"sensors": {"imu": {"link": "imu_link"}}}, r"sensors\.imu: 'imu_link' is not a link"),
        ({"encoder_map": {"left_wheel_joint": ["ghost"]}}, r"encoder_map\.left_wheel_joint"),
        ({"body_link": "wheel_link"}, r"body_link 'wheel_link' must be joined to the root"),
        ({"parameters": {"bad name": 1}}, r"not a dotted parameter name"),
    ],
)
def test_sidecar_semantic_errors(sidecar, match):
    with pytest.raises(ModelError, match=match):
        load_urdf(DATA / "one_wheel.urdf", sidecar)


def test_more_structural_errors():
    two_parents = """<robot name="x"><link name="a"/><link name="b"/><link name="c"/>
      <joint name="j1" type="fixed"><parent link="a"/><child link="c"/></joint>
      <joint name="j2" type="fixed"><parent link="b"/><child link="c"/></joint></robot>"""
    with pytest.raises(ModelError, match=r"<string>: link 'c' is the child of two joints"):
        load_urdf(two_parents)
    with pytest.raises(ModelError, match=r"<string>: root element must be <robot>"):
        load_urdf("<model name='x'/>")
    with pytest.raises(ModelError, match=r"missing\.urdf: URDF file not found"):
        load_urdf(DATA / "missing.urdf")
    bad_cyl = """<robot name="x"><link name="a"/><link name="w"><collision>
      <geometry><cylinder radius="0.2" length="0.1"/></geometry></collision></link>
      <joint name="wj" type="continuous"><parent link="a"/><child link="w"/>
      <axis xyz="0 1 0"/></joint></robot>"""
    with pytest.raises(ModelError, match=r"wheel joint 'wj': collision cylinder axis"):
        load_urdf(bad_cyl)
    vertical = bad_cyl.replace('xyz="0 1 0"', 'xyz="0 0 1"')
    with pytest.raises(ModelError, match=r"wheel joint 'wj': spin axis .* vertical"):
        load_urdf(vertical)


def test_sidecar_yaml_errors_name_the_file(tmp_path):
    p = tmp_path / "broken.yaml"
    p.write_text("wheels: [a, b\n")
    with pytest.raises(ModelError, match=r"broken\.yaml: malformed YAML at line"):
        load_sidecar(p)
    with pytest.raises(ModelError, match=r"nothere\.yaml: sidecar file not found"):
        load_sidecar(tmp_path / "nothere.yaml")


def test_huge_numbers_give_a_unit_axis_or_a_clear_error():
    """Numbers near the float limit: an axis is normalized without overflowing (its direction
    is what counts), and inertials whose combination overflows are refused by name instead of
    turning into inf (numpy's overflow warnings are errors here)."""
    with np.errstate(all="raise"):
        spec = load_urdf(FIXED_URDF.replace('<axis xyz="0 1 0"/>', '<axis xyz="0 1e300 0"/>'))
        wheel = next(f for f in spec.frames if f.name == "wheel_joint")
        np.testing.assert_allclose(wheel.axis, [0.0, 1.0, 0.0])
        huge = FIXED_URDF.replace(f'<mass value="{_M1}"/>', '<mass value="1e300"/>', 1)
        huge = huge.replace(f'<origin xyz="{_v(_C1)}"/>', '<origin xyz="1e300 0 0"/>', 1)
        with pytest.raises(ModelError, match=r"<string>: the <inertial> of the links on frame "
                                             r"'base_link' overflow"):
            load_urdf(huge)
