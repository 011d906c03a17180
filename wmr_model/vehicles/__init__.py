"""Vehicles: descriptions and the compiled, immutable model (Seegmiller 2014, §2.2.1).

The kinematic tree, belt tracks, spatial inertias, named parameters, parametric generators and
the planar reference models of §3.4.1.
"""
