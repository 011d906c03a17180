"""Parametric vehicle generators for tests, benchmarks and quick experiments.

Like Featherstone's ``autoTree``: small functions that build
:class:`~wmr_model.vehicles.model.VehicleSpec` objects from a few dimensions, including random trees
with arbitrary joint axes, prismatic joints and holonomic constraints, so algorithms can be checked
against each other on vehicles nobody wrote by hand.
"""

from __future__ import annotations

import numpy as np

from wmr_model.vehicles.model import FrameSpec, JointConstraintSpec, VehicleSpec

__all__ = ["skid_steer_spec", "diff_drive_caster_spec", "random_tree_spec"]


def _cylinder_inertia(mass: float, radius: float, width: float) -> np.ndarray:
    """Inertia of a solid cylinder spinning about its y axis, about its centre."""
    ia = 0.5 * mass * radius**2
    it = mass * (3 * radius**2 + width**2) / 12.0
    return np.diag([it, ia, it])


def _box_inertia(mass: float, lx: float, ly: float, lz: float) -> np.ndarray:
    return mass / 12.0 * np.diag([ly**2 + lz**2, lx**2 + lz**2, lx**2 + ly**2])


def skid_steer_spec(n_axles: int = 2, wheelbase: float = 0.8, track: float = 1.0,
                    radius: float = 0.1, mass: float = 20.0, wheel_mass: float = 1.0,
                    name: str = "skid") -> VehicleSpec:
    """Rigid skid-steer vehicle: ``n_axles`` axles evenly over ``wheelbase``, all wheels driven.

    Wheels ``L0, R0`` (front) ... spin about y at ``(x_i, +-track/2, 0)``; body frame at the
    geometric centre of the wheel centres.
    """
    xs = np.linspace(wheelbase / 2, -wheelbase / 2, n_axles) if n_axles > 1 else np.zeros(1)
    frames = []
    for i, x in enumerate(xs):
        for side, y in (("L", track / 2), ("R", -track / 2)):
            frames.append(FrameSpec(
                name=f"{side}{i}", parent="body", joint_type="revolute", axis=(0, 1, 0),
                xyz=(float(x), y, 0.0), actuated=True, mass=wheel_mass,
                inertia=_cylinder_inertia(wheel_mass, radius, 0.1), wheel_radius=radius,
                wheel_width=0.1))
    return VehicleSpec(name=name, frames=frames, body_mass=mass,
                       body_inertia=_box_inertia(mass, wheelbase, track, 0.3))


def diff_drive_caster_spec(track: float = 0.5, radius: float = 0.1, caster_x: float = -0.4,
                           caster_trail: float = 0.05, caster_radius: float = 0.05,
                           mass: float = 15.0, name: str = "diffdrive") -> VehicleSpec:
    """Differential drive: two driven wheels on the y axis, one passive swivel caster.

    The caster is a passive revolute joint about z at ``(caster_x, 0, 0)`` carrying a passive
    wheel ``caster_trail`` behind it, so the drive wheels alone determine the motion
    (v = R(wl + wr)/2, w = R(wr - wl)/track, the closed form of (3.64)-(3.65)). Its wheel centre
    is lowered so all three wheels touch flat ground with a level body.
    """
    dz = radius - caster_radius
    frames = [
        FrameSpec("left", "body", "revolute", (0, 1, 0), (0, track / 2, 0), actuated=True,
                  mass=1.0, inertia=_cylinder_inertia(1.0, radius, 0.05), wheel_radius=radius),
        FrameSpec("right", "body", "revolute", (0, 1, 0), (0, -track / 2, 0), actuated=True,
                  mass=1.0, inertia=_cylinder_inertia(1.0, radius, 0.05), wheel_radius=radius),
        FrameSpec("caster_swivel", "body", "revolute", (0, 0, 1), (caster_x, 0, 0),
                  actuated=False, mass=0.1, inertia=np.eye(3) * 1e-4),
        FrameSpec("caster_wheel", "caster_swivel", "revolute", (0, 1, 0),
                  (-caster_trail, 0, -dz), actuated=False, mass=0.2,
                  inertia=_cylinder_inertia(0.2, caster_radius, 0.03),
                  wheel_radius=caster_radius),
    ]
    return VehicleSpec(name=name, frames=frames, body_mass=mass,
                       body_inertia=_box_inertia(mass, 0.6, track, 0.2))


def _random_unit(rng: np.random.Generator) -> np.ndarray:
    v = rng.normal(size=3)
    return v / np.linalg.norm(v)


def random_tree_spec(rng: np.random.Generator, n_links: int = 4, n_wheels: int = 4,
                     prismatic_fraction: float = 0.3, with_constraint: bool = True,
                     name: str = "random") -> VehicleSpec:
    """Random articulated vehicle for cross-checking algorithms.

    ``n_links`` intermediate frames (revolute or prismatic about random unit axes, random offsets
    and orientations) form a random tree under the body; ``n_wheels`` wheels hang below random
    frames of it, spinning about their own y axis. Masses, centres of mass and inertias are
    random but physical. With ``with_constraint`` a random linear holonomic constraint couples
    two link joints (like Rocky 7's differential, 2.25).
    """
    frames: list[FrameSpec] = []
    names = ["body"]
    for i in range(n_links):
        parent = names[int(rng.integers(0, len(names)))]
        jt = "prismatic" if rng.random() < prismatic_fraction else "revolute"
        A = rng.normal(size=(3, 3))
        m = float(rng.uniform(0.5, 3.0))
        frames.append(FrameSpec(
            name=f"link{i}", parent=parent, joint_type=jt, axis=tuple(_random_unit(rng)),
            xyz=tuple(rng.uniform(-0.4, 0.4, 3)), rpy=tuple(rng.uniform(-0.5, 0.5, 3)),
            actuated=bool(rng.random() < 0.3), mass=m, com=tuple(rng.uniform(-0.1, 0.1, 3)),
            inertia=0.05 * (A @ A.T + np.eye(3))))
        names.append(f"link{i}")
    for k in range(n_wheels):
        parent = names[int(rng.integers(0, len(names)))]
        r = float(rng.uniform(0.08, 0.3))
        frames.append(FrameSpec(
            name=f"wheel{k}", parent=parent, joint_type="revolute", axis=(0, 1, 0),
            xyz=(float(rng.uniform(-0.6, 0.6)), float(rng.uniform(-0.5, 0.5)),
                 float(rng.uniform(-0.4, -0.1))),
            rpy=(float(rng.uniform(-0.2, 0.2)), 0.0, float(rng.uniform(-0.5, 0.5))),
            actuated=True, mass=1.0, inertia=_cylinder_inertia(1.0, r, 0.1), wheel_radius=r))
    constraints = []
    links = [f.name for f in frames if f.name.startswith("link")]
    if with_constraint and len(links) >= 2:
        a, b = rng.choice(len(links), size=2, replace=False)
        constraints.append(JointConstraintSpec(
            "coupling", {links[a]: float(rng.uniform(0.5, 1.5)), links[b]: 1.0}, 0.0))
    return VehicleSpec(name=name, frames=frames, body_mass=float(rng.uniform(5, 20)),
                       body_com=tuple(rng.uniform(-0.1, 0.1, 3)),
                       body_inertia=np.diag(rng.uniform(0.5, 2.0, 3)),
                       joint_constraints=constraints)
