"""What simulate() and predict() keep between calls to cut their fixed cost (issue 22).

Per model they keep the options record of recent simulations, the frame inertias the
prediction loop reads, the kernel record, the actuated joint indices, and the address of a
vehicle's specialized solve once it is ready. Kept values must never change a result: a
simulation is bit-identical whether its options were kept or built afresh (another model
object of the same vehicle), calls with other options in between do not leak into it, and the
kept values go away with their model. The cheaper symmetry check of covariance inputs must
decide exactly as ``np.allclose`` did.
"""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

from wmr_model._jit import JIT_ENABLED, num_threads, set_num_threads
from wmr_model.errors import ParameterError
from wmr_model.experiments import kinematic as ex
from wmr_model.io.vehicles import load_vehicle
from wmr_model.kinematics import api as kin
from wmr_model.kinematics import specialized as SP
from wmr_model.kinematics.specialized import GENERIC, model_solve, specialized_solve
from wmr_model.kinematics.uncertainty import check_covariance
from wmr_model.prediction import predict as P
from wmr_model.prediction.controllers import straight_wheel_rates
from wmr_model.terrain.surface import rough


@pytest.fixture(scope="module")
def terrain():
    return rough(0.1, 0.5, seed=4, x_range=(-3, 6), y_range=(-3, 3))


def _start(model, terrain):
    q = model.neutral_state()
    q[6] = float(terrain.height(0.0, 0.0)) + float(model.wheel_radius.max()) + 0.3
    return kin.initialize_contact(model, terrain, q)[0]


def test_kept_options_do_not_change_results(terrain) -> None:
    model = load_vehicle("zoe")
    q0 = _start(model, terrain)
    u = np.tile(straight_wheel_rates(model, 0.8), (40, 1))
    runs = [(0.04, 0.3, "euler", True), (0.1, 0.5, "rk4", True), (0.04, 0.3, "euler", False),
            (0.04, 0.3, "euler", True)]
    kept = [kin.simulate(model, terrain, q0, u[: round(1.6 / dt)], dt, stabilization=s,
                         integrator=i, warm_start=w) for dt, s, i, w in runs]
    for (dt, s, i, w), got in zip(runs, kept):
        fresh_model = load_vehicle("zoe")  # a new model object: nothing kept for it yet
        want = kin.simulate(fresh_model, terrain, q0, u[: round(1.6 / dt)], dt,
                            stabilization=s, integrator=i, warm_start=w)
        assert np.array_equal(got.q, want.q)
        assert np.array_equal(got.dz, want.dz)
    # the first and the last run have the same options: the same trajectory
    assert np.array_equal(kept[0].q, kept[3].q)
    # warm and cold collision search are different computations (kept apart by the key)
    assert not np.array_equal(kept[0].dz, kept[2].dz)


def test_serial_and_threaded_simulations_agree_bit_for_bit(terrain) -> None:
    """simulate() runs one compiled call (inputs, outputs and loop) on one thread and for a
    single run; a batch on several threads assembles the same records and hands them to the
    range loop. Both give each run exactly its single simulation: shared and per-run rates,
    with and without contact slip velocities, a read-only rates array."""
    if num_threads() < 2:
        pytest.skip("one thread only: the threaded batch path does not run here")
    model = load_vehicle("zoe")
    q0 = _start(model, terrain)
    rng = np.random.default_rng(5)
    T, N = 30, 3
    base = straight_wheel_rates(model, 0.8)
    rates = base + rng.uniform(-0.5, 0.5, size=(N, T, base.shape[0]))
    rates.flags.writeable = False
    Q0 = np.repeat(q0[None], N, axis=0)
    Q0[:, 4] += np.arange(N) * 0.2
    vc = rng.normal(0.0, 0.02, size=(N, T, model.nc, 2))
    before = num_threads()
    try:
        for vc_xy in (None, vc):
            got = {}
            for threads in (1, 2):
                set_num_threads(threads)
                got[threads] = kin.simulate(model, terrain, Q0, rates, 0.04, vc_xy=vc_xy)
            for name in ("q", "qdot", "contact_speed", "dz"):
                assert np.array_equal(getattr(got[1], name), getattr(got[2], name)), name
            for n in range(N):
                one = kin.simulate(model, terrain, Q0[n], rates[n], 0.04,
                                   vc_xy=None if vc_xy is None else vc_xy[n])
                assert np.array_equal(one.q, got[2].q[n])
                assert np.array_equal(one.dz, got[2].dz[n])
        shared = kin.simulate(model, terrain, Q0, rates[0], 0.04)  # (T, na): one for all
        assert np.array_equal(shared.q[1], kin.simulate(model, terrain, Q0[1], rates[0],
                                                        0.04).q)
    finally:
        set_num_threads(before)


