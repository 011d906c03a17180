"""Enhanced kinematics (§2.3, eqs. 2.44-2.52) and the rollover stability margin: closed forms."""

import math

import numpy as np
import pytest

from wmr_model import kinematics as kin
from wmr_model.errors import ParameterError, ShapeError
from wmr_model.kinematics.enhanced import (
    body_force,
    cg_force,
    cg_motion,
    slip_axes_array,
    support_polygon,
)
from wmr_model.prediction.predict import TIPOVER_RISK, predict
from wmr_model.spatial import (
    STANDARD_GRAVITY,
    crm,
    plucker_force_from_transform,
    plucker_from_transform,
)
from wmr_model.terrain import surface as tr
from wmr_model.vehicles.generators import skid_steer_spec
from wmr_model.vehicles.inertia import composite_inertia, inertia_mass_com
from wmr_model.vehicles.model import compile_vehicle

g = STANDARD_GRAVITY
R_WHEEL = 0.1


def _skid(wheelbase=0.8, track=1.0, com_height=0.0):
    spec = skid_steer_spec(wheelbase=wheelbase, track=track, radius=R_WHEEL)
    spec.body_com = (0.0, 0.0, com_height)
    return compile_vehicle(spec)


def _first_step(m, terrain, q0, rates, p, fidelity="enhanced", **kw):
    pr = predict(m, terrain, q0, np.asarray(rates, float)[None], 0.01, fidelity=fidelity,
                 slip_params=p, **kw)
    return pr.qdot[0, 0], pr.slip[0, 0], pr


@pytest.fixture(scope="module")
def skid():
    m = _skid()
    q0, _ = kin.initialize_contact(m, tr.flat())
    return m, q0


# ---- kernels against their definitions ---------------------------------------------------


def test_body_force_matches_featherstone_bias_force_with_opposite_sign():
    """(2.44) is -(2.89): I g - crf(v) I v, with crf = -crm^T (Featherstone)."""
    rng = np.random.default_rng(0)
    A = rng.normal(size=(6, 6))
    I = A @ A.T + np.eye(6)
    gb = np.r_[0, 0, 0, rng.normal(size=3)]
    v = rng.normal(size=6)
    bias = -I @ gb + (-crm(v).T) @ (I @ v)  # (2.89), body part
    np.testing.assert_allclose(body_force(I, gb, v), -bias, atol=1e-12)


def test_cg_transforms_match_plucker_matrices():
    rng = np.random.default_rng(1)
    c = rng.normal(size=3)
    v = rng.normal(size=6)
    f = rng.normal(size=6)
    T_b_cg = np.eye(4)
    T_b_cg[:3, 3] = -c  # body origin seen from the cg frame
    np.testing.assert_allclose(cg_motion(c, v), plucker_from_transform(T_b_cg) @ v, atol=1e-14)
    np.testing.assert_allclose(cg_force(c, f), plucker_force_from_transform(T_b_cg) @ f,
                               atol=1e-14)


def test_force_directions_downhill_and_outward(skid):
    """Sign convention: lateral force downhill on a side slope, outward in a left turn."""
    m, q0 = skid
    Ic = composite_inertia(m, q0)
    M = Ic[5, 5]
    # at rest, level: m g straight down the body z axis
    f = body_force(Ic, np.r_[0, 0, 0, 0, 0, -g], np.zeros(6))
    np.testing.assert_allclose(f[3:], [0, 0, -M * g], atol=1e-12)
    # left turn (wz > 0) forward: centrifugal force to the right (-y)
    f = body_force(Ic, np.r_[0, 0, 0, 0, 0, -g], np.r_[0, 0, 0.5, 2.0, 0, 0])
    assert f[4] == pytest.approx(-M * 0.5 * 2.0, rel=1e-12)
    # body rolled right-side-down by 0.2 rad: gravity component along -y_body (downhill)
    roll = 0.2
    gb = np.r_[0, 0, 0, 0, -g * math.sin(roll), -g * math.cos(roll)]
    assert body_force(Ic, gb, np.zeros(6))[4] < 0


# ---- slip closed forms on rigid skid steer (flat ground: slip adds exactly, 2.52 + 2.38) --


