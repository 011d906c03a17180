"""Tracked vehicles in the constrained dynamics (issue 9): belt patches as contacts.

Oracles: statics (sum of contact forces = m g; creep on a slope from the linear slip law),
steady states of the linear slip law solved independently from the contact geometry (straight
drive with rolling resistance, spin and circle for belt and ICR friction directions), and the
closed-form ICR geometry (seed 003 Fig. 2).
"""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import yaml

from wmr_model import kinematics as kin
from wmr_model.contact.models import DEFAULT_MU, SATURATION_SLIP, STATIC_SINKAGE
from wmr_model.dynamics.simulate import simulate_dynamics
from wmr_model.dynamics.stiff import simulate_stiff
from wmr_model.dynamics.track_contact import icr_contact_frames, icr_map, icr_point
from wmr_model.errors import ParameterError
from wmr_model.io.vehicles import load_vehicle, vehicle_files
from wmr_model.prediction.controllers import FLIPPERS_FLAT, track_rates
from wmr_model.spatial import quat_to_rot
from wmr_model.terrain.surface import flat, inclined_plane

G = 9.80665
DT = 0.01
R_S = 0.09  # Absolem sprocket radius [m]
B = 0.4  # distance between the main belts' centrelines [m]


@pytest.fixture(scope="module")
def absolem():
    return load_vehicle("absolem")


def _placed(model, terrain, flippers=FLIPPERS_FLAT):
    q = model.neutral_state()
    q[9:13] = flippers
    q, _ = kin.initialize_contact(model, terrain, q)
    return q


@pytest.fixture(scope="module")
def rest(absolem):
    """Absolem dropped onto flat ground (flippers raised), 1.5 s at zero command."""
    q0 = _placed(absolem, flat())
    tr = simulate_dynamics(absolem, flat(), q0, np.zeros(absolem.nv), np.zeros((150, 6)), DT)
    return q0, tr


def _contact_frames(model, terrain, q):
    data = kin.create_data(model)
    kin.forward_kinematics(model, data, q)
    kin.wheel_contact(model, data, terrain)
    return data.T_contact.copy(), data.dz.copy(), data.T_world.copy()


def _shares(model, T_world):
    """The documented load-sharing rule on flat ground z = 0, written out again from the
    sub-point heights (track_contact docstring): shares l_k / sum l_j and mean penetrations
    P_k / l_k of the patches."""
    M = model.track_path.shape[1]
    l_k = np.zeros(model.ntp)
    P_k = np.zeros(model.ntp)
    for k in range(model.ntp):
        T = T_world[model.track_frame[k]]
        pts = model.track_path[k, :, :3] @ T[:3, :3].T + T[:3, 3]
        pen = -pts[:, 2]
        seg = np.linalg.norm(np.diff(pts, axis=0), axis=1)
        for j in range(M - 1):
            a, b = pen[j], pen[j + 1]
            if a > 0 and b > 0:
                l_k[k] += seg[j]
                P_k[k] += seg[j] * (a + b) / 2
            elif max(a, b) > 0:
                f = max(a, b) / (abs(a) + abs(b))
                l_k[k] += seg[j] * f
                P_k[k] += seg[j] * f * max(a, b) / 2
    tot = np.bincount(model.track_of, weights=l_k, minlength=len(model.track_names))
    t = tot[model.track_of]
    share = np.divide(l_k, t, out=np.zeros_like(l_k), where=t > 0)
    return share, np.divide(P_k, l_k, out=np.zeros_like(l_k), where=l_k > 0)


def test_errors(absolem):
    q0 = _placed(absolem, flat())
    U = np.zeros((2, 6))
    with pytest.raises(ParameterError, match=r"friction_directions must be one of "
                                             r"\['belt', 'icr'\], got 'wheel'"):
        simulate_dynamics(absolem, flat(), q0, np.zeros(absolem.nv), U, DT,
                          friction_directions="wheel")
    with pytest.raises(ParameterError, match=r"steering_efficiency must be in \(0, 1\], got 1.5"):
        simulate_dynamics(absolem, flat(), q0, np.zeros(absolem.nv), U, DT,
                          friction_directions="icr", steering_efficiency=1.5)
    with pytest.raises(ParameterError, match=r"stiff ODE handles wheel contacts only; absolem "
                                             r"has 88 track patches"):
        simulate_stiff(absolem, flat(), q0, np.zeros(absolem.nv), U, DT, actuator="p")
    rocky = load_vehicle("rocky7")
    with pytest.raises(ParameterError, match=r"friction_directions='icr' needs tracks; rocky7"):
        simulate_dynamics(rocky, flat(), rocky.neutral_state(), np.zeros(rocky.nv),
                          np.zeros((2, len(rocky.actuated_joints))), DT,
                          friction_directions="icr")
    _, side = vehicle_files("absolem")
    sc = yaml.safe_load(open(side, encoding="utf-8"))
    sc.setdefault("options", {})["track_contact"] = {"middle": {"contact_model": "pacejka"}}
    bad = load_vehicle("absolem", sc)
    with pytest.raises(ParameterError, match=r"options.track_contact names unknown tracks "
                                             r"\['middle'\]"):
        simulate_dynamics(bad, flat(), q0, np.zeros(bad.nv), U, DT)