def test_kept_values_go_with_their_model(terrain) -> None:
    model = load_vehicle("zoe")
    q0 = _start(model, terrain)
    u = np.tile(straight_wheel_rates(model, 0.8), (3, 1))
    kin.simulate(model, terrain, q0, u, 0.04)
    P.predict(model, terrain, q0, u, 0.04, fidelity="enhanced", slip_params=ex.BATCH_SLIP)
    assert model in kin._SIMULATION_OPTIONS and model in P._FRAME_INERTIAS
    ref = weakref.ref(model)
    n_opts, n_inertias = len(kin._SIMULATION_OPTIONS), len(P._FRAME_INERTIAS)
    del model
    gc.collect()
    assert ref() is None
    assert len(kin._SIMULATION_OPTIONS) == n_opts - 1
    assert len(P._FRAME_INERTIAS) == n_inertias - 1


def test_model_keeps_derived_values_read_only() -> None:
    model = load_vehicle("zoe")
    act = model.actuated_joints
    assert np.array_equal(act, np.flatnonzero(model.actuated[1:]))
    assert act is model.actuated_joints and not act.flags.writeable
    assert model.kinematic_arrays() is model.kinematic_arrays()
    with pytest.raises(ValueError):
        act[0] = 3


@pytest.mark.skipif(not JIT_ENABLED, reason="specialized kernels need numba")
def test_model_solve_remembers_only_ready_kernels() -> None:
    model = load_vehicle("zoe")
    m = model.kinematic_arrays()
    known = kin.simulation_known(model)
    rows = 3 * model.nc + model.nhc
    address = model_solve(m, known, wait=True)
    assert address != GENERIC and address == specialized_solve(rows, known)
    assert SP._solves[(rows, known.tobytes())] == address
    everything = np.ones(model.nv, dtype=bool)  # nothing to solve: always the generic path
    assert model_solve(m, everything) == GENERIC
    assert (rows, everything.tobytes()) not in SP._solves


def test_symmetry_check_decides_as_allclose() -> None:
    rng = np.random.default_rng(7)
    for k in range(400):
        B = rng.normal(size=(6, 6)) * 10.0 ** rng.integers(-14, 4)
        S = B @ B.T
        E = rng.normal(size=(6, 6)) * 10.0 ** rng.uniform(-18, -3) * np.abs(S).max()
        M = S + (E if k % 2 else np.triu(E, 1))
        scale = max(1.0, float(np.abs(M).max()))
        symmetric = np.allclose(M, M.T, atol=1e-12 * scale)
        try:
            check_covariance(M, "Q")
            accepted = True
        except ParameterError as exc:
            accepted = "symmetric" not in str(exc)  # PSD failures are another check
        assert accepted == symmetric, k


def test_kept_dynamics_follow_options_and_model_options(terrain) -> None:
    from wmr_model.dynamics import model as DM
    from wmr_model.dynamics.simulate import simulate_dynamics

    model = load_vehicle("zoe")
    q0 = _start(model, terrain)
    qd0 = np.zeros(model.nv)
    u = np.tile(straight_wheel_rates(model, 0.8), (15, 1))

    def run(m, **kw):
        return simulate_dynamics(m, terrain, q0, qd0, u, 0.04, **kw).q

    first = run(model, contact_model="pacejka")
    other = run(model, contact_model="piecewise_linear")  # another key in between
    assert np.array_equal(run(model, contact_model="pacejka"), first)
    assert np.array_equal(run(load_vehicle("zoe"), contact_model="pacejka"), first)
    assert not np.array_equal(other, first)
    # a dict of contact parameters is kept by value: changed in place, it is seen at the next
    # call; an equal dict finds the same compiled model; equal numbers of another type do not
    params = {"mu": 0.6}
    a = run(model, contact_model="pacejka", contact_params=params)
    params["mu"] = 0.3
    b = run(model, contact_model="pacejka", contact_params=params)
    assert not np.array_equal(a, b)
    assert np.array_equal(run(model, contact_model="pacejka", contact_params={"mu": 0.3}), b)

    def kept(**kw):
        return DM.kept_dynamics(model, 0.04, DM.DynamicsOptions(contact_model="pacejka", **kw))[0]

    lib = {"pacejka": {"Kp": 1e4, "mu": 1.0}, "piecewise_linear": {"Kp": 1e4}}
    assert kept(contact_params=lib) is kept(contact_params={k: dict(v) for k, v in lib.items()})
    assert kept(contact_params={"mu": 1}) is not kept(contact_params={"mu": 1.0})
    assert kept(contact_params={"mu": 1.0}) is not kept(contact_params={"mu": 0.9})
    # model.options is part of the key: changing it in place is seen at the next call
    model.options["contact_model"] = "piecewise_linear"
    try:
        assert np.array_equal(run(model), other)
    finally:
        del model.options["contact_model"]
    assert model in DM._COMPILED


