"""Lane rollover stability margin (float32) against the scalar float64 ``stability_margin``.

Inputs are the scalar kernels' own: states of scalar-predicted Zoë trajectories over the batch
terrain (enhanced fidelity), their ``T_world``, ``T_contact``, cg and cg force from
``enhanced_joint_space_velocity``; the same states put on steep slopes; random contact sets
of 3 to 6 contacts (3, 5, 6: the generic path); hand-made degenerate sets (the fallback
branches).

Tolerance of a lane on the vector path (first-order propagation of float32 rounding):
``4 eps (X + |m|) phi (1 + kappa H / L)`` with ``eps`` the float32 epsilon, ``X`` the largest
coordinate (the inputs are rounded to ``eps X / 2``), ``m`` the margin, ``phi = |d| / |d . n|``
(the force's obliqueness to the plane: the hit point moves ``phi`` times a shift of the
geometry), ``kappa = l2 / (l1 - l0)`` (the plane normal's conditioning: its error is about
``eps kappa X / L``), ``H`` the cg height over the plane and ``L`` the contacts' spread
``sqrt(l2)`` (the normal's error tilts the force line about the cg at lever ``H``). On the
recorded and random states the error is at most 0.65 of the unscaled model (0.16 of the
tolerance; typical tolerances are 1e-5 m); a wrong hull edge, side or normal shows as
centimetres. Lanes on the fallback path must equal the scalar kernel on their
float32-rounded inputs exactly (it is that kernel).
"""

from __future__ import annotations

import numpy as np
import pytest

from wmr_model.experiments import kinematic as ex
from wmr_model.io.vehicles import load_vehicle
from wmr_model.kinematics import api as kin
from wmr_model.kinematics import enhanced as E
from wmr_model.kinematics.lanes.margin import margin_lanes_workspace, stability_margin_lanes
from wmr_model.prediction.predict import predict
from wmr_model.spatial import STANDARD_GRAVITY
from wmr_model.terrain import surface as tr
from wmr_model.vehicles.inertia import model_frame_inertias

F32_EPS = float(np.finfo(np.float32).eps)
DT = 0.04
_FALLBACK_ROW = 11  # row of the per-lane flags in the workspace's ``lane`` scratch


@pytest.fixture(scope="module")
def zoe_states():
    """(T_world, T_contact, c, f_cg) of every step of 8 scalar-predicted Zoë candidates."""
    m = load_vehicle("zoe")
    terrain = tr.rough(0.15, 0.8, seed=0, x_range=(-10, 10), y_range=(-10, 10))
    n = 8
    q0, commands, _ = ex.random_twist_candidates(m, terrain, n, DT, 5.0, seed=0)
    T = commands.shape[1]
    pr = predict(m, terrain, q0, commands, DT, fidelity="enhanced", slip_params=ex.BATCH_SLIP,
                 Qprime=ex.BATCH_QPRIME)
    a = m.kinematic_arrays()
    tg = terrain.kernel_args()
    known = kin.simulation_known(m)
    qcmd = np.zeros((n, T, m.nv))
    qcmd[:, :, 6 + m.actuated_joints] = commands
    sigma = kin.DEFAULT_STABILIZATION / DT
    vc = np.zeros((m.nc, 2))
    slip = E.BodySlip(model_frame_inertias(m), np.array([0.0, 0.0, -STANDARD_GRAVITY]),
                      np.ascontiguousarray(ex.BATCH_SLIP, dtype=float), E.slip_axes_array(),
                      True)
    Tw, Tc, cs, fs = [], [], [], []
    for i in range(n):
        d = kin.create_data(m, known)
        for t in range(T):
            E.enhanced_joint_space_velocity(a, tg, d.kernel, pr.q[i, t], known, qcmd[i, t],
                                            sigma, vc, d.qdot, slip)
            Tw.append(d.T_world.copy())
            Tc.append(d.T_contact.copy())
            cs.append(d.cg.copy())
            fs.append(d.f_cg.copy())
    return np.array(Tw), np.array(Tc), np.array(cs), np.array(fs)


