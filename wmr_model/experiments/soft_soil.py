"""Vehicle dynamics on deformable soil: wheels press ruts that later wheels drive in (multipass).

Issue 12's deformable-terrain coupling. :func:`simulate_on_soil` runs the constrained dynamics
(:func:`~wmr_model.dynamics.simulate.simulate_dynamics`, Seegmiller 2014 §2.4) with the
``bekker`` contact model (:mod:`wmr_model.contact.bekker`) in short segments over a
:class:`~wmr_model.terrain.deformable.DeformableTerrain`, and between segments

1. **imprints** into the map the ground each wheel has passed over: the nodes swept by its
   contact point (``wheel width`` wide), from where the previous imprint ended up to a
   ``margin`` behind its current contact point, are lowered by the wheel's sinkage below the
   surface it met there (the Bekker-Wong wheel leaves the rut at the depth of its lowest
   point: no rebound, θ2 = 0). The sinkage is the mean over the steps whose contact point lay
   over that stretch. Each node is pressed at most once per wheel and run. The margin (more
   than one node spacing) keeps pressed nodes out of the bilinear cell under the current
   contact point, so a wheel never sinks into its own fresh imprint. The pressed nodes also
   take the shear displacement the wheel leaves in the soil, j(θ2) at its mean slip, slip
   angle and sinkage over the segment (``js``). The map then avalanches to the angle of
   repose, except the soil each wheel holds: the nodes from its imprint end to the front of
   its contact patch (otherwise the step at the imprint end, as deep as the sinkage, would
   slide back into the fresh rut and lower the ground under the wheel);
2. sets each wheel's multipass contact state for the next segment, the ``bekker`` parameters
   ``zc`` (compacted depth) and ``j0`` (pre-existing shear), to the map's mean ``zc`` and
   ``js`` over the ground ahead of its contact point that the wheel's patch covers during the
   next segment (:meth:`DeformableTerrain.compaction_at`), through per-wheel contact
   overrides (``options.wheel_contact``, :func:`wmr_model.contact.models.contact_setup`);
3. hands the next segment the updated GRID snapshot (:meth:`DeformableTerrain.terrain`).

The state (q, qdot) carries over between segments unchanged; only the force balance's warm
start is rebuilt at each segment start (from the current constraint velocities).

Segments are ``segment`` wheel radii of commanded rim travel (default 1/4). Within a segment the
terrain is frozen: the wheel keeps penetrating the map's surface by its sinkage and the rut
appears behind it at the next update, which is the rigid-wheel picture (the surface under the
patch is the unrutted soil ahead of the wheel's lowest point).

Slip per wheel (:meth:`SoftSoilRun.wheel_slip`): ``1 - (wheel-centre travel along the
wheel's longitudinal axis) / (R × wheel rotation)`` over a window, from positions only; the
contact model's own slip ratio s = -v_x / (R ω) (C.19) per step is in
:attr:`SoftSoilRun.slip_ratio`.

Limits: the imprint follows straight stretches between updates (fine for segments much shorter
than the turning radius); a wheel driving backwards or scrubbing on the spot presses nothing
new; the wheel sidewalls do not bulldoze (no berm in front of the wheel).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from wmr_model.contact import bekker as bk
from wmr_model.contact.models import contact_setup
from wmr_model.dynamics.simulate import DynamicsTrajectory, simulate_dynamics
from wmr_model.errors import ParameterError, TerrainError, check_shape
from wmr_model.experiments.dynamic import contact_kinematics
from wmr_model.experiments.soil import concatenate_segments, start_state
from wmr_model.kinematics.api import create_data, forward_kinematics, wheel_contact
from wmr_model.prediction.controllers import straight_wheel_rates
from wmr_model.terrain.deformable import DeformableTerrain
from wmr_model.terrain.soil import Soil, bekker_params, get_soil
from wmr_model.terrain.surface import Terrain
from wmr_model.vehicles.model import VehicleModel

__all__ = ["SoftSoilRun", "simulate_on_soil", "drive_straight_on_soil", "wheel_rows",
           "SEGMENT_RADII", "MARGIN_NODES", "RELAX_MARGIN_NODES"]

#: Nodes of room around a wheel's relaxation window beyond its rut's run-out (see
#: :func:`simulate_on_soil`): the avalanche of a segment's rut stays well inside.
RELAX_MARGIN_NODES = 5
#: Default segment length in wheel radii of commanded rim travel between map updates.
SEGMENT_RADII = 0.25
#: Default imprint margin behind the contact point, in node spacings (must exceed 1: the
#: bilinear cell under the contact point must hold no node the wheel has just pressed).
MARGIN_NODES = 1.5

_J0 = bk.PARAM_NAMES.index("j0")


@dataclass
class SoftSoilRun:
    """Result of :func:`simulate_on_soil`.

    Attributes:
        trajectory: the whole run (T steps), segments concatenated.
        soil_map: the deformable map after the run (the same object that was passed in).
        terrain: GRID snapshot of the map after the run.
        contact_xy: (T+1, nw, 2) contact points [m] at every state, on the snapshot in use.
        wheel_xyz: (T+1, nw, 3) wheel centres [m]; forward: (T+1, nw, 2) horizontal unit
            longitudinal axis of each contact frame.
        sinkage: (T+1, nw) sinkage below the surface the wheel met, max(-Δz, 0) [m].
        slip_ratio: (T, nw) the contact model's slip ratio s (C.19) at each step.
        zc, j0: (nseg, nw) multipass contact state per segment [m].
        segment_start: (nseg,) first step of each segment.
        mass0, mass: soil mass of the map before and after the run [kg].
        wheel_radius: (nw,) [m]; wheel_angle: (T+1, nw) wheel joint angles [rad].
    """

    trajectory: DynamicsTrajectory
    soil_map: DeformableTerrain
    terrain: Terrain
    contact_xy: np.ndarray = field(repr=False)
    wheel_xyz: np.ndarray = field(repr=False)
    forward: np.ndarray = field(repr=False)
    sinkage: np.ndarray = field(repr=False)
    slip_ratio: np.ndarray = field(repr=False)
    zc: np.ndarray = field(repr=False)
    j0: np.ndarray = field(repr=False)
    segment_start: np.ndarray = field(repr=False)
    mass0: float
    mass: float
    wheel_radius: np.ndarray = field(repr=False)
    wheel_angle: np.ndarray = field(repr=False)

    def wheel_slip(self, i0: int, i1: int) -> np.ndarray:
        """Slip (nw,) over states i0..i1: 1 - centre travel / (R × rotation) (module docstring).

        Centre travel is the sum over steps of the centre displacement projected on the
        wheel's horizontal longitudinal axis at the start of the step.
        """
        d = np.diff(self.wheel_xyz[i0:i1 + 1, :, :2], axis=0)
        travel = np.sum(np.sum(d * self.forward[i0:i1], axis=2), axis=0)
        roll = self.wheel_radius * (self.wheel_angle[i1] - self.wheel_angle[i0])
        return 1.0 - travel / roll


def _contacts(model: VehicleModel, terrain: Terrain, Q: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Contact points (n, nw, 2), wheel centres (n, nw, 3), horizontal longitudinal axes
    (n, nw, 2) and sinkages (n, nw) of the states ``Q`` (n, nq) on ``terrain``."""
    data = create_data(model)
    n, nw = Q.shape[0], model.nw
    P, C, X, H = (np.empty((n, nw, 2)), np.empty((n, nw, 3)), np.empty((n, nw, 2)),
                  np.empty((n, nw)))
    for i in range(n):
        Tw = forward_kinematics(model, data, Q[i])
        dz = wheel_contact(model, data, terrain)[:nw]
        Tc = data.T_contact[:nw]
        P[i] = Tc[:, :2, 3]
        C[i] = Tw[model.wheel_frame, :3, 3]
        x = Tc[:, :2, 0]
        X[i] = x / np.linalg.norm(x, axis=1)[:, None]
        H[i] = np.maximum(-dz, 0.0)
    return P, C, X, H


