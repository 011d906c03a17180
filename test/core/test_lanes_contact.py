"""Float32 lane collision detection (:mod:`wmr_model.kinematics.lanes.contact`, issue 22).

Oracle: the scalar float64 :func:`~wmr_model.kinematics.wheel_collision.wheel_contact_into` with
its warm workspace, eqs. (2.8)-(2.9), fed the same states: Zoë's states along scalar-predicted
trajectories over the batch terrain of ``bench/profile_predict.py``, every step in order, so
that the first call's fan search, the warm bracket (with its walk and fit) and the fan's
returns (travel, unbracketed minimum) all occur; each branch is asserted to have run.

Tolerances (float32 eps = 1.2e-7; world coordinates up to ~12 m, heights and z below ~1.5 m):

* Δz: 4e-6 m. The input frames are rounded to float32 (a wheel centre by up to 7e-7 m at 12 m),
  which moves the contact point and so the terrain height under it by up to the slope (< 1.5)
  times that; ~4x margin for the float32 arithmetic after it (observed max 1e-6 m).
* contact angle: 5e-5 rad, or a tie. A warm fit offset is ``h/2 (f- - f+) / den`` with
  den ~ R h^2 = 6e-4 m; Δz values resolved to ~3e-8 m (a few ulps of z ~ 1 m) give ~2e-6 rad,
  x25 margin. A tie: the scalar and the lane kernel made a decision on values equal to float32
  round-off (a fit taken or rejected on a Δz difference of 1e-8 m, a fan point chosen), so they
  ended at different but equally low contacts: the float64 Δz at the lane's angle is within
  TIE_DZ = 1e-7 m of the scalar's minimum (~3x the Δz resolution, observed max 4e-8 m), and the
  angles differ by at most the bracket WARM_CONTACT_BRACKET (the fit's clamp). Ties are rare
  (at most 1 % of the contacts; observed 0.3 %).
* contact frame at the lane's angle against the float64 frame at that angle (a point on the
  wheel and the terrain normal there): point 4e-6 m (as Δz: the centre's rounding plus float32
  arithmetic), axes 2e-5 (slopes from float32 node heights and fractions, ~1e-6). Bilinear
  normals jump across grid lines: a point within round-off (~1e-6 m) of one may take either
  cell's normal, so the normal is also compared with the float64 ones 1e-5 m to either side.
"""

from __future__ import annotations

import numpy as np
import pytest

from wmr_model.experiments.kinematic import BATCH_QPRIME, BATCH_SLIP, random_twist_candidates
from wmr_model.io.vehicles import load_vehicle
from wmr_model.kinematics.lanes.contact import (
    COUNT_NAMES,
    contact_lanes,
    contact_lanes_workspace,
    terrain_height_normal_lanes,
)
from wmr_model.kinematics.wheel_collision import (
    WARM_CONTACT_BRACKET,
    contact_workspace,
    wheel_contact_into,
)
from wmr_model.prediction.predict import predict
from wmr_model.terrain.surface import height_map, rough, zoe_ramp
from wmr_model.vehicles.tree import forward_kinematics

DT = 0.04
TOL_DZ = 4e-6  # m
TOL_ANGLE = 5e-5  # rad
TIE_DZ = 1e-7  # m
TIE_FRACTION = 0.01
TOL_POINT = 4e-6  # m
TOL_AXES = 2e-5
TOL_H = 3e-6  # m, grid lookup alone
TOL_N = 2e-5
EDGE = 1e-5  # m, grid-line neighbourhood of the normal check

COUNT = {name: i for i, name in enumerate(COUNT_NAMES)}


