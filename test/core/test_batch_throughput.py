"""Batch-throughput options and allocation-free kernels keep the results (issue 10).

* ``predict(every=k)``: every stored sample is the full run's row bit for bit, the step
  indices and times are the sampled ones, and the flags are the OR of the full run's flags
  over each sampling interval (no risk dropped between samples).
* The flags computed inside the compiled loop follow their definition on the full outputs
  (margin below ``tipover_margin``; some wheel's Δz above ``liftoff_threshold``).
* Inputs shared by all candidates (one P0, one slip vector) give the same result as the same
  values repeated per candidate; one thread gives the same result as all threads.
* The per-trajectory scratch variants of the enhanced, stability-margin, composite-inertia and
  covariance kernels equal the allocating calls bit for bit, and the composite inertia still
  equals an independent NumPy oracle (sum of the frames' inertias moved to the body frame).
"""

import numpy as np
import pytest

from wmr_model._jit import num_threads, set_num_threads
from wmr_model.errors import ParameterError
from wmr_model.io.vehicles import load_vehicle
from wmr_model.kinematics import api as kin
from wmr_model.kinematics import enhanced as E
from wmr_model.kinematics.track_collision import contact_detection
from wmr_model.kinematics.uncertainty import (
    covariance_workspace,
    error_dynamics,
    propagate_covariance,
)
from wmr_model.prediction.controllers import straight_wheel_rates
from wmr_model.prediction.predict import TIPOVER_RISK, WHEEL_LIFTOFF, predict
from wmr_model.terrain import surface as tr
from wmr_model.vehicles.inertia import composite_inertias, composite_workspace, model_frame_inertias
from wmr_model.vehicles.tree import forward_kinematics

DT = 0.04
T = 10
SLIP = np.array([0.05, -0.03, 0.4, 0.2, 0.0, -0.1])
QPRIME = np.diag([1e-4, 1e-4, 4e-3, 1e-2, 2e-3, 1e-4])
# Zoë's margins on this terrain lie around 0.74-0.78 m: a threshold inside that range flags
# some states and not others (checked below, so the flag tests are never vacuous)
TIP = 0.76
STATE = ("q", "dz", "stability_margin", "covariance")
STEP = ("qdot", "contact_speed", "slip", "wheel_slip")


@pytest.fixture(scope="module")
def zoe():
    return load_vehicle("zoe")


@pytest.fixture(scope="module")
def rough():
    return tr.rough(0.15, 0.8, seed=3, x_range=(-6, 6), y_range=(-6, 6))


@pytest.fixture(scope="module")
def case(zoe, rough):
    q0, _ = kin.initialize_contact(zoe, rough)
    rng = np.random.default_rng(7)
    na = len(zoe.actuated_joints)
    cmds = straight_wheel_rates(zoe, 1.0) * rng.uniform(0.5, 1.5, (8, T, na))
    cmds[:, :, 0] *= rng.uniform(0.2, 1.8, (8, 1))  # some turning
    return q0, cmds


def _kw(**extra):
    return dict(fidelity="enhanced", slip_params=SLIP, Qprime=QPRIME, tipover_margin=TIP,
                liftoff_threshold=0.003, **extra)


@pytest.fixture(scope="module")
def full(zoe, rough, case):
    return predict(zoe, rough, *case, DT, **_kw())


@pytest.mark.parametrize("every", [3, 5, T, 4 * T])
def test_every_keeps_samples_of_the_full_run(zoe, rough, case, full, every):
    sub = predict(zoe, rough, *case, DT, **_kw(every=every))
    steps = list(range(0, T, every)) + [T]
    np.testing.assert_array_equal(sub.steps, steps)
    np.testing.assert_allclose(sub.time, np.array(steps) * DT, rtol=0, atol=1e-15)
    for name in STATE:
        a, b = getattr(sub, name), getattr(full, name)[:, steps]
        assert a.shape == b.shape and np.array_equal(a, b, equal_nan=True), name
    for name in STEP:
        a, b = getattr(sub, name), getattr(full, name)[:, steps[:-1]]
        assert a.shape == b.shape and np.array_equal(a, b, equal_nan=True), name
    # flags: OR over (previous sample, sample]; the first sample is state 0 alone
    expect = np.empty_like(sub.flags)
    expect[:, 0] = full.flags[:, 0]
    for s in range(1, len(steps)):
        expect[:, s] = np.bitwise_or.reduce(full.flags[:, steps[s - 1] + 1:steps[s] + 1], axis=1)
    np.testing.assert_array_equal(sub.flags, expect)