def _wheel_options(model: VehicleModel, zc: np.ndarray, j0: np.ndarray) -> VehicleModel:
    """Model copy whose options give wheel k the ``bekker`` multipass state (zc[k], j0[k])."""
    opts = dict(model.options)
    per = dict(opts.get("wheel_contact", {}) or {})
    for k, w in enumerate(model.wheel_names):
        wopt = dict(per.get(w, {}) or {})
        wopt["contact_model"] = "bekker"
        wopt["contact_params"] = {**(wopt.get("contact_params", {}) or {}),
                                  "zc": float(zc[k]), "j0": float(j0[k])}
        per[w] = wopt
    opts["wheel_contact"] = per
    return dataclasses.replace(model, options=opts)


def _state_ahead(model: VehicleModel, soil_map: DeformableTerrain, P: np.ndarray,
                 X: np.ndarray, H: np.ndarray, travel: float) -> tuple[np.ndarray, np.ndarray]:
    """Mean ``zc`` and ``js`` (nw,) over the ground each wheel's patch covers next segment:
    from its contact point forward by the segment's rim travel plus its patch length."""
    zc, js = np.empty(model.nw), np.empty(model.nw)
    res = max(soil_map.resolution)
    for k in range(model.nw):
        R = float(model.wheel_radius[k])
        patch = R * math.sin(math.acos(max(-1.0, 1.0 - H[k] / R)))
        look = max(travel + patch, 2.0 * res)
        try:
            _, zc[k], js[k] = soil_map.compaction_at(P[k], P[k] + look * X[k],
                                                     float(model.wheel_width[k]))
        except ParameterError:
            raise TerrainError(f"simulate_on_soil: wheel {model.wheel_names[k]} at "
                               f"({P[k, 0]:.3f}, {P[k, 1]:.3f}) m left the soil map") from None
    return zc, js