@pytest.fixture(scope="module")
def batch():
    """Zoë, the batch terrain of bench/profile_predict.py and 16 scalar-predicted trajectories
    (126 states each)."""
    model = load_vehicle("zoe")
    terrain = rough(0.15, 0.8, seed=0, x_range=(-10, 10), y_range=(-10, 10))
    q0, commands, _ = random_twist_candidates(model, terrain, 16, DT, 5.0, seed=0)
    pr = predict(model, terrain, q0, commands, DT, fidelity="enhanced", slip_params=BATCH_SLIP,
                 Qprime=BATCH_QPRIME)
    return model, terrain, np.ascontiguousarray(pr.q)


def _world_frames(m, Q):
    """Scalar forward kinematics of states Q (N, T, nq): T_world (T, N, nf, 4, 4) float64 and
    the lane inputs R (T, nf, 3, 3, N), p (T, nf, 3, N) float32."""
    N, T = Q.shape[:2]
    TW = np.zeros((T, N, m.parent.shape[0], 4, 4))
    for s in range(T):
        for n in range(N):
            forward_kinematics(m.parent, m.jtype, m.axis, m.T0, Q[n, s], TW[s, n])
    R = np.ascontiguousarray(np.moveaxis(TW[..., :3, :3], 1, -1), dtype=np.float32)
    p = np.ascontiguousarray(np.moveaxis(TW[..., :3, 3], 1, -1), dtype=np.float32)
    return TW, R, p


def _frame(yw, xw, n):
    """Contact frame rotation (..., 3, 3) of ``_write_contact_frame``, float64."""
    x = np.cross(yw, n)
    cn = np.linalg.norm(x, axis=-1, keepdims=True)
    d = np.sum(xw * n, axis=-1, keepdims=True)
    x = np.where(cn < 1e-6, xw - d * n, x)
    x /= np.linalg.norm(x, axis=-1, keepdims=True)
    return np.stack([x, np.cross(n, x), n], axis=-1)


def _reference(terrain, m, TW, angle):
    """Float64 contact at given angles (nw, N) for world frames TW (N, nf, 4, 4): Δz (nw, N),
    point (nw, N, 3), rotations (nw, N, 3, 3) and those with the normals 1e-5 m to either side
    of the point (V, nw, N, 3, 3)."""
    Tw = np.stack([TW[:, m.parent[i]] @ m.T0[i] for i in m.wheel_frame])  # (nw, N, 4, 4)
    xw, yw, zw, c = (Tw[..., :3, j] for j in range(4))
    s_, c_ = np.sin(angle)[..., None], np.cos(angle)[..., None]
    pt = c - m.wheel_radius[:, None, None] * (s_ * xw + c_ * zw)
    h, n = terrain.height_normal(pt[..., 0], pt[..., 1])
    dz = (pt[..., 2] - h) * n[..., 2]
    near = []
    for ex in (-EDGE, 0.0, EDGE):
        for ey in (-EDGE, 0.0, EDGE):
            near.append(_frame(yw, xw, terrain.height_normal(pt[..., 0] + ex,
                                                             pt[..., 1] + ey)[1]))
    return dz, pt, _frame(yw, xw, n), np.stack(near)


def _scalar_step(m, t, TW, ws, angle):
    """The scalar kernel for one state per lane; ``ws`` (N, nw, 7) and ``angle`` (N, nw) are
    updated. Returns Δz (nw, N), angle (nw, N), T_contact (nw, N, 4, 4) and whether each
    lane-wheel ran the fan search (the workspace's centre was rewritten)."""
    N = TW.shape[0]
    nw = m.wheel_frame.shape[0]
    dz = np.zeros((N, nw))
    Tc = np.zeros((N, nw, 4, 4))
    fan = np.zeros((N, nw), bool)
    for n in range(N):
        before = ws[n].copy()
        wheel_contact_into(m, t, TW[n], Tc[n], dz[n], angle[n], ws[n])
        fan[n] = (before[:, 0] == 0.0) | np.any(ws[n, :, 1:4] != before[:, 1:4], axis=1)
    return dz.T, angle.T.copy(), np.moveaxis(Tc, 0, 1), fan.T