def test_rest_on_flat_ground(absolem, rest):
    """Sum of the world-frame contact forces = m g, shares follow the rule, no drift."""
    q0, tr = rest
    mg = absolem.total_mass * G
    assert tr.f_contact.shape == (150, absolem.nc, 3)
    T_c, dz, T_w = _contact_frames(absolem, flat(), tr.q[-2])  # the last step's state
    F = np.einsum("kij,kj->i", T_c[:, :3, :3], tr.f_contact[-1])
    assert F[2] == pytest.approx(mg, rel=0.01)
    assert abs(F[0]) < 1e-3 * mg and abs(F[1]) < 1e-3 * mg
    # clear patches carry nothing; the patches in contact carry their share of the track's
    # normal force law K p_k (+ damping, ~0 at rest): f_k / (share_k p_k) is one K per track
    clear = dz >= 0.0
    assert clear.any() and np.all(tr.f_contact[-1][clear] == 0.0)
    sh, pen = _shares(absolem, T_w)
    inc = sh > 0
    assert np.array_equal(inc, tr.f_contact[-1, :, 2] > 0)
    for t in range(2):  # the main tracks' shares sum to 1
        assert sh[absolem.track_of == t].sum() == pytest.approx(1.0, rel=1e-12)
    K = tr.f_contact[-1, inc, 2] / (sh[inc] * pen[inc])
    assert np.allclose(K, K[0], rtol=0.02)
    # at rest: sinkage ~ the default static sinkage, body still, no horizontal drift
    sink = q0[6] - tr.q[-1, 6]
    assert sink == pytest.approx(STATIC_SINKAGE, rel=0.1)
    assert np.abs(tr.qdot[-1, :6]).max() < 1e-3
    assert np.linalg.norm(tr.q[-1, 4:6] - q0[4:6]) < 1e-3


def test_sinkage_independent_of_patch_count():
    """The whole-track force is shared: 10, 20 or 40 patches per belt sink alike."""
    _, side = vehicle_files("absolem")
    base = yaml.safe_load(open(side, encoding="utf-8"))
    sink = {}
    for n in (10, 20, 40):
        sc = copy.deepcopy(base)
        for t in sc["tracks"].values():
            t["samples"] = n
        m = load_vehicle("absolem", sc)
        q0 = _placed(m, flat())
        tr = simulate_dynamics(m, flat(), q0, np.zeros(m.nv), np.zeros((120, 6)), DT)
        T_c, _, _ = _contact_frames(m, flat(), tr.q[-2])
        Fz = np.einsum("kij,kj->i", T_c[:, :3, :3], tr.f_contact[-1])[2]
        assert Fz == pytest.approx(m.total_mass * G, rel=0.01)
        sink[n] = q0[6] - tr.q[-1, 6]
    assert max(sink.values()) - min(sink.values()) < 0.03 * STATIC_SINKAGE, sink
    for s in sink.values():
        assert s == pytest.approx(STATIC_SINKAGE, rel=0.1)


def _steady(model, q, qd, left, right, n, **kw):
    U = track_rates(model, np.full(n, left), np.full(n, right))
    return simulate_dynamics(model, flat(), q, qd, U, DT, **kw)


