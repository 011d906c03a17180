"""The prediction node as a real process: its answers equal :func:`wmr_model.predict.predict`.

Valid JOINT_RATES and BODY_TWIST requests are compared field by field with the core API run in
the test process on the same inputs (DYNAMIC ones with
:func:`wmr_model.dynamics.simulate.simulate_dynamics` per candidate); invalid requests get ``success = false`` with a clear
status and the node keeps serving; ``use_latest_odometry`` starts from the odom topic.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
SCRIPT = HERE.parents[1] / "scripts" / "prediction_node"

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def server(ros):
    from wmr_model.srv import PredictTrajectory

    ros.start(SCRIPT, "--ros-args", "-r", "__ns:=/pred", "-p", "vehicle:=diffdrive",
              "-p", "publish_path:=true", "-p", "publish_markers:=true",
              "-p", "max_horizon:=20.0", "-p", "slip.p2:=-0.1", name="prediction_node")
    ros.wait_for(services=["/pred/prediction_node/predict"], timeout=60)
    client = ros.node.create_client(PredictTrajectory, "/pred/prediction_node/predict")
    return client


def _request(C=3, T=20, dt=0.05, fidelity=0):
    from wmr_model.srv import PredictTrajectory

    req = PredictTrajectory.Request()
    req.header.frame_id = "odom"
    req.header.stamp.sec = 7
    req.fidelity = fidelity
    req.step_size = dt
    req.initial_pose.position.x = 1.0
    req.initial_pose.position.y = 2.0
    req.initial_pose.position.z = 0.1
    req.initial_pose.orientation.z = math.sin(0.2)
    req.initial_pose.orientation.w = math.cos(0.2)
    req.joint_names = ["caster_swivel_joint"]
    req.joint_positions = [0.1]
    req.command_type = PredictTrajectory.Request.JOINT_RATES
    req.num_candidates = C
    req.num_steps = T
    req.command_joint_names = ["right_wheel_joint", "left_wheel_joint"]  # not model order
    rng = np.random.default_rng(2)
    req.joint_commands = rng.uniform(0.0, 5.0, C * T * 2).tolist()
    return req


def _core(req, commands):
    from wmr_model.odometry import DEFAULT_QPRIME_U
    from wmr_model.predict import predict
    from wmr_model.terrain import flat
    from wmr_model.uncertainty import qprime_from_parameters
    from wmr_model.vehicles import load_vehicle

    m = load_vehicle("diffdrive")
    q0 = m.neutral_state()
    q0[0:4] = [math.cos(0.2), 0, 0, math.sin(0.2)]
    q0[4:7] = [1.0, 2.0, 0.1]
    q0[7 + m.joint_index("caster_swivel_joint")] = 0.1
    fid = "kinematic" if req.fidelity == 0 else "enhanced"
    return m, predict(m, flat(), q0, commands, req.step_size, fidelity=fid,
                      slip_params={"slip.p2": -0.1}, Qprime=qprime_from_parameters(
                          DEFAULT_QPRIME_U))


def _check_equal(resp, pred, m, req):
    C, T1 = pred.q.shape[:2]
    assert resp.success, resp.status_message
    assert len(resp.paths) == C and len(resp.joint_trajectories) == C
    for c in range(C):
        path = resp.paths[c]
        assert path.header.frame_id == "odom" and len(path.poses) == T1
        got = np.array([[p.pose.orientation.w, p.pose.orientation.x, p.pose.orientation.y,
                         p.pose.orientation.z, p.pose.position.x, p.pose.position.y,
                         p.pose.position.z] for p in path.poses])
        np.testing.assert_allclose(got, pred.q[c, :, :7], atol=1e-12)
        st = path.poses[-1].header.stamp
        assert st.sec + 1e-9 * st.nanosec == pytest.approx(7 + (T1 - 1) * req.step_size)
        traj = resp.joint_trajectories[c]
        assert traj.joint_names == list(m.joint_names)
        np.testing.assert_allclose([p.positions for p in traj.points], pred.q[c, :, 7:],
                                   atol=1e-12)
        np.testing.assert_allclose([p.velocities for p in traj.points[:-1]],
                                   pred.qdot[c, :, 6:], atol=1e-12)
    np.testing.assert_allclose(np.array(resp.pose_covariances), pred.ros_covariance.ravel(),
                               atol=1e-15)
    assert list(resp.flags) == pred.flags.ravel().tolist()
    assert resp.compute_time > 0


@pytest.mark.parametrize("fidelity", [0, 1])
def test_joint_rate_requests_equal_the_core(ros, server, fidelity):
    from nav_msgs.msg import Path as PathMsg
    from visualization_msgs.msg import MarkerArray

    req = _request(fidelity=fidelity)
    C, T = req.num_candidates, req.num_steps
    u = np.array(req.joint_commands).reshape(C, T, 2)[:, :, ::-1]  # -> model order (L, R)
    m, pred = _core(req, np.ascontiguousarray(u))
    future_path = []
    future_markers = []
    ros.node.create_subscription(PathMsg, "/pred/prediction_node/path", future_path.append, 1)
    ros.node.create_subscription(MarkerArray, "/pred/prediction_node/covariance_markers",
                                 future_markers.append, 1)
    time.sleep(0.3)
    resp = ros.call(server, req)
    _check_equal(resp, pred, m, req)
    assert resp.status_message.startswith("ok: 3 candidates x 20 steps")
    deadline = time.monotonic() + 10
    while not (future_path and future_markers) and time.monotonic() < deadline:
        ros.spin_once(0.05)
    assert future_path and len(future_path[-1].poses) == T + 1
    kinds = {mk.ns for mk in future_markers[-1].markers}
    assert {"candidates", "covariance"} <= kinds


def test_body_twist_request_equals_the_core(ros, server):
    from geometry_msgs.msg import Twist

    from wmr_model.predict import twist_commands
    from wmr_model.srv import PredictTrajectory

    req = _request(C=2, T=30, dt=0.1)
    req.command_type = PredictTrajectory.Request.BODY_TWIST
    req.command_joint_names = []
    req.joint_commands = []
    segs = [[(0.5, 0.0), (0.5, 0.4)], [(0.3, -0.2), (0.0, 0.5)]]
    req.twist_durations = [1.0, 0.5]
    for cand in segs:
        for vx, wz in cand:
            tw = Twist()
            tw.linear.x, tw.angular.z = vx, wz
            req.twist_commands.append(tw)
    resp = ros.call(server, req)
    from wmr_model.vehicles import load_vehicle

    m = load_vehicle("diffdrive")
    q = m.neutral_state()
    q[7 + m.joint_index("caster_swivel_joint")] = 0.1
    seg = np.array([[(vx, wz, d) for (vx, wz), d in zip(c, (1.0, 2.0))] for c in segs])
    rates = twist_commands(m, seg, 0.1, q=q)
    assert rates.shape[1] == 30
    _, pred = _core(req, rates)
    _check_equal(resp, pred, m, req)


def test_invalid_requests_are_refused_and_the_node_keeps_serving(ros, server):
    from wmr_model.srv import PredictTrajectory

    Req = PredictTrajectory.Request
    cases = []
    r = _request()
    r.command_joint_names = ["left_wheel_joint", "arm_joint"]
    cases.append((r, r"unknown joint 'arm_joint'"))
    r = _request()
    r.command_joint_names = ["left_wheel_joint"]
    r.joint_commands = [1.0] * (3 * 20)
    cases.append((r, r"actuated joints \['right_wheel_joint'\] are not commanded"))
    r = _request()
    r.joint_commands = r.joint_commands[:-1]
    cases.append((r, r"expected num_candidates \* num_steps \* len\(command_joint_names\) = "
                     r"3 \* 20 \* 2 = 120 values, got 119"))
    r = _request()
    r.joint_commands[5] = math.nan
    cases.append((r, r"joint_commands: must be finite; element 5 is nan"))
    r = _request()
    r.initial_pose.position.x = math.inf
    cases.append((r, r"initial_pose.position: must be finite"))
    r = _request(T=1000, dt=0.05)
    r.joint_commands = [1.0] * (3 * 1000 * 2)
    cases.append((r, r"horizon num_steps \* step_size = 50 s exceeds max_horizon 20 s"))
    r = _request()
    r.joint_names = ["ghost"]
    cases.append((r, r"joint_names: unknown joint 'ghost'"))
    r = _request()
    r.joint_positions = [0.1, 0.2]
    cases.append((r, r"joint_positions: 2 values for 1 joint_names"))
    r = _request()
    r.step_size = -0.1
    cases.append((r, r"step_size: must be a finite number > 0 s"))
    r = _request(C=33, T=2, fidelity=Req.DYNAMIC)
    cases.append((r, r"num_candidates: 33 exceeds max_dynamic_candidates 32 for fidelity "
                     r"DYNAMIC"))
    r = _request()
    r.fidelity = 7
    cases.append((r, r"fidelity: must be KINEMATIC \(0\), ENHANCED \(1\) or DYNAMIC \(2\)"))
    r = _request()
    r.num_candidates = 0
    cases.append((r, r"num_candidates and num_steps must be >= 1"))
    r = _request()
    r.command_type = Req.BODY_TWIST
    r.twist_durations = [1.0]
    cases.append((r, r"twist_commands: expected num_candidates \* len\(twist_durations\) = "
                     r"3 \* 1 = 3, got 0"))
    r = _request()
    r.use_latest_odometry = True
    cases.append((r, r"use_latest_odometry: no odometry received yet"))
    import re

    for req, pattern in cases:
        resp = ros.call(server, req)
        assert not resp.success
        assert re.search(pattern, resp.status_message), resp.status_message
        assert not resp.paths and not resp.pose_covariances and not resp.flags
    ros.check_alive()
    assert ros.call(server, _request()).success


def test_use_latest_odometry(ros, server):
    from nav_msgs.msg import Odometry

    pub = ros.node.create_publisher(Odometry, "/pred/odom", 10)
    odom = Odometry()
    odom.header.frame_id = "odom"
    odom.header.stamp.sec = 42
    odom.pose.pose.position.x = 3.0
    odom.pose.pose.position.z = 0.1
    odom.pose.pose.orientation.w = 1.0
    deadline = time.monotonic() + 10
    while pub.get_subscription_count() < 1:
        assert time.monotonic() < deadline
        ros.spin_once(0.05)
    req = _request()
    req.use_latest_odometry = True
    resp = None
    while time.monotonic() < deadline:
        pub.publish(odom)
        ros.spin_once(0.1)
        resp = ros.call(server, req)
        if resp.success:
            break
    assert resp is not None and resp.success, resp.status_message
    first = resp.paths[0].poses[0]
    assert first.pose.position.x == 3.0 and first.header.stamp.sec == 42


def _dynamic_core(req, commands):
    """simulate_dynamics per candidate on the inputs of ``_request`` (diffdrive, flat)."""
    from wmr_model.dynamics.simulate import simulate_dynamics
    from wmr_model.terrain import flat
    from wmr_model.vehicles import load_vehicle

    m = load_vehicle("diffdrive")
    q0 = m.neutral_state()
    q0[0:4] = [math.cos(0.2), 0, 0, math.sin(0.2)]
    q0[4:7] = [1.0, 2.0, 0.1]
    q0[7 + m.joint_index("caster_swivel_joint")] = 0.1
    tw = req.initial_twist
    qdot0 = np.zeros(m.nv)
    qdot0[0:6] = [tw.angular.x, tw.angular.y, tw.angular.z, tw.linear.x, tw.linear.y,
                  tw.linear.z]
    for n, v in zip(req.joint_names, req.joint_rates):
        qdot0[6 + m.joint_index(n)] = v
    return m, [simulate_dynamics(m, flat(), q0, qdot0, commands[c], req.step_size,
                                 actuator="ideal") for c in range(commands.shape[0])]


def _check_dynamic(resp, trajs, m, req):
    C, T1 = len(trajs), trajs[0].q.shape[0]
    assert resp.success, resp.status_message
    assert "dynamic" in resp.status_message and "zeros" in resp.status_message
    assert len(resp.paths) == C and len(resp.joint_trajectories) == C
    for c, tr in enumerate(trajs):
        got = np.array([[p.pose.orientation.w, p.pose.orientation.x, p.pose.orientation.y,
                         p.pose.orientation.z, p.pose.position.x, p.pose.position.y,
                         p.pose.position.z] for p in resp.paths[c].poses])
        np.testing.assert_allclose(got, tr.q[:, :7], atol=1e-9)
        pts = resp.joint_trajectories[c].points
        assert len(pts) == T1
        np.testing.assert_allclose([p.positions for p in pts], tr.q[:, 7:], atol=1e-9)
        np.testing.assert_allclose([p.velocities for p in pts], tr.qdot[:, 6:], atol=1e-9)
    # no propagated covariance for DYNAMIC: zeros of the documented size
    assert len(resp.pose_covariances) == C * T1 * 36
    assert not np.any(np.array(resp.pose_covariances))
    flags = np.array(resp.flags).reshape(C, T1)
    # TIPOVER_RISK (1, margin with the inertial load), TRACTION_LIMIT, WHEEL_LIFTOFF and
    # JOINT_LIMIT (8, a passive joint at its stop) are the DYNAMIC flags
    assert not np.any(flags & ~np.uint8(1 | 2 | 4 | 8))
    return flags


def test_dynamic_requests_equal_simulate_dynamics(ros, server):
    from geometry_msgs.msg import Twist

    from wmr_model.predict import twist_commands
    from wmr_model.srv import PredictTrajectory

    Req = PredictTrajectory.Request
    req = _request(C=3, T=15, dt=0.05, fidelity=Req.DYNAMIC)
    req.initial_twist.linear.x = 0.2
    req.initial_twist.angular.z = 0.1
    req.joint_rates = [0.05]
    C, T = req.num_candidates, req.num_steps
    u = np.array(req.joint_commands).reshape(C, T, 2)[:, :, ::-1]  # -> model order (L, R)
    u[2] = 60.0  # a wheel-spinning step from 0.2 m/s: far beyond the friction limit
    req.joint_commands = u[:, :, ::-1].ravel().tolist()
    m, trajs = _dynamic_core(req, np.ascontiguousarray(u))
    resp = ros.call(server, req, timeout=120.0)
    flags = _check_dynamic(resp, trajs, m, req)
    assert resp.status_message.startswith("ok: 3 candidates x 15 steps, dynamic")
    assert np.any(flags[2] & 2), flags  # TRACTION_LIMIT while the wheels spin

    # BODY_TWIST candidates go through the same twist -> joint-rate conversion as kinematics
    req = _request(C=2, T=12, dt=0.05, fidelity=Req.DYNAMIC)
    req.command_type = Req.BODY_TWIST
    req.command_joint_names = []
    req.joint_commands = []
    req.twist_durations = [0.3]
    for vx, wz in [(0.4, 0.0), (0.3, 0.5)]:
        tw = Twist()
        tw.linear.x, tw.angular.z = vx, wz
        req.twist_commands.append(tw)
    q = m.neutral_state()
    q[7 + m.joint_index("caster_swivel_joint")] = 0.1
    rates = twist_commands(m, np.array([[(0.4, 0.0, 0.6)], [(0.3, 0.5, 0.6)]]), 0.05, q=q)
    _, trajs = _dynamic_core(req, rates[:, :12])
    resp = ros.call(server, req, timeout=120.0)
    _check_dynamic(resp, trajs, m, req)

    # 5 cm above the ground: every wheel is off the ground at the first point
    req = _request(C=1, T=4, dt=0.05, fidelity=Req.DYNAMIC)
    req.initial_pose.position.z = 0.15
    resp = ros.call(server, req, timeout=120.0)
    assert resp.success, resp.status_message
    assert resp.flags[0] & 4


def test_too_many_dynamic_candidates_are_refused(ros, server):
    from wmr_model.srv import PredictTrajectory

    Req = PredictTrajectory.Request
    resp = ros.call(server, _request(C=33, T=2, fidelity=Req.DYNAMIC))
    assert not resp.success
    assert resp.status_message.startswith("num_candidates: 33 exceeds max_dynamic_candidates 32")
    assert not resp.paths and not resp.pose_covariances and not resp.flags
    ros.check_alive()
    # the kinematic cap is separate, and the node keeps serving both fidelities
    assert ros.call(server, _request(C=33, T=2)).success
    resp = ros.call(server, _request(C=32, T=2, fidelity=Req.DYNAMIC), timeout=120.0)
    assert resp.success, resp.status_message
    assert len(resp.paths) == 32