class _Checks:
    """Per-contact comparison of the lane kernel with the scalar one (module docstring)."""

    def __init__(self, terrain, m):
        self.terrain, self.m = terrain, m
        self.contacts = 0  # compared with the scalar's
        self.ties = 0
        self.all = 0

    def step(self, TW, dz, angle, Rc, pc, dz_s, angle_s, Tc_s, sync):
        """Check one step's contacts: every one against the float64 contact at its own angle,
        those in ``sync`` (nw, N) against the scalar kernel's. Returns the ties (nw, N)."""
        dz64, pt64, R64, near64 = _reference(self.terrain, self.m, TW, angle.astype(float))
        Rc = np.moveaxis(Rc, -1, 1)  # (nw, N, 3, 3)
        pc = np.moveaxis(pc, -1, 1)
        # the lane's contact at its own angle: Δz, point, frame
        assert np.all(np.abs(dz - dz64) <= TOL_DZ), np.abs(dz - dz64).max()
        e_p = np.max(np.abs(pc - pt64), axis=-1)
        assert np.all(e_p <= TOL_POINT), e_p.max()
        e_r = np.max(np.abs(Rc - R64), axis=(-2, -1))
        e_near = np.min(np.max(np.abs(Rc[None] - near64), axis=(-2, -1)), axis=0)
        assert np.all(np.minimum(e_r, e_near) <= TOL_AXES), e_near.max()
        self.all += dz.size
        # against the scalar's contact
        assert np.all(np.abs(dz - dz_s)[sync] <= TOL_DZ), np.argwhere(sync)
        d_angle = np.abs(angle - angle_s)
        close = d_angle <= TOL_ANGLE
        tie = (np.abs(dz64 - dz_s) <= TIE_DZ) & (d_angle <= WARM_CONTACT_BRACKET)
        bad = sync & ~(close | tie)
        assert not bad.any(), (np.argwhere(bad), d_angle[bad], (dz64 - dz_s)[bad])
        e_ps = np.max(np.abs(pc - Tc_s[..., :3, 3]), axis=-1)
        lim = TOL_POINT + self.m.wheel_radius[:, None] * TOL_ANGLE
        assert np.all((e_ps <= lim)[sync & close])
        self.contacts += int(sync.sum())
        self.ties += int((sync & ~close).sum())
        return sync & ~close

    def done(self):
        assert self.contacts > 0
        assert self.ties <= TIE_FRACTION * self.contacts, (self.ties, self.contacts)
        # few contacts left out of the comparison with the scalar (after a tie, below)
        assert self.contacts >= 0.9 * self.all, (self.contacts, self.all)


def _run(model, terrain, Q, synced):
    """The lane kernel over every state of the trajectories Q (N, T, nq) in order, against the
    scalar kernel run per lane either with its own workspace along the trajectory (``synced``
    False) or restarted at each step from the lane kernel's workspace and angles (True: every
    step compared from the same start, with the same decisions). Returns the lane workspace.

    Running on its own, the scalar kernel's warm start depends on its previous angle: after a
    tie the two may keep different, equally valid contacts (a kink's two sides) until both run
    a fan search in the same step (which does not depend on it); such a lane-wheel is compared
    with the float64 contact at its own angle only, until then."""
    m = model.kinematic_arrays()
    t = terrain.kernel_args()
    N, T = Q.shape[:2]
    nw = m.wheel_frame.shape[0]
    TW, R, p = _world_frames(m, Q)
    ws = contact_lanes_workspace(nw, N)
    Rc = np.zeros((nw, 3, 3, N), np.float32)
    pc = np.zeros((nw, 3, N), np.float32)
    dz = np.zeros((nw, N), np.float32)
    angle = np.zeros((nw, N), np.float32)
    ws_s = np.stack([contact_workspace(nw) for _ in range(N)])
    angle_s = np.zeros((N, nw))
    checks = _Checks(terrain, m)
    apart = np.zeros((nw, N), bool)  # histories differ (free-running only)
    flips = 0  # fan decisions that differed from the same history
    for s in range(T):
        state0 = ws[0].copy()
        if synced:
            ws_s = np.ascontiguousarray(np.moveaxis(state0, -1, 0), dtype=float)
            angle_s = np.ascontiguousarray(angle.T, dtype=float)
        contact_lanes(m, t, R[s], p[s], Rc, pc, dz, angle, ws)
        fan = (state0[:, 0] == 0.0) | np.any(ws[0][:, 1:4] != state0[:, 1:4], axis=1)
        if s == 0:
            assert np.all(ws[0][:, 0] == 1.0) and np.all(fan)
            assert ws[2][COUNT["fan search"]] == nw * N
        dz_s, a_s, Tc_s, fan_s = _scalar_step(m, t, TW[s], ws_s, angle_s)
        apart &= ~(fan & fan_s)
        flip = ~apart & (fan != fan_s)
        flips += int(flip.sum())
        if synced:  # the same start: the same decisions
            assert not flip.any(), np.argwhere(flip)
        apart |= flip
        apart |= checks.step(TW[s], dz, angle, Rc, pc, dz_s, a_s, Tc_s, ~apart) & (not synced)
    checks.done()
    assert flips <= 2, flips
    return ws