def test_straight_drive_slip(absolem, rest):
    """No resistance: the body moves at the belt speed (slip -> 0). Rolling resistance Crr:
    each patch's longitudinal force -(C v_x + Crr R w) (C.5) vanishes in steady state, so
    ``V = R w (1 - Crr / C)`` with C the track's slip gain (mu W / saturation slip)."""
    _, tr0 = rest
    q, qd = tr0.q[-1], tr0.qdot[-1]
    tr = _steady(absolem, q, qd, 0.3, 0.3, 150)
    assert tr.qdot[-1, 3] == pytest.approx(0.3, rel=5e-3)
    assert abs(tr.qdot[-1, 2]) < 1e-6 and abs(tr.qdot[-1, 4]) < 1e-6
    C = DEFAULT_MU * absolem.total_mass * G / 2.0 / SATURATION_SLIP
    Crr = 0.1 * C
    tr = _steady(absolem, q, qd, 0.3, 0.3, 150, contact_params={"Crr": Crr})
    assert tr.qdot[-1, 3] == pytest.approx(0.3 * (1.0 - Crr / C), rel=5e-3)


def _linear_steady_state(model, q, left, right, fdir, chi=1.0):
    """Planar steady state (vx, vy, wz) of the linear slip law (C.5)-(C.6) without saturation:
    sum of forces and yaw moment zero, from the contact geometry at ``q`` alone."""
    T_c, _, T_w = _contact_frames(model, flat(), q)
    s = _shares(model, T_w)[0]
    R = quat_to_rot(q[0:4])
    left_track = model.track_of == model.track_names.index("left")
    speed = np.where(np.isin(model.track_drive, [model.track_drive[left_track][0]]), left,
                     right)
    p = T_c[:, :3, 3] - q[4:7]
    ex, ey = T_c[:, :3, 0].copy(), T_c[:, :3, 1].copy()
    if fdir == "icr" and left != right:
        v, w = 0.5 * (left + right), chi * (right - left) / B
        c = R @ np.array([0.0, v / w, 0.0])
        t = np.cross(R[:, 2], p - c)
        n = T_c[:, :3, 2]
        t -= np.sum(t * n, axis=1)[:, None] * n
        t /= np.linalg.norm(t, axis=1)[:, None]
        t *= np.sign(np.sum(t * ex, axis=1))[:, None]
        ex, ey = t, np.cross(n, t)
    C = 1.0  # equal x and y gains: the steady state does not depend on their value

    def net(x):
        vx, vy, w = x
        vel = (R @ np.array([vx, vy, 0.0]))[None, :] + np.cross(w * R[:, 2], p)
        f = -C * s[:, None] * (np.sum(vel * ex, axis=1)[:, None] * ex - speed[:, None] * ex
                              + np.sum(vel * ey, axis=1)[:, None] * ey)
        F = R.T @ f.sum(axis=0)
        Mz = np.cross(p, f).sum(axis=0) @ R[:, 2]
        return np.array([F[0], F[1], Mz])

    b = net(np.zeros(3))
    J = np.column_stack([net(e) - b for e in np.eye(3)])
    return np.linalg.solve(J, -b)


@pytest.mark.parametrize("fdir", ["belt", "icr"])
@pytest.mark.parametrize("left,right", [(-0.05, 0.05), (0.05, 0.15)])
def test_turning_linear_regime(absolem, rest, fdir, left, right):
    """Spin and circle with friction far from saturation (mu 100): the simulated steady body
    velocity matches the force/moment balance of the linear slip law."""
    _, tr0 = rest
    tr = _steady(absolem, tr0.q[-1], tr0.qdot[-1], left, right, 150,
                 contact_params={"mu_x": 100.0, "mu_y": 100.0}, friction_directions=fdir)
    sim = tr.qdot[-1, [3, 4, 2]]
    ref = _linear_steady_state(absolem, tr.q[-1], left, right, fdir)
    scale = max(abs(left), abs(right))
    assert np.allclose(sim[:2], ref[:2], atol=0.02 * scale), (sim, ref)
    assert sim[2] == pytest.approx(ref[2], rel=0.02), (sim, ref)
    if fdir == "icr" and left == -right:
        # spin about the centre with axes on circles about it: only longitudinal slip
        # w r_k - V, whose moment sum s_k r_k (w r_k - V) vanishes at w = V S1 / S2
        T_c, _, T_w = _contact_frames(absolem, flat(), tr.q[-1])
        r = np.linalg.norm((T_c[:, :3, 3] - tr.q[-1, 4:7])[:, :2], axis=1)
        sh = _shares(absolem, T_w)[0]
        assert sim[2] == pytest.approx(right * (sh @ r) / (sh @ r**2), rel=0.02)


