"""Per-step kinematic kernels after the issue-10 speed-ups: same results, no allocation.

* Collision detection evaluates the bracket points' sines and cosines by the angle-sum
  identities (and a Taylor series for the small parabolic offset) instead of ``math.sin`` /
  ``math.cos``. An exact-trigonometry oracle of the same search (written here in plain Python
  from the description in ``kernels.wheel_contact``) is run beside it, state by state along a
  rough-terrain run and as whole 10 s Zoë benchmark runs: contact height errors agree to 1e-6 m
  and final poses to 1 mm.
* The small-angle series and the angle-sum rotation against libm.
* The normal-equation solve (2.38) against ``numpy.linalg.lstsq``.
* Forward kinematics, collision detection (warm), the constraint system and the Euler step
  allocate nothing per call (numba runtime allocation counters).
"""

import math

import numpy as np
import pytest

from wmr_model._jit import JIT_ENABLED
from wmr_model.io.terrain_files import load_wmrde_benchmark_terrains
from wmr_model.io.vehicles import load_vehicle
from wmr_model.kinematics import api as kin
from wmr_model.kinematics.constraints import constraint_system
from wmr_model.kinematics.integrate import integrate_euler
from wmr_model.kinematics.solve import solve_partitioned
from wmr_model.kinematics.wheel_collision import (
    CONTACT_FAN_HALF_SPAN,
    CONTACT_FAN_POINTS,
    WARM_CONTACT_BRACKET,
    WARM_CONTACT_MAX_WALK,
    _rotate_angle,
    _sin_cos_small,
    _write_contact_frame,
    contact_workspace,
    wheel_contact,
)
from wmr_model.prediction.controllers import straight_wheel_rates
from wmr_model.terrain.surface import terrain_height_normal
from wmr_model.vehicles.tree import forward_kinematics