def _assert_branches(ws):
    """Every branch of the search ran (counts kept in the workspace)."""
    c = ws[2]
    for name in ("warm bracket fit", "bracket slide", "fit rejected (centre lower)",
                 "fan search", "fan search (unbracketed)"):
        assert c[COUNT[name]] > 0, name
    # fans after the first call: travel or an unbracketed minimum
    nw, _, W = ws[0].shape
    assert c[COUNT["fan search"]] > nw * W + c[COUNT["fan search (unbracketed)"]]


@pytest.mark.parametrize("synced", [False, True])
def test_contact_lanes_follow_scalar_16_lanes(batch, synced) -> None:
    model, terrain, Q = batch
    ws = _run(model, terrain, Q, synced)
    _assert_branches(ws)


def test_contact_lanes_follow_scalar_5_lanes(batch) -> None:
    model, terrain, Q = batch
    ws = _run(model, terrain, np.ascontiguousarray(Q[3:8]), False)
    _assert_branches(ws)


def test_contact_lanes_nodal_grid_and_profile(batch) -> None:
    """Nodal grid normals (GRID_NORMALS) and an analytic terrain (per-lane scalar lookups)."""
    model, terrain, Q = batch
    nodal = height_map(terrain.grid, terrain.params[2:4], terrain.params[:2], normals="nodal")
    Q5 = np.ascontiguousarray(Q[:5, :60])
    _assert_branches(_run(model, nodal, Q5, False))
    ws = _run(model, zoe_ramp(1.0, half_width=0.6), Q5, True)
    assert ws[2][COUNT["warm bracket fit"]] > 0 and ws[2][COUNT["fan search"]] > 0