def _scalar(Tw, Tc, c, f):
    return np.array([E.stability_margin(Tw[i], Tc[i], c[i], f[i]) for i in range(len(Tw))])


def _run_lanes(Tw, Tc, c, f, W):
    """The lane kernel over the states in batches of W (the last one padded with copies of the
    first state); returns the margins and the per-state fallback flags."""
    N = len(Tw)
    nc = Tc.shape[1]
    ws = margin_lanes_workspace(nc, W)
    out = np.empty(W, np.float32)
    res = np.empty(N)
    fb = np.zeros(N, bool)
    f4 = np.float32
    for s in range(0, N, W):
        idx = np.arange(s, s + W)
        idx[idx >= N] = 0
        lanes = (np.ascontiguousarray(np.moveaxis(Tw[idx, :, :3, :3], 0, -1), f4),
                 np.ascontiguousarray(np.moveaxis(Tw[idx, :, :3, 3], 0, -1), f4),
                 np.ascontiguousarray(np.moveaxis(Tc[idx, :, :3, :3], 0, -1), f4),
                 np.ascontiguousarray(np.moveaxis(Tc[idx, :, :3, 3], 0, -1), f4),
                 np.ascontiguousarray(c[idx].T, f4), np.ascontiguousarray(f[idx].T, f4))
        stability_margin_lanes(*lanes, out, ws)
        k = min(W, N - s)
        res[s:s + k] = out[:k]
        fb[s:s + k] = ws[3][_FALLBACK_ROW, :k] != 0
    return res, fb, int(ws[-1][0])


def _rounded(x):
    return np.asarray(x, np.float32).astype(np.float64)


def _tolerance(Tw, Tc, c, f, m):
    """The first-order float32 error bound of the module docstring, per state."""
    tol = np.empty(len(Tw))
    for i in range(len(Tw)):
        P = Tc[i, :, :3, 3]
        o = P.mean(0)
        w, V = np.linalg.eigh((P - o).T @ (P - o))
        n = V[:, 0]
        Rb = Tw[i, 0, :3, :3]
        d = Rb @ f[i, 3:]
        phi = np.linalg.norm(d) / abs(d @ n)
        H = abs((Rb @ c[i] + Tw[i, 0, :3, 3] - o) @ n)
        kappa = w[2] / (w[1] - w[0])
        X = max(np.abs(P).max(), np.abs(Tw[i, 0, :3, 3]).max())
        mm = abs(m[i]) if np.isfinite(m[i]) else 0.0
        tol[i] = 4 * F32_EPS * (X + mm) * phi * (1 + kappa * H / np.sqrt(w[2]))
    return tol


def _check(Tw, Tc, c, f, W, max_fallback=0.05):
    """Lanes against the scalar kernel (module docstring); returns (lane margins, fallback
    flags, scalar margins)."""
    ref = _scalar(Tw, Tc, c, f)
    got, fb, count = _run_lanes(Tw, Tc, c, f, W)
    assert count >= fb.sum()  # padded lanes may fall back too
    # fallback lanes: the scalar kernel itself, on the float32 inputs
    if fb.any():
        i = np.flatnonzero(fb)
        exact = _scalar(_rounded(Tw[i]), _rounded(Tc[i]), _rounded(c[i]), _rounded(f[i]))
        np.testing.assert_array_equal(got[i], exact.astype(np.float32).astype(np.float64))
    assert fb.mean() <= max_fallback
    vec = ~fb
    # -inf (force pointing out of the ground) decided alike
    np.testing.assert_array_equal(np.isneginf(got[vec]), np.isneginf(ref[vec]))
    fin = vec & np.isfinite(ref)
    err = np.abs(got[fin] - ref[fin])
    tol = _tolerance(Tw[fin], Tc[fin], c[fin], f[fin], ref[fin])
    assert np.all(err <= tol), (err / tol).max()
    return got, fb, ref