def test_zero_coefficients_reproduce_kinematics_exactly(skid):
    m, q0 = skid
    terrain = tr.rough(0.05, 0.5, seed=3)
    q0, _ = kin.initialize_contact(m, terrain)
    u = np.tile([6.0, 9.0, 6.0, 9.0], (40, 1))
    a = predict(m, terrain, q0, u, 0.04, fidelity="kinematic")
    b = predict(m, terrain, q0, u, 0.04, fidelity="enhanced", slip_params=np.zeros(6))
    np.testing.assert_allclose(a.q, b.q, atol=1e-12, rtol=0)
    np.testing.assert_array_equal(b.slip, 0.0)


def test_p2_rolling_resistance_reduces_speed(skid):
    m, q0 = skid
    kinem, _, _ = _first_step(m, tr.flat(), q0, [10, 10, 10, 10], None, fidelity="kinematic")
    qd, slip, _ = _first_step(m, tr.flat(), q0, [10, 10, 10, 10], [0, -0.1, 0, 0, 0, 0])
    assert kinem[3] == pytest.approx(1.0, abs=1e-12)
    assert qd[3] == pytest.approx(0.9, abs=1e-12)
    np.testing.assert_allclose(qd[[0, 1, 2, 4, 5]], 0, atol=1e-12)
    np.testing.assert_allclose(slip, [0, 0, 0, -0.1, 0, 0], atol=1e-15)


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_p3_turn_slips_outward(skid, sign):
    """Left turn -> slip to the right (and vice versa): vy = p3 (f_lat/f_z) V_lon."""
    m, q0 = skid
    rates = [8, 12, 8, 12] if sign > 0 else [12, 8, 12, 8]
    k, _, _ = _first_step(m, tr.flat(), q0, rates, None, fidelity="kinematic")
    w, v = k[2], k[3]
    assert np.sign(w) == sign
    p3 = 0.7
    qd, slip, _ = _first_step(m, tr.flat(), q0, rates, [0, 0, p3, 0, 0, 0])
    expected = p3 * (-w * v / g) * v
    assert slip[4] == pytest.approx(expected, rel=1e-12)
    assert qd[4] == pytest.approx(expected, rel=1e-9)
    assert np.sign(qd[4]) == -sign  # outward
    assert qd[2] == pytest.approx(w, abs=1e-12) and qd[3] == pytest.approx(v, abs=1e-12)


@pytest.mark.parametrize("rates", [[8, 12, 8, 12], [12, 8, 12, 8], [-8, -12, -8, -12]])
def test_p4_positive_is_understeer(skid, rates):
    """p4 > 0 reduces |yaw rate| (understeer) in left and right turns: wz *= 1 - p4 v^2/g."""
    m, q0 = skid
    k, _, _ = _first_step(m, tr.flat(), q0, rates, None, fidelity="kinematic")
    w, v = k[2], k[3]
    p4 = 0.3
    qd, _, _ = _first_step(m, tr.flat(), q0, rates, [0, 0, 0, p4, 0, 0])
    assert qd[2] == pytest.approx(w + p4 * (-w * v / g) * v, rel=1e-9)
    assert abs(qd[2]) < abs(w)
    qd_o, _, _ = _first_step(m, tr.flat(), q0, rates, [0, 0, 0, -p4, 0, 0])
    assert abs(qd_o[2]) > abs(w)  # oversteer


def test_p5_p6_closed_forms(skid):
    m, q0 = skid
    rates = [8, 12, 8, 12]
    k, _, _ = _first_step(m, tr.flat(), q0, rates, None, fidelity="kinematic")
    w, v = k[2], k[3]
    qd, _, _ = _first_step(m, tr.flat(), q0, rates, [0, 0, 0, 0, 0.05, 0])
    assert qd[2] == pytest.approx(w + 0.05 * v, rel=1e-10)
    qd, _, _ = _first_step(m, tr.flat(), q0, rates, [0, 0, 0, 0, 0, -0.2])
    assert qd[2] == pytest.approx(0.8 * w, rel=1e-10)