def test_contact_lanes_changed_angle_and_nan(batch) -> None:
    """An angle changed between calls (its sine and cosine recomputed, as the scalar kernel
    does), and a NaN lane (NaN outputs there, the other lanes unaffected)."""
    model, terrain, Q = batch
    m = model.kinematic_arrays()
    t = terrain.kernel_args()
    N = 5
    TW, R, p = _world_frames(m, np.ascontiguousarray(Q[:N, :3]))
    nw = m.wheel_frame.shape[0]
    out = []
    for poison in (False, True):
        ws = contact_lanes_workspace(nw, N)
        Rc = np.zeros((nw, 3, 3, N), np.float32)
        pc = np.zeros((nw, 3, N), np.float32)
        dz = np.zeros((nw, N), np.float32)
        angle = np.zeros((nw, N), np.float32)
        contact_lanes(m, t, R[0], p[0], Rc, pc, dz, angle, ws)
        angle[:, 1] += np.float32(0.02)
        a_s = np.ascontiguousarray(angle.T, dtype=float)
        ws_s = np.ascontiguousarray(np.moveaxis(ws[0], -1, 0), dtype=float)
        p1 = p[1].copy()
        if poison:
            p1[:, 0, 2] = np.nan  # every frame of lane 2
        contact_lanes(m, t, R[1], p1, Rc, pc, dz, angle, ws)
        assert ws[2][COUNT["angle sine/cosine recomputed"]] == nw
        out.append((dz.copy(), angle.copy(), Rc.copy(), pc.copy()))
    dz_s, angle_s, _, _ = _scalar_step(m, t, TW[1], ws_s, a_s)
    assert np.all(np.abs(out[0][0] - dz_s) <= TOL_DZ)
    assert np.all(np.abs(out[0][1] - angle_s)[:, 1] <= TOL_ANGLE)
    for a, b in zip(out[0], out[1]):
        assert np.all(np.isnan(b[..., 2])) and not np.any(np.isnan(np.delete(b, 2, -1)))
        # the same lanes; a lane's position in a vector may change its rounding (contraction)
        np.testing.assert_allclose(np.delete(b, 2, -1), np.delete(a, 2, -1), rtol=0, atol=1e-6)


@pytest.mark.parametrize("normals", ["bilinear", "nodal"])
def test_grid_lookup_matches_terrain_height_normal(batch, normals) -> None:
    """The lanes' grid lookup alone against the scalar lookup at the same (float32) points:
    inside and outside the grid (clamped), on nodes and grid lines, NaN."""
    _, terrain, _ = batch
    ter = height_map(terrain.grid, terrain.params[2:4], terrain.params[:2], normals=normals)
    rng = np.random.default_rng(1)
    x = rng.uniform(-13.0, 13.0, 300)
    y = rng.uniform(-13.0, 13.0, 300)
    nodes = -10.0 + 0.05 * rng.integers(0, 401, (2, 40))
    x = np.concatenate([x, nodes[0], nodes[0], x[:40], [np.nan, 1.0, -30.0, 30.0]])
    y = np.concatenate([y, nodes[1], y[:40], nodes[1], [1.0, np.nan, -30.0, 30.0]])
    x32 = x.astype(np.float32)
    y32 = y.astype(np.float32)
    W = 211  # two calls of odd widths
    h = np.zeros(x.shape[0], np.float32)
    n = np.zeros((3, x.shape[0]), np.float32)
    ws = contact_lanes_workspace(4, x.shape[0] - W)
    for lo, hi in ((0, W), (W, x.shape[0])):
        hh = np.zeros(hi - lo, np.float32)
        nn = np.zeros((3, hi - lo), np.float32)
        terrain_height_normal_lanes(ter.kernel_args(), x32[lo:hi], y32[lo:hi], hh, nn, ws)
        h[lo:hi] = hh
        n[:, lo:hi] = nn
    h64, n64 = ter.height_normal(x32.astype(float), y32.astype(float))
    bad = np.isnan(x) | np.isnan(y)
    assert np.all(np.isnan(h[bad])) and np.all(np.isnan(n[:, bad]))
    ok = ~bad
    assert np.all(np.abs(h - h64)[ok] <= TOL_H), np.abs(h - h64)[ok].max()
    e = np.max(np.abs(n.T - n64), axis=1)
    for ex in (-EDGE, 0.0, EDGE):
        for ey in (-EDGE, 0.0, EDGE):
            alt = ter.height_normal(x32 + ex, y32 + ey)[1]
            e = np.minimum(e, np.max(np.abs(n.T - alt), axis=1))
    assert np.all(e[ok] <= TOL_N), e[ok].max()
    outside = ok & ((np.abs(x) > 10.0) | (np.abs(y) > 10.0))
    assert outside.sum() > 50
    corner = ok & (np.abs(x) > 10.0) & (np.abs(y) > 10.0)
    assert corner.any() and np.all(n[2, corner] == 1.0)