@pytest.mark.parametrize("W", [16, 5])
def test_zoe_trajectory_states_match_scalar(zoe_states, W):
    Tw, Tc, c, f = zoe_states
    _, fb, ref = _check(Tw, Tc, c, f, W, max_fallback=0.02)
    # the states cover both signs and the -inf branch on the vector path
    vec = ~fb
    assert (ref[vec] > 0).any() and (np.isfinite(ref[vec]) & (ref[vec] < 0)).any()
    assert np.isneginf(ref[vec]).any()


def _on_slope(Tw, Tc, c, f, axis, angle):
    """The states turned by ``angle`` about a horizontal world axis with the world force
    direction kept (a vehicle on a slope in the same gravity): frames ``Q T``, body force
    ``Rb'^T Rb f``."""
    u = np.asarray(axis, float) / np.linalg.norm(axis)
    K = np.array([[0, -u[2], u[1]], [u[2], 0, -u[0]], [-u[1], u[0], 0]])
    Q = np.eye(3) + np.sin(angle) * K + (1 - np.cos(angle)) * K @ K
    Tw2 = Tw.copy()
    Tc2 = Tc.copy()
    Tw2[:, :, :3, :] = np.einsum("ij,nfjk->nfik", Q, Tw[:, :, :3, :])
    Tc2[:, :, :3, :] = np.einsum("ij,nfjk->nfik", Q, Tc[:, :, :3, :])
    f2 = f.copy()
    for i in range(len(f)):
        d = Tw[i, 0, :3, :3] @ f[i, 3:]
        f2[i, 3:] = Tw2[i, 0, :3, :3].T @ d
    return Tw2, Tc2, c, f2


@pytest.mark.parametrize("W", [16, 5])
def test_steep_slopes_negative_margins_match_scalar(zoe_states, W):
    Tw, Tc, c, f = zoe_states
    sel = np.arange(0, len(Tw), 37)  # a spread of states
    parts = [_on_slope(Tw[sel], Tc[sel], c[sel], f[sel], axis, ang)
             for axis in ([1.0, 0.0, 0.0], [0.3, 1.0, 0.0])
             for ang in np.radians([20.0, 40.0, 60.0, 75.0, -55.0])]
    Tw2, Tc2, c2, f2 = (np.concatenate(x) for x in zip(*parts))
    got, fb, ref = _check(Tw2, Tc2, c2, f2, W)
    tipped = ~fb & np.isfinite(ref) & (ref < -0.05)
    assert tipped.sum() >= 20  # steep tilts put the force line outside the polygon
    assert np.all(got[tipped] < 0)


def test_generic_path_five_contacts(zoe_states):
    """A fifth contact inside Zoë's four (its centroid, raised 2 cm): the general-size hull
    path, and a contact that is not a hull vertex."""
    Tw, Tc, c, f = zoe_states
    sel = np.arange(0, len(Tw), 5)
    Tc5 = np.concatenate([Tc[sel], Tc[sel, :1]], axis=1)
    Tc5[:, 4, :3, 3] = Tc[sel, :, :3, 3].mean(1) + 0.02 * Tc[sel, 0, :3, 2]
    _check(Tw[sel], Tc5, c[sel], f[sel], 16)
    _check(Tw[sel], Tc5, c[sel], f[sel], 5)


