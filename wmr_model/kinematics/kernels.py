"""Former home of the kinematics kernels, now split by pipeline stage.

# TEMPORARY: re-exports for dynamics/ until it imports the stage modules

The kernels live in :mod:`wmr_model.kinematics.wheel_collision` (2.8)-(2.9),
:mod:`~wmr_model.kinematics.track_collision`, :mod:`~wmr_model.kinematics.constraints`
(2.24)-(2.36), :mod:`~wmr_model.kinematics.solve` (2.37)-(2.38), :mod:`~wmr_model.kinematics
.integrate` (2.39) and :mod:`~wmr_model.kinematics.initialize` (2.27)-(2.32); forward
kinematics (Algorithm 1) in :mod:`wmr_model.vehicles.tree`. This module only re-exports the
names that modules outside ``wmr_model/kinematics`` (dynamics, the dynamic experiments and
their tests and benchmarks) still import from here.
"""

# TEMPORARY: re-exports for dynamics/ until it imports the stage modules
from wmr_model.kinematics.constraints import (
    holonomic_constraints,
    loop_closure_rows,
    project_loop_closures,
    track_point_jacobian,
    wheel_jacobian,
)
from wmr_model.kinematics.integrate import integrate_euler, state_derivative
from wmr_model.kinematics.solve import cholesky_factor, cholesky_solve
from wmr_model.kinematics.track_collision import _patch_height_error, contact_detection
from wmr_model.kinematics.wheel_collision import (
    CONTACT_FAN_HALF_SPAN,
    CONTACT_FAN_POINTS,
    CONTACT_WS_WIDTH,
    contact_workspace,
    wheel_contact,
)
from wmr_model.vehicles.tree import forward_kinematics

__all__ = [
    "CONTACT_FAN_HALF_SPAN",
    "CONTACT_FAN_POINTS",
    "CONTACT_WS_WIDTH",
    "_patch_height_error",
    "cholesky_factor",
    "cholesky_solve",
    "contact_detection",
    "contact_workspace",
    "forward_kinematics",
    "holonomic_constraints",
    "integrate_euler",
    "loop_closure_rows",
    "project_loop_closures",
    "state_derivative",
    "track_point_jacobian",
    "wheel_contact",
    "wheel_jacobian",
]
