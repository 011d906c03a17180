"""Forward kinematics of the vehicle's frame tree (Seegmiller 2014, Alg. 1, §2.2.1).

The one algorithm the vehicles layer itself needs (composite inertias and the centre of gravity
at a state): world transforms of every frame from the state ``q``. The kinematics kernels build
on it; its arrays are those of :class:`~wmr_model.vehicles.model.KernelModel`.
"""

from __future__ import annotations

import math

from wmr_model._jit import njit
from wmr_model.spatial import quat_to_rot_into
from wmr_model.vehicles.model import REVOLUTE

__all__ = ["compose_column", "joint_motion", "forward_kinematics"]


@njit(refcount=False)
def compose_column(Ta, Tb, c):
    """Rows 0-2 of column ``c`` of ``Ta @ Tb`` for rigid 4x4 transforms, as a 3-tuple."""
    b0, b1, b2 = Tb[0, c], Tb[1, c], Tb[2, c]
    x = Ta[0, 0] * b0 + Ta[0, 1] * b1 + Ta[0, 2] * b2
    y = Ta[1, 0] * b0 + Ta[1, 1] * b1 + Ta[1, 2] * b2
    z = Ta[2, 0] * b0 + Ta[2, 1] * b1 + Ta[2, 2] * b2
    if c == 3:
        x += Ta[0, 3]
        y += Ta[1, 3]
        z += Ta[2, 3]
    return x, y, z


@njit(refcount=False)
def joint_motion(jtype, axis, i, theta):
    """Joint motion transform of frame ``i``: rotation by theta about the unit axis (Rodrigues)
    or translation along it. Rows 0-2 of the 4x4 transform as a 12-tuple, row-major."""
    x, y, z = axis[i, 0], axis[i, 1], axis[i, 2]
    if jtype == REVOLUTE:
        c, s = math.cos(theta), math.sin(theta)
        t = 1.0 - c
        return (c + t * x * x, t * x * y - s * z, t * x * z + s * y, 0.0,
                t * x * y + s * z, c + t * y * y, t * y * z - s * x, 0.0,
                t * x * z - s * y, t * y * z + s * x, c + t * z * z, 0.0)
    return (1.0, 0.0, 0.0, x * theta, 0.0, 1.0, 0.0, y * theta, 0.0, 0.0, 1.0, z * theta)


@njit(refcount=False)
def forward_kinematics(parent, jtype, axis, T0, q, T_world):
    """Homogeneous transforms of every frame to the world frame, Algorithm 1 / (2.11).

    ``T_world`` (nf, 4, 4) is written in place: ``T_world[0]`` from the body pose in ``q``;
    ``T_world[i] = T_world[parent[i]] @ T0[i] @ Joint(axis[i], q[6 + i])`` (T0 is the transform
    at zero displacement, precomputed in the model: Alg. 1 line 4). No allocation: ``T0 @ Joint``
    goes to ``T_world[i]``, which the parent's transform then multiplies in place, column by
    column.
    """
    nf = parent.shape[0]
    quat_to_rot_into(q, T_world[0])
    for r in range(3):
        T_world[0, r, 3] = q[4 + r]
        T_world[0, 3, r] = 0.0
    T_world[0, 3, 3] = 1.0
    for i in range(1, nf):
        J = joint_motion(jtype[i], axis, i, q[6 + i])
        for r in range(3):
            a0, a1, a2 = T0[i, r, 0], T0[i, r, 1], T0[i, r, 2]
            T_world[i, r, 0] = a0 * J[0] + a1 * J[4] + a2 * J[8]
            T_world[i, r, 1] = a0 * J[1] + a1 * J[5] + a2 * J[9]
            T_world[i, r, 2] = a0 * J[2] + a1 * J[6] + a2 * J[10]
            T_world[i, r, 3] = a0 * J[3] + a1 * J[7] + a2 * J[11] + T0[i, r, 3]
        Tp = T_world[parent[i]]
        Ti = T_world[i]
        for c in range(4):
            Ti[0, c], Ti[1, c], Ti[2, c] = compose_column(Tp, Ti, c)
        T_world[i, 3, 0] = 0.0
        T_world[i, 3, 1] = 0.0
        T_world[i, 3, 2] = 0.0
        T_world[i, 3, 3] = 1.0