def test_full_run_has_no_steps_and_default_time(full):
    assert full.steps is None
    np.testing.assert_allclose(full.time, np.arange(T + 1) * DT)


def test_flags_follow_their_definition(zoe, full):
    # the thresholds of _kw() flag some states and not others (the test would be empty else)
    tip = np.where(full.stability_margin < TIP, TIPOVER_RISK, 0)
    lift = np.where((full.dz[..., :zoe.nw] > 0.003).any(axis=-1), WHEEL_LIFTOFF, 0)
    np.testing.assert_array_equal(full.flags, tip | lift)
    assert 0 < np.count_nonzero(full.flags & TIPOVER_RISK) < full.flags.size
    assert 0 < np.count_nonzero(full.flags & WHEEL_LIFTOFF) < full.flags.size


def test_massless_model_never_flags_tipover(rough):
    from wmr_model.vehicles.generators import skid_steer_spec
    from wmr_model.vehicles.model import compile_vehicle

    m = compile_vehicle(skid_steer_spec(mass=0.0, wheel_mass=0.0, name="massless"))
    assert m.total_mass == 0.0
    q0, _ = kin.initialize_contact(m, rough)
    cmds = np.tile(straight_wheel_rates(m, 1.0), (T, 1))
    for fidelity in ("kinematic", "enhanced"):
        pr = predict(m, rough, q0, cmds, DT, fidelity=fidelity, tipover_margin=1e9, every=3)
        assert np.isnan(pr.stability_margin).all()
        assert not (pr.flags & TIPOVER_RISK).any()


@pytest.mark.parametrize("bad", [0, -2, 2.5, True, "3"])
def test_every_must_be_a_positive_integer(zoe, rough, case, bad):
    with pytest.raises(ParameterError, match="every"):
        predict(zoe, rough, case[0], case[1][:2], DT, every=bad)


def test_shared_inputs_equal_repeated_ones(zoe, rough, case):
    q0, cmds = case
    N = cmds.shape[0]
    P0 = np.diag([1e-4, 2e-4, 3e-4, 1e-2, 2e-2, 1e-3])
    one = predict(zoe, rough, q0, cmds, DT, **_kw(P0=P0))
    kw = _kw(P0=np.tile(P0, (N, 1, 1)))
    kw["slip_params"] = np.tile(SLIP, (N, 1))
    rep = predict(zoe, rough, q0, cmds, DT, **kw)
    for name in STATE + STEP + ("flags",):
        assert np.array_equal(getattr(one, name), getattr(rep, name), equal_nan=True), name


def test_one_thread_equals_all_threads(zoe, rough, case, full):
    n = num_threads()
    set_num_threads(1)
    try:
        single = predict(zoe, rough, *case, DT, **_kw())
    finally:
        set_num_threads(n)
    for name in STATE + STEP + ("flags",):
        assert np.array_equal(getattr(single, name), getattr(full, name), equal_nan=True), name


@pytest.mark.parametrize("bad", [0, -1, 10 ** 6, 1.5])
def test_set_num_threads_rejects_bad_counts(bad):
    from wmr_model._jit import JIT_ENABLED

    if not JIT_ENABLED:
        pytest.skip("without numba any thread count is accepted")
    with pytest.raises(ParameterError, match="threads"):
        set_num_threads(bad)


def _state_arrays(m, terrain, q):
    T_world = np.empty((m.nf, 4, 4))
    T_contact = np.empty((m.nc, 4, 4))
    dz = np.empty(m.nc)
    ang = np.empty(m.nc)
    forward_kinematics(m.parent, m.joint_type, m.axis, m.T0, q, T_world)
    contact_detection(m.kinematic_arrays(), terrain.kernel_args(),
                      (m.track_frame, m.track_drive, m.track_path), T_world, T_contact, dz, ang)
    return T_world, T_contact