def test_batch_shares_one_folded_tree_with_per_trajectory_results(terrain, monkeypatch) -> None:
    """predict_range folds the body inertia's tree once per range and shares it; each
    candidate must still equal its run with a workspace folded for it alone (kernel_data with
    fold, the per-trajectory path)."""
    from wmr_model.kinematics import loops as L
    from wmr_model.kinematics.data import kernel_data

    model = load_vehicle("zoe")
    q0 = _start(model, terrain)
    rng = np.random.default_rng(5)
    cmds = straight_wheel_rates(model, 0.8) * rng.uniform(0.5, 1.5, (3, 25, 4))
    seen = []
    real = P.run_ranges

    def recording(kernel, n, chunks, *args):  # the real call, its arguments kept
        seen.append(args)
        return real(kernel, n, chunks, *args)

    monkeypatch.setattr(P, "run_ranges", recording)
    batch = P.predict(model, terrain, q0, cmds, 0.04, fidelity="enhanced",
                      slip_params=ex.BATCH_SLIP, Qprime=ex.BATCH_QPRIME)
    m, t, o, X, Y = seen[-1]
    for n in range(3):
        alone = L.PredictOutputs(*(np.empty_like(a[:1]) for a in Y))  # its own outputs
        x, y = L._candidate(X._replace(q0=X.q0[n:n + 1], qdot_cmd=X.qdot_cmd[n:n + 1]),
                            alone, 0)
        d = kernel_data(m, o.known, o.I_frame, True, o.warm_contact, False)
        L.predict_trajectory(m, t, d, o, x, y)
        assert np.array_equal(y.q_traj, batch.q[n])
        assert np.array_equal(y.P_traj, batch.covariance[n])
        assert np.array_equal(y.slip_traj, batch.slip[n])
        assert np.array_equal(y.margin_traj, batch.stability_margin[n])


def test_options_of_recent_requests_are_shared_and_typed() -> None:
    """DynamicsOptions.of keeps recent requests: the same keywords give the same frozen
    instance; equal values of other types (1, 1.0, True) give their own; a mapping value is
    built each time (equal, not shared); an unknown keyword raises every time."""
    from wmr_model.dynamics.model import DynamicsOptions

    a = DynamicsOptions.of(None, {"max_iter": 5, "contact_model": "pacejka"})
    assert DynamicsOptions.of(None, {"contact_model": "pacejka", "max_iter": 5}) is a
    assert a == DynamicsOptions(contact_model="pacejka", max_iter=5)
    assert type(DynamicsOptions.of(None, {"tol": 1}).tol) is int
    assert type(DynamicsOptions.of(None, {"tol": 1.0}).tol) is float
    base = DynamicsOptions(max_iter=7)
    assert DynamicsOptions.of(base, {"tol": 1.0}).max_iter == 7
    assert DynamicsOptions.of(None, {"tol": 1.0}).max_iter == 30
    p1 = DynamicsOptions.of(None, {"contact_params": {"mu": 0.5}})
    p2 = DynamicsOptions.of(None, {"contact_params": {"mu": 0.5}})
    assert p1 == p2 and p1 is not p2
    for _ in range(2):
        with pytest.raises(TypeError, match="warp"):
            DynamicsOptions.of(None, {"warp": 1})
