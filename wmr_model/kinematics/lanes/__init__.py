"""Float32 structure-of-arrays kernels for the planner's batch (issue 22, option (a)).

The same equations as the scalar float64 kernels of :mod:`wmr_model.kinematics`, evaluated for W
candidates at once: every per-candidate quantity is an array with the candidate ("lane") axis
last, so the innermost loop of each kernel runs over lanes and compiles to SIMD instructions.
The scalar kernels stay the reference: each lane kernel names the one it mirrors, and its tests
bound the difference.
"""

from __future__ import annotations

import numpy as np

__all__ = ["F32", "ZERO", "HALF", "ONE", "TWO", "THREE", "FOUR", "QUARTER", "INF"]

# The float32 constants of the lane kernels. In numba a float32 value combined with a Python
# float or int is promoted to float64 (and the loop then converts every lane twice), so the lane
# kernels write their constants as these (module globals are compile-time constants of their
# own type).
F32 = np.float32
ZERO = F32(0.0)
HALF = F32(0.5)
ONE = F32(1.0)
TWO = F32(2.0)
THREE = F32(3.0)
FOUR = F32(4.0)
QUARTER = F32(0.25)
INF = F32(np.inf)
