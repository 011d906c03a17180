"""The experiments of the thesis (§2.5) and of the seed papers, one function each.

Outside the core: nothing in kinematics, dynamics, calibration or prediction imports them.
"""
