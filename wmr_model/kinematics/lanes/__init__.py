"""Float32 structure-of-arrays kernels for the planner's batch (issue 22, option (a)).

The same equations as the scalar float64 kernels of :mod:`wmr_model.kinematics`, evaluated for W
candidates at once: every per-candidate quantity is an array with the candidate ("lane") axis
last, so the innermost loop of each kernel runs over lanes and compiles to SIMD instructions.
The scalar kernels stay the reference: each lane kernel names the one it mirrors, and its tests
bound the difference.
"""
