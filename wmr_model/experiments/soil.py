"""Soft-soil experiments: slip versus slope, energy per prediction, multipass, soil calibration.

* :func:`wheel_equilibrium` - quasi-static single rigid wheel on Bekker-Wong soil
  (:mod:`wmr_model.contact.bekker`): the slip ratio and sinkage at which the wheel carries load
  W and delivers drawbar pull F.
* :func:`max_climbable_slope` - quasi-static estimate of the steepest slope a vehicle with nw
  equally loaded driven wheels climbs: :math:`n_w\\,DP_{max}(m g\\cos\\alpha / n_w) =
  m g \\sin\\alpha`.
* :func:`multipass` - single-wheel testbed on a :class:`~wmr_model.terrain.deformable.
  DeformableTerrain`: each pass reads the rut surface and compaction left by the earlier ones.
  The vehicle-level coupling (a full dynamics simulation pressing the map segment by
  segment, later wheels in the ruts) is :mod:`wmr_model.experiments.soft_soil`.
* :func:`slip_vs_slope` - seed 001's test matrix (Sohl and Jain 2005, Figs. 6-11): a
  Rocky-7-class rocker-bogie driving uphill, downhill and cross-hill at 0, 2.5, 5, 10, 15 and
  20°, constrained dynamics (Seegmiller 2014, §2.4) with a soft-soil contact model.

  Slip measure (the one of the MER/DTM tests: commanded versus achieved travel):
  :math:`s = 1 - d / (R\\omega\\,\\Delta t)` per window, with d the body displacement along its
  initial heading over the window, R ω the commanded wheel rim speed; s > 0 the vehicle lags the
  wheels, s >= 1 it makes no progress (stall) or slides back, s < 0 it skids ahead (downhill).
  Mean and spread are over consecutive windows after a settling time (deterministic models) and
  additionally over seeds when the ROAMS traction variability is on. Cross-hill also reports the
  downhill drift angle atan(lateral / forward displacement).
* :func:`energy_balance` - motor work versus potential, kinetic and contact-dissipated energy of
  a simulated run (seed 004 compares locomotion modes by power on a slope).
* :func:`calibrate_soil` - IPEM-style batch fit (Seegmiller 2014, eq. 3.44 with pose residuals
  over intervals) of an observable subset of the soil constants to a synthetic soft-soil run.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import optimize

from wmr_model._jit import njit
from wmr_model.contact import bekker as bk
from wmr_model.contact.models import _params_vector, contact_setup, default_params
from wmr_model.contact.roams import sample_traction_scale
from wmr_model.dynamics.api import crba, create_data, gravity_of
from wmr_model.dynamics.simulate import DynamicsTrajectory, simulate_dynamics
from wmr_model.errors import ParameterError
from wmr_model.experiments.dynamic import contact_kinematics
from wmr_model.kinematics import initialize_contact
from wmr_model.prediction.controllers import straight_wheel_rates
from wmr_model.spatial import STANDARD_GRAVITY, quat_from_euler, quat_to_rot
from wmr_model.terrain.deformable import DeformableTerrain
from wmr_model.terrain.soil import Soil, bekker_params, get_soil
from wmr_model.terrain.surface import Terrain, inclined_plane
from wmr_model.vehicles.inertia import composite_inertia, inertia_mass_com
from wmr_model.vehicles.model import VehicleModel

__all__ = ["SLOPES_DEG", "DIRECTIONS", "WheelState", "wheel_params", "sinkage_for_load",
           "wheel_equilibrium",
           "max_climbable_slope", "multipass", "SlopeRun", "start_state", "slip_vs_slope",
           "run_slope", "concatenate_segments", "EnergyBalance", "energy_balance",
           "SoilFit", "calibrate_soil"]

#: Slopes of seed 001's DTM/ROAMS test matrix [deg].
SLOPES_DEG = (0.0, 2.5, 5.0, 10.0, 15.0, 20.0)
#: Driving directions relative to the fall line: vehicle yaw minus the uphill heading [rad].
DIRECTIONS = {"uphill": 0.0, "downhill": math.pi, "crosshill": 0.5 * math.pi}


# ---------------------------------------------------------------------------------------------
# Single wheel
# ---------------------------------------------------------------------------------------------


def wheel_params(soil: str | Soil, radius: float, width: float, **over: float) -> np.ndarray:
    """``bekker`` parameter vector (N_PARAMS,) of one wheel on ``soil`` with overrides."""
    d = default_params("bekker", 1.0, 1.0, radius, width)
    d.update(bekker_params(soil))
    return _params_vector("bekker", d, over, "wheel_params")


@dataclass(frozen=True)
class WheelState:
    """Quasi-static rigid-wheel state: slip ratio s, sinkage h [m] below the local surface,
    drawbar pull fx, load fz [N], torque T [N m], shear displacement left in the soil j_exit
    [m]; ``stalled`` when no slip in [0, 1] (or [-1, 0] for a negative pull) delivers the
    demanded pull."""

    s: float
    h: float
    fx: float
    fz: float
    T: float
    j_exit: float
    stalled: bool


def sinkage_for_load(params: np.ndarray, s: float, W: float) -> float:
    """Sinkage h [m] at which the wheel of ``params`` at slip ratio ``s`` carries ``W`` [N]."""
    out = np.empty(7)

    def g(h: float) -> float:
        bk.wheel_stresses(params, s, 0.0, h, bk.N_THETA, out)
        return out[2] - W

    R = float(params[8])
    if g(R) < 0.0:
        raise ParameterError(f"wheel_equilibrium: load {W} N sinks the wheel past its radius")
    return float(optimize.brentq(g, 1e-12, R, xtol=1e-13))


def _state(params: np.ndarray, s: float, W: float) -> tuple[float, np.ndarray]:
    h = sinkage_for_load(params, s, W)
    out = np.empty(7)
    bk.wheel_stresses(params, s, 0.0, h, bk.N_THETA, out)
    return h, out


def wheel_equilibrium(params: np.ndarray, W: float, pull: float = 0.0,
                      n_scan: int = 41) -> WheelState:
    """Slip and sinkage at which the wheel carries ``W`` [N] and delivers drawbar pull ``pull``.

    Scans s on [0, 1] (or [0, -1] for a negative pull) for the first sign change of
    ``fx(s, h(s)) - pull`` and refines it with Brent's method; ``stalled`` with s = ±1 if none.
    """
    sgn = 1.0 if pull >= 0.0 else -1.0
    grid = sgn * np.linspace(0.0, 1.0, n_scan)
    vals = [_state(params, float(s), W)[1][0] - pull for s in grid]
    for a in range(n_scan - 1):
        if vals[a] * sgn <= 0.0 <= vals[a + 1] * sgn:
            s = float(optimize.brentq(lambda s: _state(params, s, W)[1][0] - pull,
                                      grid[a], grid[a + 1], xtol=1e-12))
            return _wheel_state(params, s, W, False)
    if vals[0] * sgn > 0.0:  # pull is delivered without slip (e.g. a braking demand of 0)
        return _wheel_state(params, 0.0, W, False)
    return _wheel_state(params, float(grid[-1]), W, True)


def _wheel_state(params: np.ndarray, s: float, W: float, stalled: bool) -> WheelState:
    h, out = _state(params, s, W)
    return WheelState(s, h, float(out[0]), float(out[2]), float(out[3]), float(out[6]),
                      stalled)


def max_climbable_slope(params: np.ndarray, mass: float, nw: int,
                        gravity: float = STANDARD_GRAVITY) -> float:
    """Quasi-static steepest slope [rad] for ``nw`` equally loaded driven wheels of ``params``.

    Solves :math:`n_w \\max_s DP(s; m g\\cos\\alpha/n_w) = m g \\sin\\alpha` (every wheel at its
    best slip; load transfer between axles ignored).
    """
    s_grid = np.linspace(0.0, 1.0, 41)

    def excess(alpha: float) -> float:
        W = mass * gravity * math.cos(alpha) / nw
        dp = max(_state(params, float(s), W)[1][0] for s in s_grid)
        return nw * dp - mass * gravity * math.sin(alpha)

    if excess(0.0) <= 0.0:
        return 0.0
    return float(optimize.brentq(excess, 0.0, 0.5 * math.pi - 0.05, xtol=1e-8))


def multipass(soil: str | Soil, W: float, radius: float, width: float, n_passes: int = 2,
              pull: float = 0.0, xi: float = 0.0, length: float = 1.0,
              resolution: float = 0.01) -> tuple[list[WheelState], DeformableTerrain]:
    """Wheels of load ``W`` following each other along y = 0 on a deformable soil strip.

    Pass k reads the rut surface, the compacted depth ``zc`` and the accumulated shear
    displacement ``js`` under its path from the map (:meth:`DeformableTerrain.compaction_at`),
    finds its quasi-static slip and sinkage below the rut for drawbar pull ``pull``, and presses
    the rut deeper by that sinkage, leaving its own shear displacement. Returns the per-pass
    states (``h`` is each pass' own sinkage below the surface it met) and the map.
    """
    s = get_soil(soil)
    half = max(4.0 * width, 0.1)
    dt = DeformableTerrain.flat((0.0, length), (-half, half), resolution, s.rho, s.repose, xi)
    p0, p1 = (0.25 * length, 0.0), (0.75 * length, 0.0)
    states = []
    for _ in range(n_passes):
        _, zc, js = dt.compaction_at(p0, p1, width)
        ws = wheel_equilibrium(wheel_params(s, radius, width, zc=zc, j0=js), W, pull)
        states.append(ws)
        dt.roll(p0, p1, width, ws.h, shear=ws.j_exit - js)  # js becomes ws.j_exit
    return states, dt


# ---------------------------------------------------------------------------------------------
# Vehicle runs on slopes
# ---------------------------------------------------------------------------------------------


def start_state(model: VehicleModel, terrain: Terrain, yaw: float,
                speed: float) -> tuple[np.ndarray, np.ndarray]:
    """State on ``terrain`` at the origin heading ``yaw``, moving ``speed`` forward, rolling."""
    q = model.neutral_state()
    q[0:4] = quat_from_euler(0.0, 0.0, yaw)
    q0, _ = initialize_contact(model, terrain, q)
    qd0 = np.zeros(model.nv)
    qd0[3] = speed
    qd0[6 + model.wheel_joints] = speed / model.wheel_radius
    return q0, qd0


@njit
def _soil_torque_loop(params, V, W, R, DZ, T):
    out = np.empty(7)
    for i in range(V.shape[0]):
        for k in range(V.shape[1]):
            Rw = R[k] * W[i, k]
            s, beta, h, sx = bk.slip_inputs(params[k], V[i, k, 0], V[i, k, 1], Rw, DZ[i, k])
            bk.wheel_stresses(params[k], s, beta, h, bk.N_THETA, out)
            T[i, k] = sx * out[3]


@dataclass(frozen=True)
class EnergyBalance:
    """Energies of a run [J]: motor work sum_k int R_k w_k f_x,k dt, potential and kinetic
    energy gains, contact dissipation -int sum_k f_c,k . v_c,k dt, and the relative residual
    ``(motor - potential - kinetic - dissipated)`` divided by the largest of the four terms
    (floored at 1e-3 m g times the distance travelled);
    ``power`` the mean motor power [W] and ``cost_of_transport`` motor work / (m g distance).

    ``soil_power`` [W] is the mean of sum_k T_k w_k with the Bekker-Wong wheel torque
    T = R^2 b ∫τ dθ (NaN for other contact models). It exceeds ``power`` by the soil
    compaction work: the force-balance contact applies (f_x, f_z) at the contact point, so
    the radial normal stresses' resultant, which passes through the axle, is charged to the
    motor only through f_x.
    """

    motor: float
    potential: float
    kinetic: float
    dissipated: float
    residual: float
    power: float
    cost_of_transport: float
    soil_power: float = math.nan


def energy_balance(model: VehicleModel, terrain: Terrain, tr: DynamicsTrajectory,
                   i0: int = 0, contact_params: Mapping[str, float] | None = None
                   ) -> EnergyBalance:
    """Energy balance of ``tr`` from step ``i0`` on (work-energy theorem of the multibody).

    Motor torque per wheel is R f_x (moment of the contact force about the axle; wheel
    inertia and hub friction ignored, exact at constant wheel rates). For ``bekker`` runs give
    the run's ``contact_params`` to get ``soil_power``.
    """
    q, qd, fc = tr.q, tr.qdot, tr.f_contact
    T = fc.shape[0]
    dt = float(tr.t[1] - tr.t[0])
    V = contact_kinematics(model, terrain, q[i0:T], qd[i0 + 1:T + 1])[0]
    w = qd[i0 + 1:T + 1, 6 + model.wheel_joints]
    motor = float(np.sum(model.wheel_radius * w * fc[i0:, :, 0]) * dt)
    dissipated = float(-np.sum(fc[i0:] * V) * dt)
    g = gravity_of(model)
    data = create_data(model)

    def kinetic(i: int) -> float:
        return 0.5 * float(qd[i] @ crba(model, data, q[i]) @ qd[i])

    def com(i: int) -> np.ndarray:  # centre of mass in world coordinates
        _, c = inertia_mass_com(composite_inertia(model, q[i]))
        return q[i, 4:7] + quat_to_rot(q[i, 0:4]) @ c

    m = model.total_mass
    pot = float(-m * g @ (com(T) - com(i0)))
    kin = kinetic(T) - kinetic(i0)
    dist = float(np.linalg.norm(q[T, 4:7] - q[i0, 4:7]))
    # normalise by the largest term, floored at 1e-3 m g distance (on flat ground every term
    # is ~0 and the ratio of two round-off-sized numbers says nothing)
    scale = max(abs(motor), abs(pot), abs(kin), abs(dissipated),
                1e-3 * m * float(np.linalg.norm(g)) * dist)
    res = (motor - pot - kin - dissipated) / scale if scale > 0.0 else 0.0
    duration = (T - i0) * dt
    cot = motor / (m * float(np.linalg.norm(g)) * dist) if dist > 0 else math.inf
    soil_power = math.nan
    if all(name == "bekker" for name in tr.contact_models):
        cs = contact_setup(model, "bekker", contact_params)
        Tq = np.empty(w.shape)
        _soil_torque_loop(cs.params, V, np.ascontiguousarray(w), model.wheel_radius,
                          np.ascontiguousarray(tr.dz[i0:]), Tq)
        soil_power = float(np.mean(np.sum(Tq * w, axis=1)))
    return EnergyBalance(motor, pot, kin, dissipated, res, motor / duration, cot, soil_power)


@dataclass
class SlopeRun:
    """One direction/slope cell of the matrix.

    Attributes:
        direction: ``uphill``, ``downhill`` or ``crosshill``; slope_deg: slope [deg].
        slip_mean, slip_std: mean and standard deviation of the window slips (see module
        docstring); drift_deg: mean downhill drift angle [deg] (cross-hill; 0 otherwise).
        stalled: mean slip >= 1 (no progress).
        energy: :class:`EnergyBalance` of the run after settling.
        slips: (n,) window slips over all windows and seeds.
    """

    direction: str
    slope_deg: float
    slip_mean: float
    slip_std: float
    drift_deg: float
    stalled: bool
    energy: EnergyBalance
    slips: np.ndarray = field(repr=False)

    def summary(self) -> dict[str, Any]:
        """Scalars only, for tables and JSON."""
        return {"direction": self.direction, "slope_deg": self.slope_deg,
                "slip_mean": self.slip_mean, "slip_std": self.slip_std,
                "drift_deg": self.drift_deg, "stalled": self.stalled,
                "power_W": self.energy.power, "soil_power_W": self.energy.soil_power,
                "energy_residual": self.energy.residual,
                "cost_of_transport": self.energy.cost_of_transport}


def _segment_params(model: VehicleModel, base: Mapping[str, float], scales: np.ndarray
                    ) -> VehicleModel:
    """Model copy whose options give wheel k the ROAMS traction scale ``scales[k]`` (eq. 11)."""
    opts = dict(model.options)
    opts["wheel_contact"] = {w: {"contact_model": "roams",
                                 "contact_params": {**base, "s": float(scales[k])}}
                             for k, w in enumerate(model.wheel_names)}
    return dataclasses.replace(model, options=opts)


def run_slope(model: VehicleModel, slope: float, direction: str = "uphill", *,
              speed: float = 0.1, duration: float = 6.0, settle: float = 2.0,
              window: float = 1.0, dt: float = 0.01, contact_model: str = "bekker",
              contact_params: Mapping[str, float] | None = None,
              variability: tuple[float, float] | None = None, seed: int = 0,
              segment: float = 0.5) -> tuple[SlopeRun, DynamicsTrajectory]:
    """Drive ``model`` straight at ``speed`` on a plane of ``slope`` [rad] in ``direction``.

    All wheels at speed / R (steering held straight). ``variability = (p1, p2)`` switches on
    the ROAMS traction scale (``contact_model`` must be ``roams``): one draw per wheel per
    ``segment`` seconds from N(1, s_std(theta)) (eqs. 11-13) with ``seed``.
    """
    if direction not in DIRECTIONS:
        raise ParameterError(f"direction must be one of {sorted(DIRECTIONS)}, got {direction!r}")
    if variability is not None and contact_model != "roams":
        raise ParameterError("variability needs contact_model='roams' (eqs. 11-13 scale the "
                             "Terzaghi limit)")
    ter = inclined_plane(slope)
    yaw = DIRECTIONS[direction]
    q0, qd0 = start_state(model, ter, yaw, speed)
    n = round(duration / dt)
    u = straight_wheel_rates(model, speed)
    params = dict(contact_params or {})
    if variability is None:
        U = np.tile(u, (n, 1))
        tr = simulate_dynamics(model, ter, q0, qd0, U, dt, contact_model=contact_model,
                               contact_params=params)
    else:
        tr = _run_segments(model, ter, q0, qd0, u, n, dt, params, variability, seed,
                           max(1, round(segment / dt)), slope)
    i0 = round(settle / dt)
    nwin = round(window / dt)
    R_heading = quat_to_rot(q0[0:4])
    fwd, lat = R_heading[:, 0], R_heading[:, 1]
    slips, drifts = [], []
    for a in range(i0, n - nwin + 1, nwin):
        d = tr.q[a + nwin, 4:7] - tr.q[a, 4:7]
        slips.append(1.0 - float(d @ fwd) / (speed * window))
        drifts.append(math.degrees(math.atan2(float(d @ lat), float(d @ fwd))))
    sl = np.array(slips)
    en = energy_balance(model, ter, tr, i0, params)
    drift = float(np.mean(drifts)) if direction == "crosshill" else 0.0
    run = SlopeRun(direction, math.degrees(slope), float(sl.mean()), float(sl.std()), drift,
                   bool(sl.mean() >= 1.0), en, sl)
    return run, tr


def _run_segments(model: VehicleModel, ter: Terrain, q0: np.ndarray, qd0: np.ndarray,
                  u: np.ndarray, n: int, dt: float, params: Mapping[str, float],
                  variability: tuple[float, float], seed: int, nseg: int,
                  slope: float) -> DynamicsTrajectory:
    """ROAMS run in segments, redrawing each wheel's traction scale per segment (eq. 11)."""
    rng = np.random.default_rng(seed)
    p1, p2 = variability
    phi = float(params.get("phi", default_params("roams", 1.0, 1.0, 0.1, 0.05)["phi"]))
    base = {k: v for k, v in params.items() if k != "s"}
    segs = []
    q, qd = q0, qd0
    done = 0
    while done < n:
        m = min(nseg, n - done)
        scales = sample_traction_scale(np.full(model.nw, abs(slope)), phi, p1, p2, rng)
        segs.append(simulate_dynamics(_segment_params(model, base, scales), ter, q, qd,
                                      np.tile(u, (m, 1)), dt))
        q, qd = segs[-1].q[-1], segs[-1].qdot[-1]
        done += m
    return concatenate_segments(segs, dt)


def concatenate_segments(segments: Sequence[DynamicsTrajectory],
                         dt: float) -> DynamicsTrajectory:
    """One trajectory from consecutive segments, each starting at the previous one's last state.

    The result has T = sum of the segments' steps, times ``arange(T + 1) dt``; its contact
    model names are the first segment's.
    """
    first = segments[0]
    q = np.concatenate([first.q[:1]] + [s.q[1:] for s in segments])
    return DynamicsTrajectory(np.arange(q.shape[0]) * dt, q,
                              np.concatenate([first.qdot[:1]] + [s.qdot[1:] for s in segments]),
                              np.concatenate([s.iterations for s in segments]),
                              np.concatenate([s.cost for s in segments]),
                              np.concatenate([s.f_contact for s in segments]),
                              np.concatenate([s.dz for s in segments]), first.contact_models)


def _slope_run(model: VehicleModel, slope_deg: float, direction: str, seed: int,
                kw: Mapping[str, Any]) -> SlopeRun:
    """One cell of the slip matrix (a runner task: module-level, returns the run only)."""
    return run_slope(model, math.radians(slope_deg), direction, seed=seed, **kw)[0]


def slip_vs_slope(model: VehicleModel, slopes_deg: Sequence[float] = SLOPES_DEG,
                  directions: Sequence[str] = ("uphill", "downhill", "crosshill"),
                  seeds: Sequence[int] = (0,), runner: Any = None,
                  **kw: Any) -> list[SlopeRun]:
    """The slip matrix: :func:`run_slope` per direction and slope, window slips pooled over
    ``seeds`` (only matters with ``variability``). With a :class:`wmr_model.pipelines.runner.Runner`
    the cells run as its tasks (in-process or on Ray, cached); a failed cell raises."""
    cells = [(d, a, s) for d in directions for a in slopes_deg for s in seeds]
    if runner is None:
        done = {c: _slope_run(model, c[1], c[0], c[2], kw) for c in cells}
    else:
        from wmr_model.pipelines.runner import Task

        res = runner.run([Task(f"{d} {a:g} deg seed {s}", _slope_run,
                               {"model": model, "slope_deg": a, "direction": d, "seed": s,
                                "kw": kw}) for d, a, s in cells])
        failed = [r for r in res if not r.ok]
        if failed:
            raise RuntimeError(f"slip_vs_slope: {len(failed)} of {len(res)} cells failed; "
                               f"{failed[0].name}: {failed[0].error}")
        done = {c: r.value for c, r in zip(cells, res)}
    out = []
    for d in directions:
        for a in slopes_deg:
            runs = [done[(d, a, s)] for s in seeds]
            sl = np.concatenate([r.slips for r in runs])
            r0 = runs[0]
            out.append(SlopeRun(d, a, float(sl.mean()), float(sl.std()),
                                float(np.mean([r.drift_deg for r in runs])),
                                bool(sl.mean() >= 1.0), r0.energy, sl))
    return out


# ---------------------------------------------------------------------------------------------
# Calibration
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SoilFit:
    """Result of :func:`calibrate_soil`: estimated values, 1-sigma uncertainties (from the
    Gauss-Newton covariance sigma^2 (J^T J)^-1), the truth used to synthesize the log, the
    residual RMS [m], the number of simulations and the correlation matrix of the estimates
    (|off-diagonal| -> 1: only a combination of those constants is observable)."""

    names: tuple[str, ...]
    estimate: np.ndarray
    sigma: np.ndarray
    truth: np.ndarray
    rms: float
    n_sim: int
    correlation: np.ndarray


def _interval_displacements(model: VehicleModel, ter: Terrain, q0: np.ndarray,
                            qd0: np.ndarray, U: np.ndarray, dt: float, params: Mapping,
                            starts: np.ndarray, nint: int) -> np.ndarray:
    tr = simulate_dynamics(model, ter, q0, qd0, U, dt, contact_model="bekker",
                           contact_params=params)
    return np.concatenate([tr.q[a + nint, 4:7] - tr.q[a, 4:7] for a in starts])


def calibrate_soil(model: VehicleModel, soil: str | Soil = "sandy_loam",
                   names: Sequence[str] = ("phi", "kphi"), truth_scale: Sequence[float] = (1.0,
                                                                                           1.0),
                   start_scale: Sequence[float] = (0.8, 1.5), slope_deg: float = 8.0,
                   speed: float = 0.1, duration: float = 6.0, interval: float = 1.0,
                   dt: float = 0.01, noise: float = 2e-4, seed: int = 0) -> SoilFit:
    """Fit soil constants ``names`` to a synthetic uphill soft-soil run (IPEM, eq. 3.44).

    The log is the body trajectory of ``model`` driving up a ``slope_deg`` plane on ``soil``
    with the constants scaled by ``truth_scale``, with white position noise ``noise`` [m].
    Residuals are predicted minus measured body displacements over consecutive ``interval``
    seconds, the prediction running from the logged initial state with the logged commands
    (the systematic part of IPEM); the fit is scipy least squares on log-parameters from
    ``start_scale`` times the preset, uncertainty from the Gauss-Newton covariance.

    Observability (rocky7, sandy loam, one 8° uphill run, 6 s): (phi, kphi) are recovered
    within their uncertainty; the pairs (phi, c), (kc, kphi), (kphi, n) and (phi, K) each
    have |correlation| > 0.998: a steady climb at one slope and load shows one slip and one
    sinkage, so c trades against phi (c A + F_N tan phi), kc against kphi (only
    kc / b + kphi enters for one wheel width), n against k (one load) and K against phi (the
    slip that mobilises the pull). Fit one of each pair and fix the other at its preset, or
    log several slopes, loads or wheel widths.
    """
    s = get_soil(soil)
    base = bekker_params(s)
    for k in names:
        if k not in base:
            raise ParameterError(f"calibrate_soil: unknown soil constant {k!r}; known "
                                 f"{sorted(base)}")
    truth = np.array([base[k] * f for k, f in zip(names, truth_scale)])
    ter = inclined_plane(math.radians(slope_deg))
    q0, qd0 = start_state(model, ter, 0.0, speed)
    n = round(duration / dt)
    U = np.tile(straight_wheel_rates(model, speed), (n, 1))
    nint = round(interval / dt)
    starts = np.arange(0, n - nint + 1, nint)
    rng = np.random.default_rng(seed)
    meas = _interval_displacements(model, ter, q0, qd0, U, dt,
                                   {**base, **dict(zip(names, truth))}, starts, nint)
    meas = meas + noise * math.sqrt(2.0) * rng.standard_normal(meas.shape)
    count = [0]

    def resid(logx: np.ndarray) -> np.ndarray:
        count[0] += 1
        p = {**base, **dict(zip(names, np.exp(logx)))}
        return _interval_displacements(model, ter, q0, qd0, U, dt, p, starts, nint) - meas

    x0 = np.log(np.array([base[k] * f for k, f in zip(names, start_scale)]))
    sol = optimize.least_squares(resid, x0, diff_step=1e-3, x_scale=1.0, xtol=1e-8)
    J = sol.jac
    dof = max(sol.fun.size - len(names), 1)
    s2 = float(sol.fun @ sol.fun) / dof
    cov = s2 * np.linalg.pinv(J.T @ J)
    est = np.exp(sol.x)
    sigma = est * np.sqrt(np.diag(cov))  # d(exp x) = exp(x) dx
    rms = float(np.sqrt(np.mean(sol.fun ** 2)))
    sd = np.sqrt(np.diag(cov))
    corr = cov / np.outer(sd, sd) if np.all(sd > 0) else np.full(cov.shape, np.nan)
    return SoilFit(tuple(names), est, sigma, truth, rms, count[0], corr)