def _soil_settings(soil_map: DeformableTerrain, soil: str | Soil,
                   contact_params: Mapping[str, Any] | None, segment: float,
                   margin: float | None) -> tuple[dict[str, Any], float]:
    """Checked ``bekker`` parameters of the run and the imprint margin [m]."""
    over = dict(contact_params or {})
    for key in ("zc", "j0"):
        if key in over:
            raise ParameterError(f"simulate_on_soil: contact_params.{key} is set from the soil "
                                 f"map's compaction state; do not pass it")
    base = {**bekker_params(get_soil(soil)), **over}
    res = max(soil_map.resolution)
    margin = MARGIN_NODES * res if margin is None else float(margin)
    if not margin > res:
        raise ParameterError(f"simulate_on_soil: margin must exceed the node spacing {res} m, "
                             f"got {margin}")
    if not segment > 0.0:
        raise ParameterError(f"simulate_on_soil: segment must be > 0 wheel radii, got {segment}")
    return base, margin


def _segment_slip(params: np.ndarray, V: np.ndarray, Rw: np.ndarray,
                  dz: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Slip ratio and slip angle (m, nw) of every wheel over a segment's m steps."""
    m, nw = Rw.shape
    s_in = np.empty((m, nw))
    beta = np.empty((m, nw))
    for t in range(m):
        for k in range(nw):
            s_in[t, k], beta[t, k], _, _ = bk.slip_inputs(params[k], V[t, k, 0], V[t, k, 1],
                                                          Rw[t, k], dz[t, k])
    return s_in, beta


def _press_ruts(model: VehicleModel, soil_map: DeformableTerrain, params: np.ndarray,
                s_in: np.ndarray, beta: np.ndarray, P: np.ndarray, X: np.ndarray, H: np.ndarray,
                Pw: np.ndarray, Hw: np.ndarray, end: np.ndarray, pressed: np.ndarray,
                margin: float) -> None:
    """Press each wheel's rut from its imprint end to ``margin`` behind its contact point:
    the sinkage its states over that stretch had and the shear displacement it adds; ``end``
    and ``pressed`` (nw, ...) advance in place."""
    out = np.empty(7)
    for k in range(model.nw):
        e = P[-1, k] - margin * X[-1, k]
        d = e - end[k]
        L = float(d @ X[-1, k])
        if L <= 0.0:
            continue
        mask = soil_map.footprint(end[k], e, float(model.wheel_width[k])) & ~pressed[k]
        u = d / float(np.hypot(d[0], d[1]))
        a = (Pw[:, k] - end[k]) @ u
        over_stretch = (a >= 0.0) & (a <= L)
        h = float(Hw[over_stretch, k].mean() if over_stretch.any() else H[:, k].mean())
        bk.wheel_stresses(params[k], float(s_in[:, k].mean()), float(beta[:, k].mean()),
                          float(H[:, k].mean()), bk.N_THETA, out)
        shear = max(out[6] - params[k, _J0], 0.0)  # j(θ2) this wheel adds
        soil_map.press(mask, h, shear, relax=False)
        pressed[k] |= mask
        end[k] = e


def _relax_around_wheels(model: VehicleModel, soil_map: DeformableTerrain, P: np.ndarray,
                         X: np.ndarray, H: np.ndarray, start: np.ndarray, end: np.ndarray,
                         travel: float) -> None:
    """Avalanche the map around each wheel's new rut, holding the soil under the wheels."""
    held = np.zeros(soil_map.h.shape, dtype=bool)
    boxes = []
    for k in range(model.nw):  # soil under each wheel, from its imprint end to its patch
        R = float(model.wheel_radius[k])
        look = travel + R * math.sin(math.acos(max(-1.0, 1.0 - float(H[-1, k]) / R)))
        front = P[-1, k] + look * X[-1, k]
        (j0, j1, i0, i1), under = soil_map.swept(end[k], front, float(model.wheel_width[k]))
        held[j0:j1, i0:i1] |= under
        boxes.append((np.minimum(start[k], front), np.maximum(start[k], front),
                      float(model.wheel_width[k]), float(H[:, k].max())))
    # Avalanche only around each wheel's new rut and held soil (the rest of the map is at
    # repose and unchanged): the cost follows the footprint, not the grid. Room: half the width
    # plus twice the run-out of a step as deep as the sinkage, and RELAX_MARGIN_NODES nodes.
    slack = RELAX_MARGIN_NODES * max(soil_map.resolution)
    for lo, hi, w, sink in boxes:
        pad = 0.5 * w + 2.0 * max(sink, 0.0) / math.tan(soil_map.repose) + slack
        soil_map.relax(fixed=held, window=soil_map.window(lo - pad, hi + pad))


def simulate_on_soil(model: VehicleModel, soil_map: DeformableTerrain, q0: np.ndarray,
                     qdot0: np.ndarray, commands: np.ndarray, dt: float, *,
                     soil: str | Soil = "sandy_loam",
                     contact_params: Mapping[str, Any] | None = None,
                     segment: float = SEGMENT_RADII, margin: float | None = None,
                     imprint: bool = True, actuator: str | Mapping[str, str] = "ideal",
                     actuator_params: Mapping[str, Any] | None = None) -> SoftSoilRun:
    """Simulate ``model`` on ``soil_map``, pressing ruts as it drives (module docstring).

    Args:
        soil_map: deformable map, updated in place (also returned in the result).
        q0: (nq,) initial state; qdot0: (nv,) initial velocity; commands: (T, na) actuated
            joint rates per step; dt: step [s] (as :func:`simulate_dynamics`).
        soil: preset or :class:`~wmr_model.terrain.soil.Soil` of the ``bekker`` constants;
            contact_params: further ``bekker`` overrides (not ``zc``/``j0``: the map sets them).
        segment: commanded rim travel between map updates [wheel radii].
        margin: imprint margin behind the contact point [m]; default
            :data:`MARGIN_NODES` node spacings; must exceed one node spacing.
        imprint: False leaves the map untouched (virgin soil throughout; a control run).
        actuator, actuator_params: as :func:`simulate_dynamics`.
    """
    q0 = np.ascontiguousarray(q0, dtype=float)
    U = np.ascontiguousarray(commands, dtype=float)
    check_shape("commands", U.shape, (None, len(model.actuated_joints)))
    base, margin = _soil_settings(soil_map, soil, contact_params, segment, margin)
    wheel_cols = np.isin(model.actuated_joints, model.wheel_joints)
    w_max = float(np.abs(U[:, wheel_cols]).max()) if U.size and wheel_cols.any() else 0.0
    n = U.shape[0]
    nseg = max(1, round(segment / (w_max * dt))) if w_max > 0.0 else max(n, 1)
    travel = segment * float(model.wheel_radius.max())
    kw: dict[str, Any] = {"contact_model": "bekker", "contact_params": base,
                          "actuator": actuator, "actuator_params": actuator_params}
    mass0 = soil_map.soil_mass()
    nw = model.nw
    ter = soil_map.terrain()
    P, C, X, H = _contacts(model, ter, q0[None])
    Ps, Cs, Xs, Hs = [P], [C], [X], [H]
    S_in, ZC, J0, starts, segs = [], [], [], [], []
    zc, j0 = _state_ahead(model, soil_map, P[0], X[0], H[0], travel)
    end = P[0].copy()  # where each wheel's imprint ends
    pressed = np.zeros((nw, *soil_map.h.shape), dtype=bool)
    q, qd = q0, np.ascontiguousarray(qdot0, dtype=float)
    done = 0
    while done < n:
        m = min(nseg, n - done)
        mk = _wheel_options(model, zc, j0)
        seg = simulate_dynamics(mk, ter, q, qd, U[done:done + m], dt, **kw)
        P, C, X, H = _contacts(model, ter, seg.q[1:])
        params = contact_setup(mk, "bekker", base).params
        V = contact_kinematics(model, ter, seg.q[:-1], seg.qdot[1:])[0]
        Rw = model.wheel_radius * seg.qdot[1:, 6 + model.wheel_joints]
        s_in, beta = _segment_slip(params, V, Rw, seg.dz)
        if imprint:
            # contact points and sinkages of this segment's states and of the previous one
            Pw = np.concatenate([Ps[-1][-nseg:], P])
            Hw = np.concatenate([Hs[-1][-nseg:], H])
            start = end.copy()  # imprint ends before this segment
            _press_ruts(model, soil_map, params, s_in, beta, P, X, H, Pw, Hw, end, pressed,
                        margin)
            _relax_around_wheels(model, soil_map, P, X, H, start, end, travel)
            ter = soil_map.terrain()
        starts.append(done)
        ZC.append(zc)
        J0.append(j0)
        S_in.append(s_in)
        segs.append(seg)
        Ps.append(P)
        Cs.append(C)
        Xs.append(X)
        Hs.append(H)
        q, qd = seg.q[-1], seg.qdot[-1]
        done += m
        if done < n:
            P, C, X, H = _contacts(model, ter, q[None])  # contact on the updated map
            zc, j0 = _state_ahead(model, soil_map, P[0], X[0], H[0], travel)
    tr = concatenate_segments(segs, dt)
    return SoftSoilRun(tr, soil_map, ter, np.concatenate(Ps), np.concatenate(Cs),
                       np.concatenate(Xs), np.concatenate(Hs), np.concatenate(S_in),
                       np.array(ZC), np.array(J0), np.array(starts, dtype=np.int64), mass0,
                       soil_map.soil_mass(), np.asarray(model.wheel_radius, dtype=float),
                       tr.q[:, 7 + model.wheel_joints])


def wheel_rows(model: VehicleModel, tol: float = 1e-3) -> list[list[int]]:
    """Wheel indices grouped by body-frame x of their centres in the neutral state, front first.

    Wheels within ``tol`` [m] of each other in x form a row (rocky7: front, middle, rear).
    """
    Tw = forward_kinematics(model, create_data(model), model.neutral_state())
    x = Tw[model.wheel_frame, 0, 3]
    rows: list[list[int]] = []
    for k in np.argsort(-x, kind="stable"):
        if rows and abs(x[rows[-1][0]] - x[k]) <= tol:
            rows[-1].append(int(k))
        else:
            rows.append([int(k)])
    return rows


def drive_straight_on_soil(model: VehicleModel, soil: str | Soil = "sandy_loam", *,
                           speed: float = 0.1, duration: float = 7.0, dt: float = 0.01,
                           soil_map: DeformableTerrain | None = None, resolution: float = 0.01,
                           depth: float = 0.3, xi: float = 0.0, **kw: Any) -> SoftSoilRun:
    """Drive ``model`` straight along +x from the origin, every wheel at ``speed`` / R.

    Without ``soil_map``, a flat virgin map of ``soil`` (its density and angle of repose),
    ``depth`` [m] deep (the surface at z = depth), grid ``resolution`` [m], covering the path
    with a wheel radius and a wheel width of room around the vehicle. With ``soil_map``
    (e.g. a previous run's), the run starts from the same pose on that map: a second pass
    over the same strip. ``kw`` goes to :func:`simulate_on_soil`.
    """
    if not (speed > 0 and duration > 0):
        raise ParameterError(f"drive_straight_on_soil: speed and duration must be > 0, got "
                             f"{speed} m/s, {duration} s")
    s = get_soil(soil)
    if soil_map is None:
        Tw = forward_kinematics(model, create_data(model), model.neutral_state())
        xy = Tw[model.wheel_frame, :2, 3]
        pad = float(model.wheel_radius.max() + model.wheel_width.max()) + 2 * resolution
        x_rng = (float(xy[:, 0].min()) - pad, float(xy[:, 0].max()) + 1.5 * speed * duration
                 + pad)
        y_rng = (float(xy[:, 1].min()) - pad, float(xy[:, 1].max()) + pad)
        soil_map = DeformableTerrain.flat(x_rng, y_rng, resolution, s.rho, s.repose, xi,
                                          z=depth)
    q0, qd0 = start_state(model, soil_map.terrain(), 0.0, speed)
    U = np.tile(straight_wheel_rates(model, speed), (round(duration / dt), 1))
    return simulate_on_soil(model, soil_map, q0, qd0, U, dt, soil=s, **kw)