def test_scratch_kernels_equal_allocating_ones(zoe, rough, full):
    m = zoe
    I_frame = model_frame_inertias(m)
    rng = np.random.default_rng(2)
    cws, mws, pws = composite_workspace(), E.margin_workspace(m.nc), covariance_workspace()
    for q in full.q[:, ::3].reshape(-1, m.nq)[:12]:
        T_world, T_contact = _state_arrays(m, rough, q)
        a = composite_inertias(m.parent, I_frame, T_world, np.empty((m.nf, 6, 6))).copy()
        b = composite_inertias(m.parent, I_frame, T_world, np.empty((m.nf, 6, 6)), cws)
        assert np.array_equal(a, b)
        c = rng.normal(0, 0.1, 3)
        f = np.r_[rng.normal(0, 5, 3), rng.normal(0, 50, 2), -1000.0]
        assert E.stability_margin(T_world, T_contact, c, f) == \
            E.stability_margin(T_world, T_contact, c, f, mws)
        F, G = np.zeros((6, 6)), np.zeros((6, 6))
        error_dynamics(T_world[0, :3, :3], rng.normal(0, 1, 3), F, G)
        P = np.diag(rng.uniform(1e-4, 1e-2, 6))
        P1, P2 = np.empty((6, 6)), np.empty((6, 6))
        propagate_covariance(P, F, G, QPRIME, DT, P1)
        propagate_covariance(P, F, G, QPRIME, DT, P2, pws)
        assert np.array_equal(P1, P2)


def test_enhanced_kernel_scratch_equals_allocating_call(zoe, rough, full):
    m = zoe
    I_frame = model_frame_inertias(m)
    known = kin.simulation_known(m)
    ws = E.enhanced_workspace()
    s = E.BodySlip(I_frame, np.array([0.0, 0.0, -9.80665]), SLIP, E.DEFAULT_SLIP_AXES, True)
    for q, qd in zip(full.q[0, :-1:3], full.qdot[0, ::3]):
        outs = []
        for scratch in (None, ws):  # a fresh scratch, then one reused across states
            d = kin.create_data(m, known, warm_contact=False).kernel
            d = d._replace(enhanced_ws=E.enhanced_workspace() if scratch is None else scratch)
            res = E.enhanced_joint_space_velocity(
                m.kinematic_arrays(), rough.kernel_args(), d, q, known, qd, 2.0,
                np.zeros((m.nc, 2)), d.qdot, s)
            o = {k: v for k, v in d._asdict().items()
                 if k not in ("contact_ws", "solve_ws", "enhanced_ws", "margin_ws", "cov_ws")}
            outs.append((res, o))
        assert outs[0][0] == outs[1][0]
        for key in outs[0][1]:
            assert np.array_equal(outs[0][1][key], outs[1][1][key]), key


def test_composite_inertia_matches_numpy_oracle(zoe, full):
    """Body composite = sum over frames of X^T I X with X the frame's motion transform from
    the body (B.12), built with NumPy from the world transforms (independent of the kernel)."""
    m = zoe
    I_frame = model_frame_inertias(m)
    T_world = np.empty((m.nf, 4, 4))
    q = full.q[3, -1]
    forward_kinematics(m.parent, m.joint_type, m.axis, m.T0, q, T_world)
    oracle = np.zeros((6, 6))
    for i in range(m.nf):
        Tib = np.linalg.inv(T_world[0]) @ T_world[i]  # frame i in body coordinates
        R, t = Tib[:3, :3], Tib[:3, 3]
        tx = np.array([[0, -t[2], t[1]], [t[2], 0, -t[0]], [-t[1], t[0], 0]])
        Xf = np.block([[R, tx @ R], [np.zeros((3, 3)), R]])  # force transform i -> body
        oracle += Xf @ I_frame[i] @ Xf.T
    Ib = composite_inertias(m.parent, I_frame, T_world, np.empty((m.nf, 6, 6)))
    np.testing.assert_allclose(Ib, oracle, rtol=1e-12, atol=1e-9 * np.abs(oracle).max())
