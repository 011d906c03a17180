"""Compiling vehicle specs: index conventions and errors that name the place."""

import math

import numpy as np
import pytest

from wmr_model.errors import ModelError
from wmr_model.vehicles.generators import random_tree_spec, skid_steer_spec
from wmr_model.vehicles.model import (
    FrameSpec,
    JointConstraintSpec,
    SensorSpec,
    VehicleSpec,
    compile_vehicle,
)


def _spec(frames, **kw):
    return VehicleSpec(name="t", frames=frames, source="t.yaml", **kw)


def test_topological_order_and_indices():
    frames = [
        FrameSpec("w", "arm", wheel_radius=0.1),
        FrameSpec("arm", "body", axis=(0, 0, 1)),
    ]
    m = compile_vehicle(_spec(frames))
    assert m.frame_names == ("body", "arm", "w")
    assert list(m.parent) == [-1, 0, 1]
    assert m.nq == 9 and m.nv == 8 and m.nw == 1
    assert m.joint_index("w") == 1
    assert m.chain[0].tolist() == [False, True, True]


def test_random_trees_compile_with_parent_before_child():
    for seed in range(10):
        m = compile_vehicle(random_tree_spec(np.random.default_rng(seed)))
        assert all(m.parent[i] < i for i in range(1, m.nf))
        np.testing.assert_allclose(np.linalg.norm(m.axis[1:], axis=1), 1.0)
        assert m.A_joint.shape == (1, m.nv)


def test_model_is_immutable():
    m = compile_vehicle(skid_steer_spec())
    with pytest.raises(ValueError):
        m.T0[0, 0, 0] = 2.0
    with pytest.raises(AttributeError):
        m.name = "x"


@pytest.mark.parametrize(
    ("frames", "kw", "match"),
    [
        ([FrameSpec("a", "nope")], {}, r"t\.yaml: frame 'a': parent 'nope' is not defined"),
        ([FrameSpec("a", "b"), FrameSpec("b", "a")], {}, r"t\.yaml: frames \['a', 'b'\] form a cycle"),
        ([FrameSpec("a", "body", axis=(0, 0, 0))], {}, r"t\.yaml: frame 'a': axis must be nonzero"),
        ([FrameSpec("a", "body", xyz=(0, math.nan, 0))], {}, r"frame 'a': xyz must be finite"),
        ([FrameSpec("a", "body", wheel_radius=-0.1)], {}, r"frame 'a': wheel radius must be > 0 m, got -0.1"),
        ([FrameSpec("a", "body", axis=(1, 0, 0), wheel_radius=0.1)], {}, r"frame 'a': a wheel must spin about its own y axis"),
        ([FrameSpec("a", "body"), FrameSpec("a", "body")], {}, r"frame 'a' is defined twice"),
        ([FrameSpec("a", "body", joint_type="fixed")], {}, r"frame 'a': joint type must be revolute or prismatic"),
        ([FrameSpec("a", "body", lower=1, upper=0)], {}, r"frame 'a': joint limits must satisfy lower <= upper"),
        ([FrameSpec("a", "body")], {"joint_constraints": [JointConstraintSpec("c", {"zz": 1})]},
         r"joint constraint 'c': joint 'zz' is not a joint of this vehicle"),
        ([FrameSpec("a", "body")], {"sensors": [SensorSpec("imu", "nope")]},
         r"sensor 'imu': parent frame 'nope' is not defined"),
        ([FrameSpec("a", "body", inertia=[[1, 2, 0], [0, 1, 0], [0, 0, 1]])], {}, r"frame 'a': inertia must be symmetric"),
    ],
)
def test_compile_errors_name_file_frame_and_problem(frames, kw, match):
    with pytest.raises(ModelError, match=match):
        compile_vehicle(_spec(frames, **kw))


def test_unknown_frame_lookup_lists_frames():
    m = compile_vehicle(skid_steer_spec())
    with pytest.raises(ModelError, match=r"no frame named 'X'; frames are \['body', 'L0'"):
        m.frame_index("X")