def _random_sets(nc, n, rng):
    """n random contact sets of nc contacts around a ring near a tilted plane (a vehicle's
    spread, not slivers), the body above them, a force mostly into the plane; every other set
    of 5 or more with a contact inside the hull of the others."""
    Tw = np.zeros((n, 1, 4, 4))
    Tc = np.zeros((n, nc, 4, 4))
    c = np.zeros((n, 3))
    f = np.zeros((n, 6))
    for i in range(n):
        A = np.linalg.qr(rng.normal(size=(3, 3)))[0]
        A *= np.sign(np.linalg.det(A))
        Rp = A if A[2, 2] > 0.3 else np.eye(3)  # plane frame: its z is the plane normal
        base = rng.uniform(-8, 8, 3)
        th = 2 * np.pi * np.arange(nc) / nc + rng.uniform(-0.3, 0.3, nc)
        rad = rng.uniform(0.5, 1.2, nc)
        if nc >= 5 and i % 2:
            rad[rng.integers(nc)] = 0.2  # a contact inside the hull of the others
        xy = np.c_[rad * np.cos(th), rad * np.sin(th)]
        z = rng.normal(scale=0.03, size=nc)
        P = base + (np.c_[xy, z]) @ Rp.T
        tilt = np.linalg.qr(np.eye(3) + 0.2 * rng.normal(size=(3, 3)))[0]
        tilt *= np.sign(np.diag(tilt))
        Rb = Rp @ tilt
        Tw[i, 0, :3, :3] = Rb
        Tw[i, 0, :3, 3] = base + Rp[:, 2] * 0.5
        Tw[i, 0, 3, 3] = 1.0
        for k in range(nc):
            Tc[i, k, :3, :3] = Rp
            Tc[i, k, :3, 3] = P[k]
            Tc[i, k, 3, 3] = 1.0
        c[i] = rng.normal(scale=0.1, size=3)
        f[i, 3:] = Rb.T @ (-300.0 * Rp[:, 2] + rng.normal(scale=150.0, size=3))
        f[i, :3] = rng.normal(size=3)
    return Tw, Tc, c, f


@pytest.mark.parametrize("nc", [3, 4, 5, 6])
def test_random_contact_sets_match_scalar(nc):
    Tw, Tc, c, f = _random_sets(nc, 96, np.random.default_rng(nc))
    _, fb, ref = _check(Tw, Tc, c, f, 16)
    assert (ref[~fb] > 0).any() and (ref[~fb] < 0).any()


def _case(points, normal=(0.0, 0.0, 1.0), force=(0.0, 0.0, -500.0), body=(0.0, 0.0, 0.5)):
    P = np.asarray(points, float)
    Tw = np.zeros((1, 1, 4, 4))
    Tw[0, 0] = np.eye(4)
    Tw[0, 0, :3, 3] = body
    Tc = np.zeros((1, len(P), 4, 4))
    n = np.asarray(normal, float) / np.linalg.norm(normal)
    for k in range(len(P)):
        Tc[0, k] = np.eye(4)
        Tc[0, k, :3, 2] = n
        Tc[0, k, :3, 3] = P[k]
    f = np.zeros((1, 6))
    f[0, 3:] = force
    return Tw, Tc, np.array([[0.05, -0.02, 0.0]]), f


_SQUARE = [[0.6, 0.4, 0.0], [-0.6, 0.4, 0.0], [-0.6, -0.4, 0.0], [0.6, -0.4, 0.01]]


