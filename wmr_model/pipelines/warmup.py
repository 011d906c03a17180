"""Compile the kernels ahead of use: what ``wmr compile`` runs.

The compiled kernels are cached on disk (:mod:`wmr_model._jit`), but the first process after an
install or an update compiles them: minutes, during which a node answers nothing and a planner
misses its deadlines. This module runs one tiny call of each product path - the same public
functions the nodes and the CLI call, so the set stays complete as they change - in *groups*
that share few kernels, so that :func:`compile_kernels` can build them in parallel processes:

``kinematic``  kinematic simulation (Euler, RK4), contact initialization, prediction (kinematic
               and enhanced, covariance, measured attitude and gyro), the odometry of the
               odometry node, the planner rollouts of the prediction node (open and closed
               loop).
``dynamic``    the dynamics (one run and a batch), the prediction node's DYNAMIC fidelity, open
               and closed loop.
``planner``    the float32 lane path of planner batches (``predict(precision="float32")``,
               :mod:`wmr_model.kinematics.lanes`), for a vehicle it covers (else nothing).

The calls also start the vehicle's specialized kernels (:mod:`wmr_model.kinematics.specialized`,
compiled on a background thread on first use); each group waits for them, so they are in the
cache too. Nothing here changes results: a compiled kernel loaded from the cache is the one
compiled on first use, and a specialized kernel is bit-identical to its generic one.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from multiprocessing import get_context

import numpy as np

from wmr_model._jit import wait_for_kernels
from wmr_model.errors import ParameterError

__all__ = ["GROUPS", "GroupResult", "compile_group", "compile_kernels"]

_DT = 0.05
_STEPS = 4


def _setup(vehicle: str):
    from wmr_model.io.vehicles import load_vehicle
    from wmr_model.kinematics import api as kin
    from wmr_model.prediction.controllers import straight_wheel_rates
    from wmr_model.terrain.surface import rough

    model = load_vehicle(vehicle)
    terrain = rough(0.02, 0.5, 0, (-2.0, 2.0), (-2.0, 2.0), 0.1)
    q0, _ = kin.initialize_contact(model, terrain)
    rates = np.tile(straight_wheel_rates(model, 0.3), (_STEPS, 1))
    return model, terrain, q0, rates


def _kinematic(vehicle: str) -> None:
    from wmr_model.estimation.odometry import Odometry3D
    from wmr_model.kinematics import api as kin
    from wmr_model.prediction.predict import predict
    from wmr_model.prediction.rollouts import rollout

    model, terrain, q0, rates = _setup(vehicle)
    for integrator in ("euler", "rk4"):
        kin.simulate(model, terrain, q0, rates, _DT, integrator=integrator)
    kin.simulate(model, terrain, q0, np.stack([rates, rates]), _DT)
    attitude = np.zeros((_STEPS + 1, 2))
    gyro = np.zeros((_STEPS, 3))
    for fidelity in ("kinematic", "enhanced"):
        predict(model, terrain, q0, rates, _DT, fidelity=fidelity, Qprime=np.eye(6) * 1e-3)
        predict(model, terrain, q0, rates, _DT, fidelity=fidelity, attitude=attitude,
                known_angular_velocity=gyro)
        rollout(model, terrain, q0, np.stack([rates] * 8), _DT, fidelity=fidelity, every=2)
    rollout(model, terrain, q0, np.tile([0.3, 0.1], (2, _STEPS, 1)), _DT, fidelity="kinematic",
            controller="vehicle")
    names = [model.joint_names[j] for j in model.actuated_joints]
    for fidelity in ("kinematic", "enhanced"):
        odo = Odometry3D(model, terrain, fidelity=fidelity)
        for k in range(3):
            odo.update_imu(0.02 * k, (0.0, 0.0, 0.01))
            odo.update_encoders(0.02 * k, names, velocities=rates[0])


def _dynamic(vehicle: str) -> None:
    from wmr_model.dynamics.simulate import simulate_dynamics, simulate_dynamics_batch
    from wmr_model.prediction.rollouts import rollout

    model, terrain, q0, rates = _setup(vehicle)
    qdot0 = np.zeros(model.nv)
    simulate_dynamics(model, terrain, q0, qdot0, rates, _DT)
    simulate_dynamics_batch(model, terrain, q0, qdot0, np.stack([rates] * 4), _DT)
    rollout(model, terrain, q0, np.stack([rates] * 4), _DT, fidelity="dynamic")
    rollout(model, terrain, q0, np.tile([0.3, 0.1], (2, _STEPS, 1)), _DT, fidelity="dynamic",
            controller="vehicle")


def _planner(vehicle: str) -> None:
    from wmr_model.prediction.predict import float32_refusal, predict

    model, terrain, q0, rates = _setup(vehicle)
    if float32_refusal(model) is not None:
        return  # tracks or loop closures: the vehicle has no float32 path to build
    for fidelity in ("kinematic", "enhanced"):
        predict(model, terrain, q0, np.stack([rates] * 3), _DT, fidelity=fidelity,
                Qprime=np.eye(6) * 1e-3, every=2, precision="float32")


#: Warm-up groups, largest first (see the module docstring).
GROUPS: dict[str, Callable[[str], None]] = {"dynamic": _dynamic, "kinematic": _kinematic,
                                            "planner": _planner}


@dataclass(frozen=True)
class GroupResult:
    """One group's outcome: ``seconds`` of wall time in its process, ``error`` '' when it ran."""

    group: str
    vehicle: str
    seconds: float
    error: str = ""


def _check_group(group: str) -> None:
    if group not in GROUPS:
        raise ParameterError(f"group: expected one of {', '.join(GROUPS)}, got {group!r}")


def compile_group(group: str, vehicle: str = "zoe") -> GroupResult:
    """Run one warm-up group in this process (compiling, or loading from the cache)."""
    _check_group(group)
    t0 = time.perf_counter()
    try:
        GROUPS[group](vehicle)
        wait_for_kernels()  # the vehicle's specialized kernels the calls started
    except Exception as exc:  # reported per group, the others still run
        return GroupResult(group, vehicle, time.perf_counter() - t0,
                           f"{type(exc).__name__}: {exc}")
    return GroupResult(group, vehicle, time.perf_counter() - t0)


def compile_kernels(groups: Sequence[str] | None = None, vehicle: str = "zoe",
                    jobs: int | None = None,
                    progress: Callable[[GroupResult], None] | None = None
                    ) -> list[GroupResult]:
    """Run the warm-up ``groups`` (default all) for ``vehicle`` in ``jobs`` worker processes
    (default: one per group, at most the CPU count); ``progress`` is called as each ends."""
    names = list(GROUPS) if groups is None else list(groups)
    for g in names:
        _check_group(g)
    if jobs is None:
        jobs = min(len(names), os.cpu_count() or 1)
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ParameterError(f"jobs: must be an integer >= 1, got {jobs!r}")
    results: list[GroupResult] = []
    if jobs == 1 or len(names) == 1:
        for g in names:
            results.append(compile_group(g, vehicle))
            if progress:
                progress(results[-1])
        return results
    # spawn: a fresh interpreter per worker (no forked numba or thread state)
    with ProcessPoolExecutor(max_workers=jobs, mp_context=get_context("spawn")) as pool:
        futures = [pool.submit(compile_group, g, vehicle) for g in names]
        for f in futures:
            results.append(f.result())
            if progress:
                progress(results[-1])
    return results


if __name__ == "__main__":  # pragma: no cover - python -m wmr_model.pipelines.warmup GROUP
    r = compile_group(sys.argv[1], *sys.argv[2:3])
    print(r)
    sys.exit(1 if r.error else 0)