def test_side_slope_traverse_slips_downhill():
    """Slope rising toward +y, driving along +x: slip -p3 tan(slope) v in body y, downhill."""
    m = _skid()
    slope = 0.25
    terrain = tr.inclined_plane(slope, math.pi / 2)
    q0, _ = kin.initialize_contact(m, terrain)
    p3 = 0.5
    qd, _, _ = _first_step(m, terrain, q0, [10, 10, 10, 10], [0, 0, p3, 0, 0, 0])
    assert qd[4] == pytest.approx(-p3 * math.tan(slope) * 1.0, rel=1e-9)
    pr = predict(m, terrain, q0, np.full((200, 4), 10.0), 0.02, fidelity="enhanced",
                 slip_params=[0, 0, p3, 0, 0, 0])
    dy = pr.position[0, -1, 1] - pr.position[0, 0, 1]
    t = pr.time[-1]
    # world y drift: body vy along the slope, whose horizontal part is cos(slope)
    assert dy == pytest.approx(-p3 * math.tan(slope) * math.cos(slope) * t, rel=1e-3)
    assert np.abs(pr.dz).max() < 1e-6  # wheels stay on the terrain (2.52 then 2.38)


def test_p1_slows_uphill():
    m = _skid()
    slope = 0.2
    terrain = tr.inclined_plane(slope, 0.0)
    q0, _ = kin.initialize_contact(m, terrain)
    qd, _, _ = _first_step(m, terrain, q0, [10, 10, 10, 10], [0.4, 0, 0, 0, 0, 0])
    assert qd[3] == pytest.approx(1.0 * (1 - 0.4 * math.tan(slope)), rel=1e-9)


def test_slip_is_independent_of_body_frame_placement():
    """(2.45)-(2.50): moving the body frame origin by d changes only v_b by w x d."""
    d = np.array([0.3, -0.1, 0.05])
    spec_a = skid_steer_spec()
    spec_a.body_com = (0.05, 0.02, 0.1)
    spec_b = skid_steer_spec()
    spec_b.body_com = tuple(np.array(spec_a.body_com) - d)
    for f in spec_b.frames:
        f.xyz = tuple(np.array(f.xyz) - d)
    ma, mb = compile_vehicle(spec_a), compile_vehicle(spec_b)
    qa, _ = kin.initialize_contact(ma, tr.flat())
    qb = qa.copy()
    qb[4:7] += d
    p = [0.2, -0.05, 0.6, 0.3, 0.01, -0.1]
    rates = [7, 12, 7, 12]
    va, sa, _ = _first_step(ma, tr.flat(), qa, rates, p)
    vb, sb, _ = _first_step(mb, tr.flat(), qb, rates, p)
    np.testing.assert_allclose(vb[:3], va[:3], atol=1e-12)
    np.testing.assert_allclose(vb[3:6], va[3:6] + np.cross(va[:3], d), atol=1e-12)
    np.testing.assert_allclose(sb[3:6], sa[3:6] + np.cross(sa[:3], d), atol=1e-12)


def test_slip_axes_are_validated_and_used(skid):
    m, q0 = skid
    with pytest.raises(ParameterError, match=r"slip axis lat: must be a finite nonzero vector"):
        slip_axes_array(lat=[0, 0, 0])
    with pytest.raises(ShapeError, match=r"slip_axes: expected shape \(4, 3\)"):
        predict(m, tr.flat(), q0, np.ones((2, 4)), 0.1, slip_axes=np.eye(3))
    # swapping lon to the lateral axis: p2 now acts on V_lat-direction speed, which is zero
    axes = slip_axes_array(lon=[0, 1, 0], lat=[1, 0, 0])
    qd, _, _ = _first_step(m, tr.flat(), q0, [10, 10, 10, 10], [0, -0.1, 0, 0, 0, 0],
                           slip_axes=axes)
    assert qd[3] == pytest.approx(1.0, abs=1e-12)


# ---- stability margin ------------------------------------------------------------------------


def test_support_polygon_is_ccw_hull():
    rng = np.random.default_rng(2)
    pts = rng.normal(size=(12, 2))
    from scipy.spatial import ConvexHull

    hull = support_polygon(pts)
    assert set(hull.tolist()) == set(ConvexHull(pts).vertices.tolist())
    P = pts[hull]
    area = 0.5 * np.sum(P[:, 0] * np.roll(P[:, 1], -1) - np.roll(P[:, 0], -1) * P[:, 1])
    assert area == pytest.approx(ConvexHull(pts).volume, rel=1e-12)  # positive: CCW


