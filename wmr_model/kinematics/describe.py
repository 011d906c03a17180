"""A compiled vehicle described through its kinematics: constraint Jacobian, free DOF, summary.

These read the model with the kinematic kernels, so they live here rather than on
:class:`~wmr_model.vehicles.model.VehicleModel` (the vehicles layer does not import kinematics).
"""

from __future__ import annotations

import numpy as np

from wmr_model.kinematics.constraints import holonomic_constraints
from wmr_model.vehicles.model import (
    FREE,
    LOOP_DISTANCE,
    LOOP_TYPES,
    PRISMATIC,
    REVOLUTE,
    VehicleModel,
)
from wmr_model.vehicles.tree import forward_kinematics

__all__ = ["holonomic_jacobian", "independent_dof", "describe"]


def holonomic_jacobian(model: VehicleModel,
                       q: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Holonomic constraint residual c (nhc,) and Jacobian dc/dqdot' (nhc, nv) at ``q``.

    Joint constraint rows (2.25) first, then loop-closure rows; ``q`` (nq,) defaults to the
    neutral state. See :func:`.constraints.holonomic_constraints`.
    """
    q = model.neutral_state() if q is None else np.ascontiguousarray(q, dtype=float)
    T_world = np.empty((model.nf, 4, 4))
    forward_kinematics(model.parent, model.joint_type, model.axis, model.T0, q, T_world)
    c = np.empty(model.nhc)
    J = np.empty((model.nhc, model.nv))
    holonomic_constraints(model.parent, model.joint_type, model.axis, model.A_joint,
                          model.joint_offset, model.loop_closure, q, T_world, c, J)
    return c, J


def independent_dof(model: VehicleModel, q: np.ndarray | None = None, *,
                    joint_constraints: bool = False) -> int:
    """Independent degrees of freedom nv - rank(dc/dqdot') at ``q`` (default neutral).

    Counts the loop closures' rows; with ``joint_constraints`` the linear joint constraints
    too (those are compliant spring-dampers in the dynamics, rigid in the kinematics).
    Redundant rows (e.g. the out-of-plane row of a planar four-bar's point closure) do not
    reduce the count. Rank by SVD with relative tolerance 1e-9.
    """
    _, J = holonomic_jacobian(model, q)
    if not joint_constraints:
        J = J[model.ncj:]
    if J.shape[0] == 0:
        return model.nv
    s = np.linalg.svd(J, compute_uv=False)
    rank = int(np.sum(s > 1e-9 * max(float(s[0]), 1e-300)))
    return model.nv - rank


def describe(model: VehicleModel) -> str:
    """Human-readable tree, wheels, actuated joints and constraints (for ``wmr check``)."""
    kind = {FREE: "6-DOF", REVOLUTE: "revolute", PRISMATIC: "prismatic"}
    lines = [f"vehicle {model.name} ({model.source})",
             f"  frames {model.nf}, joints {model.nj}, wheels {model.nw}, "
             f"joint constraints {model.ncj}, total mass {model.total_mass:.3f} kg",
             "  tree:"]
    children: dict[int, list[int]] = {i: [] for i in range(model.nf)}
    for i in range(1, model.nf):
        children[int(model.parent[i])].append(i)
    wheel_set = {int(w): k for k, w in enumerate(model.wheel_frame)}

    stack = [(0, 0)]  # depth first, children in order; no recursion (deep chains)
    while stack:
        i, depth = stack.pop()
        tag = kind[int(model.joint_type[i])]
        extra = ""
        if i > 0:
            ax = model.axis[i]
            extra = f" axis [{ax[0]:+.3f} {ax[1]:+.3f} {ax[2]:+.3f}]"
            extra += " actuated" if model.actuated[i] else " passive"
        if i in wheel_set:
            extra += f" WHEEL r={model.wheel_radius[wheel_set[i]]:.4f} m"
        lines.append(f"    {'  ' * depth}{model.frame_names[i]} [{tag}]{extra}")
        stack.extend((c, depth + 1) for c in reversed(children[i]))
    act = ", ".join(model.joint_names[k] for k in model.actuated_joints)
    lines.append("  actuated joints: " + act)
    for r, (n, row, b) in enumerate(zip(model.joint_constraint_names, model.A_joint,
                                        model.joint_offset)):
        terms = " + ".join(
            f"{row[6 + k]:g}*{model.joint_names[k]}" for k in np.flatnonzero(row[6:]))
        spring = ""
        if model.joint_stiffness.size and not np.isnan(model.joint_stiffness[r]):
            spring = (f" (spring {model.joint_stiffness[r]:g}, damper "
                      f"{model.joint_damping[r]:g}, preload {model.joint_preload[r]:g})")
        lines.append(f"  constraint {n}: {terms} = {b:g}{spring}")
    kinds = {v: k for k, v in LOOP_TYPES.items()}
    for n, row in zip(model.loop_closure_names, model.loop_closure):
        a, b = model.frame_names[int(row[1])], model.frame_names[int(row[2])]
        extra = f", length {row[15]:.4f} m" if int(row[0]) == LOOP_DISTANCE else ""
        lines.append(f"  loop closure {n}: {kinds[int(row[0])]} {a} - {b}{extra}")
    if model.nlc:
        c, _ = holonomic_jacobian(model)
        lines.append(
            f"  independent DOF: {independent_dof(model)} of nv = {model.nv} (loop closures), "
            f"{independent_dof(model, joint_constraints=True)} with the joint constraints; "
            f"loop residual at zero joints {np.abs(c[model.ncj:]).max():.2e}")
    for s, (fi, _) in model.sensor_frame.items():
        lines.append(f"  sensor {s} on {model.frame_names[fi]}")
    for t, tn in enumerate(model.track_names):
        sel = np.flatnonzero(model.track_of == t)
        fr = model.frame_names[int(model.track_frame[sel[0]])]
        dr = model.frame_names[int(model.track_drive[sel[0]])]
        lines.append(f"  track {tn} on {fr}, driven by {dr}, {sel.size} contact patches")
    return "\n".join(lines)
