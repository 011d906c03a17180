"""The nodes over real DDS (prints numbers, asserts nothing; needs rclpy and the built msg/srv).

1. Prediction service latency: ``~/predict`` of a prediction node process, called from this
   process, for 1, 100 and 1000 candidates x 50 steps (diffdrive, kinematic, covariance on):
   round-trip wall time (request serialization, prediction, response building, response
   serialization and transport) and the node's own ``compute_time``. Twice: with the
   per-element response fill the node had before (``fill_response_per_element`` below, patched
   in) and with the bulk fill of :func:`wmr_model.ros.prediction_node.fill_response`.
2. Odometry *node* CPU at 100 Hz and 1 kHz JointState (+ Imu at the same rate), published in
   real time for a few seconds: the node process's CPU time (user + system, /proc) per second
   of wall time. bench/bench_odometry.py measures the core :class:`Odometry3D` alone; this adds
   DDS, message conversion and publishing.

Run: ``.venv/bin/python bench/bench_nodes.py [seconds_per_rate]``; prints tables, then one
JSON line. Nodes run on a private ROS domain limited to this host (test/ros/harness.py).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "test" / "ros"))

from harness import acquire_domain_id, ros_environment  # noqa: E402

CANDIDATES = (1, 100, 1000)
STEPS, DT = 50, 0.1


def fill_response_per_element(model, inputs, pred, resp):
    """The response fill before the bulk builders (one constructor chain per pose/point)."""
    import array

    from geometry_msgs.msg import PoseStamped
    from nav_msgs.msg import Path as PathMsg
    from std_msgs.msg import Header
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

    from wmr_model.ros import conversions as cv

    def doubles(a):
        out = array.array("d")
        out.frombytes(np.ascontiguousarray(a, dtype=np.float64).tobytes())
        return out

    C, T1 = pred.q.shape[0], pred.q.shape[1]
    dt = inputs.dt
    header = Header(frame_id=inputs.frame_id, stamp=cv.seconds_to_stamp(inputs.stamp))
    stamps = [cv.seconds_to_stamp(inputs.stamp + t * dt) for t in range(T1)]
    durations = [cv.seconds_to_duration(t * dt) for t in range(T1)]
    paths, trajs = [], []
    names = list(model.joint_names)
    for c in range(C):
        q = pred.q[c]
        poses = []
        for t in range(T1):
            ps = PoseStamped()
            ps.header.frame_id = inputs.frame_id
            ps.header.stamp = stamps[t]
            ps.pose = cv.arrays_to_pose(q[t, 4:7], q[t, 0:4])
            poses.append(ps)
        paths.append(PathMsg(header=header, poses=poses))
        rates = pred.qdot[c, :, 6:]
        points = []
        for t in range(T1):
            pt = JointTrajectoryPoint()
            pt.positions = doubles(q[t, 7:])
            pt.velocities = doubles(rates[min(t, T1 - 2)])
            pt.time_from_start = durations[t]
            points.append(pt)
        trajs.append(JointTrajectory(header=header, joint_names=names, points=points))
    resp.paths = paths
    resp.joint_trajectories = trajs
    cov = pred.ros_covariance
    resp.pose_covariances = doubles(cov) if cov is not None else array.array("d")
    resp.flags = array.array("B", pred.flags.astype(np.uint8).tobytes())
    return resp


def serve(mode: str) -> int:
    """Run a prediction node (``mode``: ``baseline`` patches the per-element fill in)."""
    from wmr_model.ros import prediction_node

    if mode == "baseline":
        prediction_node.fill_response = fill_response_per_element
    return prediction_node.main([sys.argv[0], "--ros-args", "-p", "vehicle:=diffdrive",
                                 "-p", "max_candidates:=100000", "-p", "max_horizon:=1000.0",
                                 "-r", f"__ns:=/bench_{mode}"])


def _request(C: int):
    from wmr_model.srv import PredictTrajectory

    req = PredictTrajectory.Request()
    req.step_size = DT
    req.num_candidates = C
    req.num_steps = STEPS
    req.initial_pose.orientation.w = 1.0
    req.command_joint_names = ["left_wheel_joint", "right_wheel_joint"]
    req.joint_commands = np.random.default_rng(C).uniform(0, 5, C * STEPS * 2).tolist()
    return req


def _call(node, client, req, timeout=120.0):
    import rclpy

    fut = client.call_async(req)
    rclpy.spin_until_future_complete(node, fut, timeout_sec=timeout)
    if not fut.done():
        raise TimeoutError(f"no answer from {client.srv_name} in {timeout} s")
    return fut.result()


def bench_prediction(node, env, repeat: int = 5) -> list[dict]:
    from wmr_model.srv import PredictTrajectory

    rows = []
    for mode in ("baseline", "vectorized"):
        proc = subprocess.Popen([sys.executable, __file__, "--serve", mode], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            client = node.create_client(PredictTrajectory,
                                        f"/bench_{mode}/prediction_node/predict")
            if not client.wait_for_service(timeout_sec=60):
                raise RuntimeError(f"{mode} prediction node did not come up: "
                                   f"{proc.stderr.read().decode() if proc.poll() else ''}")
            for C in CANDIDATES:
                req = _request(C)
                _call(node, client, req)  # warm-up (numba dispatch, first allocation)
                wall, compute = [], []
                for _ in range(repeat if C < 1000 else max(2, repeat // 2)):
                    t0 = time.perf_counter()
                    resp = _call(node, client, req)
                    wall.append(time.perf_counter() - t0)
                    assert resp.success, resp.status_message
                    compute.append(resp.compute_time)
                rows.append({"fill": mode, "candidates": C, "steps": STEPS,
                             "roundtrip_ms_median": 1e3 * float(np.median(wall)),
                             "roundtrip_ms_min": 1e3 * float(np.min(wall)),
                             "node_compute_ms_median": 1e3 * float(np.median(compute))})
            node.destroy_client(client)
        finally:
            proc.send_signal(2)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    return rows


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def bench_odometry_node(node, env, rate: float, seconds: float) -> dict:
    import rclpy
    from nav_msgs.msg import Odometry
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import Imu, JointState

    from wmr_model.ros.conversions import seconds_to_stamp

    ns = f"/bench_odo_{int(rate)}"
    proc = subprocess.Popen([sys.executable, str(REPO / "scripts" / "odometry_node"),
                             "--ros-args", "-r", f"__ns:={ns}", "-p", "vehicle:=warthog",
                             "-p", "publish_tf:=false", "-p", "queue_size:=1000"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    qos = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
    js = node.create_publisher(JointState, f"{ns}/joint_states", qos)
    imu = node.create_publisher(Imu, f"{ns}/imu/data", qos)
    got = []
    sub = node.create_subscription(Odometry, f"{ns}/odom", got.append, qos)
    try:
        deadline = time.monotonic() + 60
        while js.get_subscription_count() < 1 or imu.get_subscription_count() < 1:
            if time.monotonic() > deadline:
                raise RuntimeError("odometry node did not subscribe in 60 s")
            rclpy.spin_once(node, timeout_sec=0.05)
        rclpy.spin_once(node, timeout_sec=1.0)
        n = int(seconds * rate)
        cpu0, t0 = _cpu_seconds(proc.pid), time.perf_counter()
        for k in range(n):
            t = k / rate
            m = JointState()
            m.header.stamp = seconds_to_stamp(100.0 + t)
            m.name = ["left_wheel_joint", "right_wheel_joint"]
            m.velocity = [3.0 + 0.5 * math.sin(0.3 * t), 3.0 + 0.5 * math.sin(0.4 * t)]
            g = Imu()
            g.header.stamp = seconds_to_stamp(100.0 + t - 0.5 / rate)
            g.angular_velocity.z = 0.2 * math.sin(0.5 * t)
            g.orientation_covariance[0] = -1.0
            imu.publish(g)
            js.publish(m)
            rclpy.spin_once(node, timeout_sec=0)
            wait = t0 + (k + 1) / rate - time.perf_counter()
            if wait > 0:
                time.sleep(wait)
        wall = time.perf_counter() - t0
        cpu = _cpu_seconds(proc.pid) - cpu0
        end = time.monotonic() + 2.0
        while time.monotonic() < end and len(got) < n - 1:
            rclpy.spin_once(node, timeout_sec=0.05)
        return {"encoder_rate_hz": rate, "imu_rate_hz": rate, "messages": n,
                "odometry_received": len(got), "wall_s": wall,
                "node_cpu_percent_of_one_core": 100.0 * cpu / wall}
    finally:
        node.destroy_subscription(sub)
        node.destroy_publisher(js)
        node.destroy_publisher(imu)
        proc.send_signal(2)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def main(seconds: float = 5.0) -> dict:
    domain, lock = acquire_domain_id()
    env = ros_environment(domain)
    for k in ("ROS_DOMAIN_ID", "RMW_IMPLEMENTATION", "ROS_AUTOMATIC_DISCOVERY_RANGE"):
        os.environ[k] = env[k]
    import rclpy

    rclpy.init()
    node = rclpy.create_node("wmr_bench_nodes")
    try:
        pred = bench_prediction(node, env)
        odo = [bench_odometry_node(node, env, r, seconds) for r in (100.0, 1000.0)]
    finally:
        node.destroy_node()
        rclpy.try_shutdown()
        lock.close()
    print("prediction service over DDS, diffdrive, kinematic + covariance, 50 steps")
    print(f"{'fill':>11} {'C':>6} {'round trip med ms':>18} {'min ms':>8} {'node ms':>8}")
    for r in pred:
        print(f"{r['fill']:>11} {r['candidates']:6d} {r['roundtrip_ms_median']:18.1f} "
              f"{r['roundtrip_ms_min']:8.1f} {r['node_compute_ms_median']:8.1f}")
    print("\nodometry node process (warthog, JointState + Imu in real time)")
    print(f"{'enc Hz':>7} {'msgs':>6} {'odom out':>9} {'CPU % core':>11}")
    for r in odo:
        print(f"{r['encoder_rate_hz']:7.0f} {r['messages']:6d} {r['odometry_received']:9d} "
              f"{r['node_cpu_percent_of_one_core']:11.1f}")
    out = {"prediction_service": pred, "odometry_node": odo}
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--serve":
        sys.exit(serve(sys.argv[2]))
    main(*(float(a) for a in sys.argv[1:2]))