def test_spin_default_friction(absolem, rest):
    """Saturated friction (mu 0.8): the yaw rate has the commanded sign and stays below the
    no-slip differential-drive rate; ICR directions resist the turn less than belt ones."""
    _, tr0 = rest
    w = {}
    for fdir in ("belt", "icr"):
        tr = _steady(absolem, tr0.q[-1], tr0.qdot[-1], -0.1, 0.1, 150,
                     friction_directions=fdir)
        w[fdir] = tr.qdot[-1, 2]
        assert 0.0 < w[fdir] < 0.1 / (0.5 * B)
        assert abs(tr.qdot[-1, 3]) < 0.01
    tr = _steady(absolem, tr0.q[-1], tr0.qdot[-1], 0.1, -0.1, 100)
    assert tr.qdot[-1, 2] < 0.0


def test_icr_geometry(absolem):
    """Closed forms: icr_map is differential drive scaled by chi; the rotated axes are
    perpendicular to the line to the ICR; a straight command keeps the belt axes."""
    m = icr_map(absolem, steering_efficiency=0.8)
    u = track_rates(absolem, np.array([0.1]), np.array([0.3]))[0]
    straight, xi, yi = icr_point(m, u)
    assert not straight and xi == 0.0
    v, w = 0.2, 0.8 * 0.2 / B
    assert yi == pytest.approx(v / w, rel=1e-9)
    assert icr_point(m, track_rates(absolem, np.array([0.3]), np.array([0.3]))[0])[0]
    assert icr_point(m, np.zeros(6))[0]
    rng = np.random.default_rng(3)
    T_world = np.zeros((absolem.nf, 4, 4))
    T_world[0] = np.eye(4)
    T_world[0, :3, 3] = [0.3, -0.2, 0.1]
    n = 6
    T_c = np.zeros((n, 4, 4))
    T_c[:, :3, :3] = np.eye(3)
    T_c[:, :3, 3] = rng.uniform(-0.5, 0.5, (n, 3))
    T_c[:, 3, 3] = 1.0
    before = T_c.copy()
    icr_contact_frames(T_world, T_c, 0, n, 0.0, 0.7)
    c = T_world[0, :3, 3] + [0.0, 0.7, 0.0]
    for k in range(n):
        x = T_c[k, :3, 0]
        d = T_c[k, :3, 3] - c
        assert abs(x @ d) < 1e-12  # perpendicular to the line to the ICR
        assert x[0] >= 0.0 and np.linalg.norm(x) == pytest.approx(1.0)
        assert np.allclose(np.cross(T_c[k, :3, 2], x), T_c[k, :3, 1])
        assert np.allclose(T_c[k, :3, 2], before[k, :3, 2])


def test_standing_on_slope_creeps_as_friction_predicts(absolem):
    """15 deg slope, belts held: the linear slip law (C.5) carries m g sin(theta) by creeping
    at ``v = m g sin(theta) / C_total``, ``C_total = mu m g / saturation slip`` (both tracks):
    ``v = SATURATION_SLIP sin(theta) / mu`` = 3.2 mm/s downhill, bounded (no acceleration)."""
    th = math.radians(15.0)
    ter = inclined_plane(th)
    q0 = _placed(absolem, ter)
    tr = simulate_dynamics(absolem, ter, q0, np.zeros(absolem.nv), np.zeros((200, 6)), DT)
    creep = SATURATION_SLIP * math.sin(th) / DEFAULT_MU
    v = tr.qdot[-50:, 3]
    assert np.all(v < 0.0)
    assert np.mean(v) == pytest.approx(-creep, rel=0.05)
    assert abs(tr.qdot[-1, 4]) < 1e-4 and abs(tr.qdot[-1, 2]) < 1e-4


def test_dynamic_suite_flat(absolem):
    """Dynamic variant of the seed-003 flat scenarios (10 s each, as in the suite)."""
    from wmr_model.experiments.tracks import run_dynamic_scenario

    r = run_dynamic_scenario(absolem, "straight")
    assert r.metrics["d_t"] <= 0.1
    r = run_dynamic_scenario(absolem, "back_and_forth")
    assert r.metrics["d_st"] <= 0.05
    for fdir in ("belt", "icr"):
        # commanded with the kinematic (least-squares) track speeds for 0.6 rad/s: the
        # dynamics turn the same way, with the centre nearly still
        r = run_dynamic_scenario(absolem, "rotate", friction_directions=fdir)
        assert r.metrics["yaw"] > 3.0 and r.metrics["centre_drift"] < 0.05
        r = run_dynamic_scenario(absolem, "circular", friction_directions=fdir)
        assert r.metrics["yaw"] > 3.0 and 0.3 < r.metrics["radius"] < 0.6