DT = 0.04
H = WARM_CONTACT_BRACKET
FAN_STEP = CONTACT_FAN_HALF_SPAN / (CONTACT_FAN_POINTS // 2)


@pytest.fixture(scope="module")
def zoe():
    return load_vehicle("zoe")


@pytest.fixture(scope="module")
def terrains():
    return load_wmrde_benchmark_terrains()  # RMS 0.15 m, correlation 0.8 m (§2.5.4)


# ---- exact-trigonometry oracle of the collision search ---------------------------------------


def _height_error(targs, Tw, R, delta):
    """(2.8)-(2.9) at contact angle delta with libm sine/cosine: (dz, point, normal)."""
    r = Tw[:3, 3] - R * (math.sin(delta) * Tw[:3, 0] + math.cos(delta) * Tw[:3, 2])
    h, nx, ny, nz = terrain_height_normal(*targs, r[0], r[1])
    return (r[2] - h) * nz, r, np.array([nx, ny, nz])


def _vertex(fm, f0, fp, step):
    den = fm - 2.0 * f0 + fp
    if den <= 0.0:
        return 0.0
    return min(max(0.5 * step * (fm - fp) / den, -step), step)


def _fit(targs, Tw, R, d, fm, e0, fp):
    off = _vertex(fm, e0[0], fp, H)
    e1 = _height_error(targs, Tw, R, d + off)
    return (d, e0) if e0[0] < e1[0] else (d + off, e1)


def _oracle_wheel(targs, Tw, R, d_prev, fan_centre):
    """The search of ``wheel_contact`` for one wheel; ``fan_centre`` None: cold (fan)."""
    if fan_centre is not None and np.sum((Tw[:3, 3] - fan_centre) ** 2) <= R * R:
        d = d_prev
        em, e0, ep = (_height_error(targs, Tw, R, d + k * H) for k in (-1, 0, 1))
        for _ in range(WARM_CONTACT_MAX_WALK):
            if em[0] < e0[0] and em[0] <= ep[0]:
                d -= H
                ep, e0, em = e0, em, _height_error(targs, Tw, R, d - H)
            elif ep[0] < e0[0]:
                d += H
                em, e0, ep = e0, ep, _height_error(targs, Tw, R, d + H)
            else:
                break
        if e0[0] <= em[0] and e0[0] <= ep[0]:
            return _fit(targs, Tw, R, d, em[0], e0, ep[0]) + (False,)
    # fan about the terrain normal below the centre, projected onto the wheel plane
    _, *n0 = terrain_height_normal(*targs, Tw[0, 3], Tw[1, 3])
    u = np.array(n0) - np.dot(n0, Tw[:3, 1]) * Tw[:3, 1]
    d0 = math.atan2(u @ Tw[:3, 0], u @ Tw[:3, 2])
    half = CONTACT_FAN_POINTS // 2
    f = [_height_error(targs, Tw, R, d0 + (j - half) * FAN_STEP)[0]
         for j in range(CONTACT_FAN_POINTS)]
    best = int(np.argmin(f))
    d = d0 + (best - half) * FAN_STEP
    if 0 < best < len(f) - 1:
        d += _vertex(f[best - 1], f[best], f[best + 1], FAN_STEP)
    fm, e0, fp = (_height_error(targs, Tw, R, d + k * H) for k in (-1, 0, 1))
    return _fit(targs, Tw, R, d, fm[0], e0, fp[0]) + (True,)


class OracleCollision:
    """Per-trajectory state of the oracle (previous angles, centre at the last fan)."""

    def __init__(self, m):
        self.m = m
        self.angle = np.zeros(m.nw)
        self.centre = [None] * m.nw

    def __call__(self, targs, T_world, T_contact, dz):
        m = self.m
        for k in range(m.nw):
            i = m.wheel_frame[k]
            Tw = T_world[m.parent[i]] @ m.T0[i]
            R = m.wheel_radius[k]
            d, (f, r, n), fan = _oracle_wheel(targs, Tw, R, self.angle[k], self.centre[k])
            if fan:
                self.centre[k] = Tw[:3, 3].copy()
            self.angle[k] = d
            dz[k] = f
            _write_contact_frame(T_contact[k], tuple(Tw[:3, 1]), tuple(Tw[:3, 0]), tuple(n),
                                 tuple(r))


def _oracle_run(m, terrain, q0, steps):
    """Kinematic Euler run (Figure 2.6) from the compiled kernels but the oracle collision."""
    targs = terrain.kernel_args()
    d = kin.create_data(m)
    known = kin.simulation_known(m)
    qk = np.zeros(m.nv)
    qk[6 + m.actuated_joints] = straight_wheel_rates(m, 1.0)
    coll = OracleCollision(m)
    q = q0.copy()
    qs, dzs = [q.copy()], []
    kd = d.kernel._replace(contact_angle=coll.angle)  # the oracle's contact angles
    for _ in range(steps):
        forward_kinematics(m.parent, m.joint_type, m.axis, m.T0, q, d.T_world)
        coll(targs, d.T_world, d.T_contact, d.dz)
        dzs.append(d.dz.copy())
        constraint_system(m.kinematic_arrays(), kd, q, 0.5 / DT, np.zeros((m.nc, 2)))
        solve_partitioned(d.A, d.v, known, qk, d.qdot)
        qn = np.empty(m.nq)
        integrate_euler(q, d.qdot, DT, qn)
        q = qn
        qs.append(q.copy())
    return np.array(qs), np.array(dzs)


def test_warm_collision_matches_exact_trig_oracle_state_by_state(zoe, terrains):
    m = zoe
    terrain = terrains[0]
    q0, _ = kin.initialize_contact(m, terrain)
    traj = kin.simulate(m, terrain, q0, np.tile(straight_wheel_rates(m, 1.0), (150, 1)), DT)
    targs = terrain.kernel_args()
    d = kin.create_data(m)
    ws = contact_workspace(m.nw)
    coll = OracleCollision(m)
    T_contact = np.empty_like(d.T_contact)
    dz = np.empty(m.nw)
    warm_steps = 0
    for q in traj.q:
        # both searches start from the kernel's previous angles and last fan centres
        forward_kinematics(m.parent, m.joint_type, m.axis, m.T0, q, d.T_world)
        coll.angle[:] = d.contact_angle
        coll.centre = [ws[k, 1:4].copy() if ws[k, 0] > 0 else None for k in range(m.nw)]
        fan_before = ws[:, 1:4].copy()
        wheel_contact(m.kinematic_arrays(), targs, d.T_world, d.T_contact, d.dz,
                      d.contact_angle, ws)
        warm_steps += int(np.sum(np.all(ws[:, 1:4] == fan_before, axis=1)))
        coll(targs, d.T_world, T_contact, dz)
        np.testing.assert_allclose(d.dz, dz, rtol=0, atol=1e-6)
        np.testing.assert_allclose(d.T_contact, T_contact, rtol=0, atol=1e-6)
        np.testing.assert_allclose(d.contact_angle, coll.angle, rtol=0, atol=1e-6)
    # both branches exercised: mostly warm, a fan every wheel radius of travel
    assert 0.6 * m.nw * len(traj.q) < warm_steps < m.nw * len(traj.q)


def test_zoe_benchmark_runs_match_exact_trig_oracle(zoe, terrains):
    """10 s at 1 m/s (Table 2.6 runs), two benchmark terrains: final poses within 1 mm."""
    m = zoe
    steps = round(10.0 / DT)
    u = np.tile(straight_wheel_rates(m, 1.0), (steps, 1))
    for terrain in terrains[:2]:
        q0, _ = kin.initialize_contact(m, terrain)
        traj = kin.simulate(m, terrain, q0, u, DT)
        q_ref, dz_ref = _oracle_run(m, terrain, q0, steps)
        assert np.linalg.norm(traj.q[-1, 4:7] - q_ref[-1, 4:7]) < 1e-3
        assert np.abs(traj.q[:, 0:4] - q_ref[:, 0:4]).max() < 1e-3  # attitude (rad scale)
        assert np.abs(traj.dz[:-1] - dz_ref).max() < 1e-6


def test_small_angle_sin_cos_matches_libm():
    x = np.linspace(-0.1, 0.1, 4001)  # the search uses |x| <= WARM_CONTACT_BRACKET
    assert H < 0.1
    sc = np.array([_sin_cos_small(float(v)) for v in x])
    np.testing.assert_allclose(sc[:, 0], np.sin(x), rtol=0, atol=3e-17)  # ~2 ulp of 0.1
    np.testing.assert_allclose(sc[:, 1], np.cos(x), rtol=0, atol=3e-16)  # ~2 ulp of 1


def test_rotate_angle_is_the_angle_sum():
    rng = np.random.default_rng(3)
    for d, e in rng.uniform(-4.0, 4.0, (200, 2)):
        s, c = _rotate_angle(math.sin(d), math.cos(d), math.sin(e), math.cos(e))
        assert abs(s - math.sin(d + e)) < 1e-15 and abs(c - math.cos(d + e)) < 1e-15


@pytest.mark.parametrize("seed", range(4))
def test_solve_partitioned_matches_lstsq(seed):
    """(2.37)-(2.38): the unknown part is the least-squares solution of the reduced system."""
    rng = np.random.default_rng(seed)
    m, nv = 12, 13
    A = rng.normal(size=(m, nv))
    A[rng.random((m, nv)) < 0.3] = 0.0  # structural zeros, as in the stacked wheel rows
    v = rng.normal(size=m)
    known = np.zeros(nv, dtype=bool)
    known[rng.choice(nv, 4, replace=False)] = True
    qk = rng.normal(size=nv)
    qdot = np.empty(nv)
    res = solve_partitioned(A, v, known, qk, qdot)
    x = np.linalg.lstsq(A[:, ~known], v - A[:, known] @ qk[known], rcond=None)[0]
    np.testing.assert_allclose(qdot[~known], x, rtol=0, atol=1e-10)
    np.testing.assert_array_equal(qdot[known], qk[known])
    assert res == pytest.approx(np.linalg.norm(A @ qdot - v), abs=1e-12)


def _nrt_counter():
    try:
        from numba.core.runtime import nrt, rtsys

        nrt._nrt.memsys_enable_stats()
    except (ImportError, AttributeError):  # pragma: no cover - numba internals moved
        return None
    return lambda: rtsys.get_allocation_stats().alloc


@pytest.mark.skipif(not JIT_ENABLED, reason="allocation counters need numba")
def test_step_kernels_do_not_allocate(zoe, terrains):
    count = _nrt_counter()
    if count is None:  # pragma: no cover
        pytest.skip("numba runtime statistics unavailable")
    from wmr_model._jit import njit

    @njit(cache=False)
    def step(reps, args, targs, q, sigma, vc, d, qn, ws):
        parent, jtype, axis, T0 = args[0], args[1], args[2], args[3]
        for _ in range(reps):
            forward_kinematics(parent, jtype, axis, T0, q, d.T_world)
            wheel_contact(args, targs, d.T_world, d.T_contact, d.dz, d.contact_angle, ws)
            constraint_system(args, d, q, sigma, vc)
            integrate_euler(q, d.qdot, 0.04, qn)

    m = zoe
    terrain = terrains[0]
    q0, _ = kin.initialize_contact(m, terrain)
    d = kin.create_data(m)
    run = (m.kinematic_arrays(), terrain.kernel_args(), q0, 12.5, np.zeros((m.nc, 2)),
           d.kernel, np.empty(m.nq),
           contact_workspace(m.nw))
    step(1, *run)
    a0 = count()
    step(1, *run)
    a1 = count()
    step(11, *run)
    a2 = count()
    # the counts differ only by the boxing of the arguments, which does not depend on reps
    assert (a2 - a1) - (a1 - a0) == 0