@pytest.mark.parametrize("name, points, kw, vector", [
    # on the vector path
    ("square", _SQUARE, {}, True),
    ("contact inside the others' triangle", [[0.8, 0.0, 0.0], [-0.6, 0.6, 0.0],
                                            [-0.6, -0.6, 0.01], [0.0, 0.1, 0.0]], {}, True),
    ("cg outside the polygon", _SQUARE, {"body": (0.9, 0.1, 0.5)}, True),
    ("force out of the ground: -inf", _SQUARE, {"force": (10.0, 0.0, 400.0)}, True),
    ("triangle", _SQUARE[:3], {}, True),
    # the fallback branches
    ("all contacts collinear (mean-normal plane)", [[-0.6, 0.0, 0.0], [-0.2, 0.0, 0.0],
                                                    [0.2, 0.0, 0.0], [0.6, 0.0, 0.0]],
     {"normal": (0.1, 0.0, 1.0)}, False),
    ("a contact on the segment of two others", [[0.6, 0.4, 0.0], [-0.6, 0.4, 0.0],
                                                [-0.6, -0.4, 0.0], [0.0, 0.4, 0.0]], {}, False),
    ("coincident contacts (one-point hull)", [[0.2, 0.1, 0.0]] * 4, {}, False),
    ("force parallel to the plane", [x[:2] + [0.0] for x in _SQUARE],
     {"force": (500.0, 0.0, 0.0)}, False),
    ("two contacts", _SQUARE[:2], {}, False),
])
@pytest.mark.parametrize("W", [16, 5])
def test_hand_made_cases(name, points, kw, vector, W):
    """Each case in every lane of a batch, and in one lane of a batch of ordinary squares."""
    Tw, Tc, c, f = _case(points, **kw)
    ref = E.stability_margin(Tw[0], Tc[0], c[0], f[0])
    nc = Tc.shape[1]
    f4 = np.float32

    def lanes(Tw, Tc, c, f):
        return (np.ascontiguousarray(np.moveaxis(Tw[:, :, :3, :3], 0, -1), f4),
                np.ascontiguousarray(np.moveaxis(Tw[:, :, :3, 3], 0, -1), f4),
                np.ascontiguousarray(np.moveaxis(Tc[:, :, :3, :3], 0, -1), f4),
                np.ascontiguousarray(np.moveaxis(Tc[:, :, :3, 3], 0, -1), f4),
                np.ascontiguousarray(c.T, f4), np.ascontiguousarray(f.T, f4))

    ws = margin_lanes_workspace(nc, W)
    out = np.empty(W, f4)
    rep = [np.repeat(x, W, axis=0) for x in (Tw, Tc, c, f)]
    stability_margin_lanes(*lanes(*rep), out, ws)
    fb = ws[3][_FALLBACK_ROW]
    assert np.all(fb == (0 if vector else 1))
    assert ws[-1][0] == (0 if vector else W)
    exact = E.stability_margin(*(_rounded(x[0]) for x in (Tw, Tc, c, f)))
    if vector:
        if np.isneginf(ref):
            assert np.all(np.isneginf(out))
        else:
            assert np.all(np.abs(out - ref) <= 16 * F32_EPS * (1 + abs(ref)))
    else:
        np.testing.assert_array_equal(out, np.float32(exact))
    if nc == 4:  # the case in lane W - 2 among squares (other lanes unaffected)
        sq = _case(_SQUARE)
        mix = [np.repeat(x, W, axis=0) for x in sq]
        for x, y in zip(mix, (Tw, Tc, c, f)):
            x[W - 2] = y[0]
        stability_margin_lanes(*lanes(*mix), out, ws)
        m_sq = E.stability_margin(sq[0][0], sq[1][0], sq[2][0], sq[3][0])
        others = np.delete(out, W - 2)
        assert np.all(np.abs(others - m_sq) <= 16 * F32_EPS)
        assert ws[3][_FALLBACK_ROW, W - 2] == (0 if vector else 1)
        if np.isneginf(ref):
            assert np.isneginf(out[W - 2])
        else:
            assert abs(out[W - 2] - ref) <= 16 * F32_EPS * (1 + abs(ref))


def test_nan_lane_falls_back_alone():
    """A lane with non-finite input (a diverged candidate) takes the scalar path; the others
    keep the vector path and their values."""
    W = 16
    Tw, Tc, c, f = (np.repeat(x, W, axis=0) for x in _case(_SQUARE))
    Tc[3, 2, 0, 3] = np.nan
    got, fb, count = _run_lanes(Tw, Tc, c, f, W)
    assert fb[3] and fb.sum() == 1 and count == 1
    exact = E.stability_margin(Tw[3], Tc[3], c[3], f[3])
    np.testing.assert_array_equal(got[3], np.float32(exact))
    ref = E.stability_margin(Tw[0], Tc[0], c[0], f[0])
    assert np.all(np.abs(np.delete(got, 3) - ref) <= 16 * F32_EPS)