def _cg_height(m, q0):
    _, c = inertia_mass_com(composite_inertia(m, q0))
    return c[2] + R_WHEEL


@pytest.mark.parametrize("com_height", [0.2, 0.5])
def test_margin_in_steady_turn_matches_rigid_tipover_condition(com_height):
    """margin = track/2 - h v w / g (lateral edge) for a rigid vehicle in a steady turn."""
    L, W = 1.6, 1.0
    m = _skid(wheelbase=L, track=W, com_height=com_height)
    q0, _ = kin.initialize_contact(m, tr.flat())
    h = _cg_height(m, q0)
    base = np.array([0.0, 1.0, 0.0, 1.0])  # right wheels only: pivot turn about the left side
    for scale in [0.0, 5.0, 20.0, 40.0]:
        pr = predict(m, tr.flat(), q0, (scale * base)[None], 0.01)
        w, v = pr.qdot[0, 0, 2], pr.qdot[0, 0, 3]
        expected = min(L / 2, W / 2 - h * w * v / g)
        assert pr.stability_margin[0, 0] == pytest.approx(expected, abs=1e-9)
    # zero crossing exactly at h v w = g W / 2 (v and w both scale with the wheel rates)
    pr1 = predict(m, tr.flat(), q0, base[None], 0.01)
    a1 = pr1.qdot[0, 0, 2] * pr1.qdot[0, 0, 3]
    s_star = math.sqrt(g * W / 2 / (h * a1))
    below = predict(m, tr.flat(), q0, (0.98 * s_star * base)[None], 0.01)
    above = predict(m, tr.flat(), q0, (1.02 * s_star * base)[None], 0.01)
    assert below.stability_margin[0, 0] > 0 > above.stability_margin[0, 0]
    assert not below.flags[0, 0] & TIPOVER_RISK
    assert above.flags[0, 0] & TIPOVER_RISK


def test_margin_decreases_with_speed_and_cg_height():
    margins = {}
    for hc in (0.1, 0.4):
        m = _skid(wheelbase=1.6, com_height=hc)
        q0, _ = kin.initialize_contact(m, tr.flat())
        for s in (5.0, 10.0):
            pr = predict(m, tr.flat(), q0, np.array([[s, 2 * s, s, 2 * s]]), 0.01)
            margins[hc, s] = pr.stability_margin[0, 0]
    assert margins[0.1, 5.0] > margins[0.1, 10.0]
    assert margins[0.1, 10.0] > margins[0.4, 10.0]
    assert margins[0.1, 5.0] > margins[0.4, 5.0]


def test_static_side_slope_tip_angle():
    """At rest on a side slope: margin = W/2 - h tan(slope); zero at tan(slope) = W / (2 h)."""
    W = 1.0
    m = _skid(wheelbase=1.6, track=W, com_height=0.6)
    q_level, _ = kin.initialize_contact(m, tr.flat())
    h = _cg_height(m, q_level)
    crit = math.atan(W / (2 * h))
    for slope in (0.1, 0.95 * crit, 1.05 * crit):
        terrain = tr.inclined_plane(slope, math.pi / 2)
        q0, _ = kin.initialize_contact(m, terrain)
        pr = predict(m, terrain, q0, np.zeros((1, 4)), 0.01)
        assert pr.stability_margin[0, 0] == pytest.approx(W / 2 - h * math.tan(slope), abs=1e-8)
    assert pr.stability_margin[0, 0] < 0


def test_margin_is_nan_without_mass():
    spec = skid_steer_spec(mass=0.0, wheel_mass=0.0)
    m = compile_vehicle(spec)
    q0, _ = kin.initialize_contact(m, tr.flat())
    pr = predict(m, tr.flat(), q0, np.ones((3, 4)), 0.1, fidelity="enhanced",
                 slip_params=[0, -0.1, 0.5, 0, 0, 0])
    assert np.isnan(pr.stability_margin).all()
    assert pr.qdot[0, 0, 3] == pytest.approx(0.9 * 0.1, rel=1e-9)  # p2 needs no force
