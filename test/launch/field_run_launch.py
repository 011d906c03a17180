"""launch_testing description of the field-run test (run by test/ros/test_field_run.py).

As a user runs it: ``bringup.launch.py vehicle:=warthog use_sim_time:=true
use_calibration:=true`` with only the shipped configuration, and ``wmr play BAG --rate R``
(the venv's ``ros2 bag play --clock``) playing a ``wmr synth`` Warthog run into it. The active
tests record what the nodes publish while the bag plays and write it, with the checks'
numbers, to ``$WMR_FIELD_RUN_OUT/results.json``; the pytest wrapper prints that file.

Environment: WMR_FIELD_RUN_BAG (bag folder), WMR_FIELD_RUN_RATE (playback rate),
WMR_FIELD_RUN_OUT (output folder).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import threading
import time
import unittest
from pathlib import Path

import launch
import launch_testing.actions
import launch_testing.asserts
import numpy as np
import rclpy
import yaml
from ament_index_python.packages import get_package_share_directory
from launch.actions import ExecuteProcess, IncludeLaunchDescription
from launch.launch_description_sources import PythonLaunchDescriptionSource

BAG = Path(os.environ["WMR_FIELD_RUN_BAG"])
RATE = float(os.environ.get("WMR_FIELD_RUN_RATE", "1"))
OUT = Path(os.environ["WMR_FIELD_RUN_OUT"])
BIN = Path(sys.executable).parent
META = yaml.safe_load((BAG / "wmr_synth.yaml").read_text())
DURATION = float(META["config"]["duration"])
TRUTH: dict[str, float] = {k: float(v) for k, v in META["truth"].items()}
NODES = ("odometry_node", "prediction_node", "calibrator_node")
#: A topic the recorder subscribes to once the nodes' publishers it records have matched its
#: subscriptions; the player waits for that subscriber. (Waiting for the recorder's /odom
#: subscription in the graph was not enough: on CI at 4x, /odom, /tf and the first two
#: calibration states were published for 1.2 s before the nodes matched the recorder.)
READY_TOPIC = "/field_run_recorder/ready"
RESULTS: dict = {"rate": RATE, "bag_duration": DURATION}


def generate_test_description():
    share = Path(get_package_share_directory("wmr_model"))
    bringup = IncludeLaunchDescription(
        PythonLaunchDescriptionSource(str(share / "launch" / "bringup.launch.py")),
        launch_arguments={"vehicle": "warthog", "use_sim_time": "true",
                          "use_calibration": "true"}.items())
    # The player starts once odometry, calibrator and the test's recorder listen.
    player = ExecuteProcess(
        cmd=[str(BIN / "wmr"), "play", str(BAG), "--rate", str(RATE),
             "--wait-for", "/joint_states:2", "--wait-for", "/imu/data:2",
             "--wait-for", "/ground_truth/odom:2", "--wait-for", "/odom:1",
             "--wait-for", f"{READY_TOPIC}:1", "--wait-timeout", "300", "--delay", "1.0"],
        output="screen", name="player")
    return launch.LaunchDescription([bringup, player, launch_testing.actions.ReadyToTest()]), \
        {"player": player}


def _stamp(header) -> float:
    return header.stamp.sec + 1e-9 * header.stamp.nanosec


def _yaw(q) -> float:
    return math.atan2(2.0 * (q.w * q.z + q.x * q.y), 1.0 - 2.0 * (q.y * q.y + q.z * q.z))


class Recorder:
    """Subscribes in the test process (own context, spun in a thread) to what the nodes say."""

    def __init__(self) -> None:
        from diagnostic_msgs.msg import DiagnosticArray
        from nav_msgs.msg import Odometry
        from rclpy.executors import MultiThreadedExecutor
        from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
        from sensor_msgs.msg import JointState
        from tf2_msgs.msg import TFMessage

        from wmr_model.msg import CalibrationState

        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node("field_run_recorder", context=self.context)
        self.odom: list[tuple] = []
        self.truth: list[tuple] = []
        self.tf: list[tuple] = []
        self.joint_states = 0
        self.states: list = []
        self.diagnostics: dict[str, tuple[int, str]] = {}
        self.diagnostic_values: dict[str, dict[str, str]] = {}
        # KEEP_ALL: a recorder slower than a 4x replay must not overwrite what it has not read
        qos = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE,
                         history=HistoryPolicy.KEEP_ALL)
        n = self.node
        # the nodes' outputs, which must be matched before the player starts
        self._outputs = [
            n.create_subscription(Odometry, "/odom", lambda m: self.odom.append(self._pose(m)),
                                  qos),
            n.create_subscription(TFMessage, "/tf", self._on_tf, qos),
            n.create_subscription(CalibrationState, "/calibrator_node/state",
                                  self.states.append, qos)]
        n.create_subscription(Odometry, "/ground_truth/odom",
                              lambda m: self.truth.append(self._pose(m)), qos)
        n.create_subscription(JointState, "/joint_states", self._on_joints, qos)
        n.create_subscription(DiagnosticArray, "/diagnostics", self._on_diag, qos)
        self.executor = MultiThreadedExecutor(context=self.context)
        self.executor.add_node(n)
        self.thread = threading.Thread(target=self.executor.spin, daemon=True)
        self.thread.start()
        threading.Thread(target=self._announce_ready, daemon=True).start()

    def _announce_ready(self, timeout: float = 300.0) -> None:
        """Subscribe to READY_TOPIC (the player's gate) once every output subscription has a
        matched publisher."""
        from std_msgs.msg import Empty

        t0 = time.monotonic()
        while (any(s.get_publisher_count() < 1 for s in self._outputs)
               and time.monotonic() - t0 < timeout):
            time.sleep(0.05)
        self.node.create_subscription(Empty, READY_TOPIC, lambda _m: None, 1)

    @staticmethod
    def _pose(m) -> tuple:
        p, q = m.pose.pose.position, m.pose.pose.orientation
        return (_stamp(m.header), p.x, p.y, p.z, _yaw(q), m.header.frame_id, m.child_frame_id)

    def _on_tf(self, msg) -> None:
        for t in msg.transforms:
            tr, q = t.transform.translation, t.transform.rotation
            self.tf.append((_stamp(t.header), tr.x, tr.y, tr.z, _yaw(q), t.header.frame_id,
                            t.child_frame_id))

    def _on_joints(self, _msg) -> None:
        self.joint_states += 1

    def _on_diag(self, msg) -> None:
        for st in msg.status:
            self.diagnostics[st.name] = (int.from_bytes(st.level, "little")
                                         if isinstance(st.level, bytes) else int(st.level),
                                         st.message)
            self.diagnostic_values[st.name] = {kv.key: kv.value for kv in st.values}

    def call(self, srv_type, name: str, request, timeout: float = 60.0):
        client = self.node.create_client(srv_type, name)
        try:
            from wmr_model.ros.runner import call_service

            return call_service(client, request, timeout=timeout)  # the executor thread spins
        finally:
            self.node.destroy_client(client)

    def parameters(self, node: str, names: list[str], timeout: float = 60.0) -> dict:
        """Values of ``names`` on ``node`` (AssertionError naming any that is not set)."""
        from rcl_interfaces.msg import ParameterType
        from rcl_interfaces.srv import GetParameters
        from rclpy.parameter import parameter_value_to_python

        resp = self.call(GetParameters, f"{node}/get_parameters",
                         GetParameters.Request(names=names), timeout=timeout)
        out = {n: parameter_value_to_python(v) for n, v in zip(names, resp.values)
               if v.type != ParameterType.PARAMETER_NOT_SET}
        missing = sorted(set(names) - set(out))
        if missing:
            raise AssertionError(f"{node} has no parameters {missing}")
        return out

    def close(self) -> None:
        self.executor.shutdown()
        self.node.destroy_node()
        self.context.try_shutdown()


PLAN = dict(twists=np.array([[[1.0, 0.4]]]), twist_durations=[5.0], step_size=0.05,
            num_steps=100, pose=(0.0, 0.0, 0.0), fidelity="enhanced", every=100,
            outputs=["poses"])


def _predicted_end(rec: Recorder) -> np.ndarray:
    """End position of one planner request to the running prediction node (the recorder's
    executor thread spins the client's node)."""
    from wmr_model.ros.client import PredictionClient

    return _call_predict(PredictionClient(rec.node, "/prediction_node/predict")).positions[0, -1]


def _call_predict(client):
    from wmr_model.ros.client import build_request, parse_response
    from wmr_model.ros.runner import call_service

    req = build_request(**PLAN)
    # generous: a node's first request compiles its kernels where the numba cache is cold
    resp = call_service(client.client, req, timeout=600.0)
    assert resp.success, resp.status_message
    return parse_response(resp, req.step_size)


def _oracle_end(values: dict[str, float]) -> np.ndarray:
    """The same request computed in this process by the core, with ``values`` applied."""
    from wmr_model.io.vehicles import load_vehicle
    from wmr_model.parameters import SLIP_NAMES
    from wmr_model.prediction.predict import predict, twist_commands
    from wmr_model.prediction.rollouts import place_on_terrain
    from wmr_model.terrain.surface import flat
    from wmr_model.vehicles.parameters import with_parameters

    model = with_parameters(load_vehicle("warthog"),
                            {k: v for k, v in values.items() if k.startswith("wheel.")})
    ground = flat()
    q0 = model.neutral_state()
    q0 = place_on_terrain(model, ground, q0)
    seg = np.concatenate([PLAN["twists"], [[[PLAN["num_steps"] * PLAN["step_size"]]]]], axis=2)
    rates = twist_commands(model, seg, PLAN["step_size"], q=q0)
    slip = {n: values.get(n, 0.0) for n in SLIP_NAMES}
    pred = predict(model, ground, q0, rates[:, :PLAN["num_steps"]], PLAN["step_size"],
                   fidelity="enhanced", slip_params=slip)
    return np.asarray(pred.position)[0, -1]


def _relative(poses: np.ndarray, t0: float) -> np.ndarray:
    """Planar poses (x, y, yaw) expressed in the frame of the pose at time ``t0``."""
    i = int(np.searchsorted(poses[:, 0], t0))
    x0, y0, th0 = poses[i, 1], poses[i, 2], poses[i, 4]
    c, s = math.cos(th0), math.sin(th0)
    dx, dy = poses[:, 1] - x0, poses[:, 2] - y0
    return np.column_stack([poses[:, 0], c * dx + s * dy, -s * dx + c * dy,
                            np.unwrap(poses[:, 4]) - th0])


class TestFieldRun(unittest.TestCase):
    rec: Recorder

    @classmethod
    def setUpClass(cls) -> None:
        cls.rec = Recorder()

    @classmethod
    def tearDownClass(cls) -> None:
        OUT.mkdir(parents=True, exist_ok=True)
        (OUT / "results.json").write_text(json.dumps(RESULTS, indent=2, default=float))
        cls.rec.close()

    def test_1_playback(self, proc_info, player) -> None:
        # The values the nodes start with (before any push), read while the bag plays.
        names = list(self.rec.parameters("/calibrator_node", ["params"])["params"])
        RESULTS["calibrated"] = names
        model = [n for n in names if n.startswith(("slip.", "wheel."))]
        RESULTS["start_values"] = self.rec.parameters("/odometry_node", model)
        RESULTS["plan_end_before"] = _predicted_end(self.rec).tolist()
        t0 = time.monotonic()
        proc_info.assertWaitForShutdown(process=player, timeout=DURATION / RATE + 300)
        launch_testing.asserts.assertExitCodes(proc_info, process=player)
        # The player ends once every subscriber has every message; nodes slower than the
        # rate still work through their queues: wait until nothing new arrives for 5 s.
        rec = self.rec
        seen, quiet_since = None, time.monotonic()
        while time.monotonic() - quiet_since < 5.0 and time.monotonic() - t0 < 1200:
            now = (len(rec.odom), len(rec.states), rec.joint_states, len(rec.tf))
            if now != seen:
                seen, quiet_since = now, time.monotonic()
            time.sleep(0.5)
        time.sleep(2.0)  # the last push (push.period)
        RESULTS["playback_wall"] = time.monotonic() - t0
        self.assertEqual(self.rec.joint_states, META["topics"]["/joint_states"]["count"])

    def test_2_odometry_at_encoder_rate_within_2_percent(self) -> None:
        rec = self.rec
        RESULTS["odom_messages"] = len(rec.odom)
        RESULTS["joint_states_messages"] = rec.joint_states
        # One odometry step (one /odom message) per encoder message but the first, by the
        # node's own count; the node's rejections are checked in test_7 (diagnostics at OK).
        steps = self.rec.diagnostic_values["/odometry_node: odometry"]["steps"]
        RESULTS["odometry_steps"] = int(steps)
        self.assertEqual(int(steps), rec.joint_states - 1)
        # The recorder (a Python subscriber beside busy node processes, and on CI beside a
        # second pytest worker, on two cores) may fall more than the odometry publisher's
        # queue (50) behind and miss a few: 95 % of them here (seen: 7417 of 7499 at 1x).
        self.assertGreaterEqual(len(rec.odom), 0.95 * (rec.joint_states - 1))
        stamps = np.array([o[0] for o in rec.odom])
        self.assertAlmostEqual(float(np.median(np.diff(stamps))), 1.0 / 50.0, places=6)
        self.assertEqual({(o[5], o[6]) for o in rec.odom}, {("odom", "base_link")})
        odom = np.array([o[:5] for o in rec.odom])
        truth = np.array([t[:5] for t in rec.truth])
        self.assertTrue(np.all(np.diff(odom[:, 0]) > 0), "odom stamps must increase")
        t0 = odom[0, 0]
        o = _relative(odom, t0)
        g = _relative(truth, t0)
        t_end = min(o[-1, 0], g[-1, 0])
        oe = o[np.searchsorted(o[:, 0], t_end) - 1 if o[-1, 0] > t_end else -1]
        ge = g[np.searchsorted(g[:, 0], oe[0]).clip(0, len(g) - 1)]
        seg = g[(g[:, 0] >= t0) & (g[:, 0] <= oe[0])]
        path = float(np.sum(np.hypot(np.diff(seg[:, 1]), np.diff(seg[:, 2]))))
        drift = float(np.hypot(oe[1] - ge[1], oe[2] - ge[2]))
        RESULTS.update(path_length=path, end_drift=drift, drift_percent=100 * drift / path,
                       odom_rate_hz=(len(odom) - 1) / (odom[-1, 0] - odom[0, 0]))
        self.assertGreater(path, 10.0)
        self.assertLessEqual(drift, 0.02 * path, f"drift {drift:.3f} m over {path:.1f} m")

    def test_3_tf_follows_odometry(self) -> None:
        rec = self.rec
        tf = [t for t in rec.tf if (t[5], t[6]) == ("odom", "base_link")]
        RESULTS["tf_messages"] = len(tf)
        self.assertGreaterEqual(len(tf), (1.0 if RATE <= 1.0 else 0.95) * len(rec.odom))
        by_stamp = {round(o[0], 6): o for o in rec.odom}
        matched = [t for t in tf if round(t[0], 6) in by_stamp]
        self.assertGreaterEqual(len(matched), (1.0 if RATE <= 1.0 else 0.95) * len(tf))
        err = max(max(abs(a - b) for a, b in zip(t[1:5], by_stamp[round(t[0], 6)][1:5]))
                  for t in matched)
        self.assertLess(err, 1e-9)

    def test_4_calibration_within_3_sigma(self) -> None:
        states = self.rec.states
        self.assertTrue(states, "no CalibrationState received")
        last = states[-1]
        RESULTS["calibration_states"] = len(states)
        RESULTS["intervals"] = int(last.interval_count)
        RESULTS["rejected"] = int(last.rejected_count)
        # one state per interval the calibrator closed
        self.assertEqual(len(states), last.interval_count)
        self.assertGreaterEqual(last.interval_count, 0.8 * DURATION / 2.0)
        n = len(last.parameter_names)
        cov = np.array(last.covariance).reshape(n, n)
        estimates = {}
        for i, name in enumerate(last.parameter_names):
            sigma = math.sqrt(cov[i, i])
            estimates[name] = {"value": last.values[i], "sigma": sigma,
                               "truth": TRUTH.get(name)}
        RESULTS["estimates"] = estimates
        for name, e in estimates.items():
            if e["truth"] is None:
                continue
            z = (e["value"] - e["truth"]) / e["sigma"]
            e["z"] = z
            self.assertLessEqual(abs(z), 3.0, f"{name}: {e}")

    def test_5_pushed_values_reach_odometry_and_prediction(self) -> None:
        last = self.rec.states[-1]
        start = RESULTS["start_values"]
        names = sorted(start)
        odo = self.rec.parameters("/odometry_node", names)
        pred = self.rec.parameters("/prediction_node", names)
        RESULTS["node_values"] = {"odometry": odo, "prediction": pred}
        self.assertEqual(odo, pred)
        n = len(last.parameter_names)
        sigma = dict(zip(last.parameter_names,
                         np.sqrt(np.diag(np.array(last.covariance).reshape(n, n)))))
        estimate = dict(zip(last.parameter_names, last.values))
        pushed = [k for k in names if odo[k] != start[k]]
        RESULTS["pushed"] = pushed
        self.assertTrue(pushed, f"nothing pushed: {odo} (start {start})")
        for k in pushed:
            # a pushed value is the calibrator's estimate at push time
            self.assertLess(abs(odo[k] - estimate[k]), 3 * sigma[k], k)
        # A planner's answer changes the way the core says the pushed values change it.
        before = np.array(RESULTS["plan_end_before"])
        after = _predicted_end(self.rec)
        RESULTS["plan_end_after"] = after.tolist()
        expected = _oracle_end(odo) - _oracle_end(start)
        RESULTS["plan_change"] = {"service": (after - before).tolist(),
                                  "core": expected.tolist()}
        self.assertGreater(float(np.linalg.norm(after - before)), 1e-3)
        np.testing.assert_allclose(after - before, expected, atol=1e-3)

    def test_6_save_and_restart_from_the_file(self) -> None:
        import signal

        from std_srvs.srv import Trigger

        from wmr_model.io.calibration_file import load_calibration

        resp = self.rec.call(Trigger, "/calibrator_node/save", Trigger.Request())
        self.assertTrue(resp.success, resp.message)
        path = Path(resp.message)
        saved = load_calibration(path, "warthog")
        last = self.rec.states[-1]
        # the file holds the calibrator's final estimate
        for name, value in zip(last.parameter_names, last.values):
            if name in saved.values:
                self.assertAlmostEqual(saved.values[name], value, places=9, msg=name)
        RESULTS["saved_file"] = str(path)
        RESULTS["saved_values"] = saved.values
        OUT.mkdir(parents=True, exist_ok=True)
        with open(OUT / f"reload_rate{RATE:g}.log", "wb") as out:
            proc = subprocess.Popen(
                [str(BIN / "ros2"), "launch", "wmr_model", "bringup.launch.py",
                 "vehicle:=warthog", "use_calibration:=true", "namespace:=/reloaded",
                 f"calibration_file:={path}"],
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            names = [k for k in saved.values if k.startswith(("slip.", "wheel.", "noise."))]
            self.assertTrue(names, f"no model values in {path}")
            # odometry and prediction run with the saved values as their parameters
            for node in ("odometry_node", "prediction_node"):
                got = self.rec.parameters(f"/reloaded/{node}", names, timeout=180.0)
                for k in names:
                    self.assertAlmostEqual(got[k], saved.values[k], places=12,
                                           msg=f"{node} {k}")
            # the calibrator starts its estimate from the file (it says so once loaded)
            log = OUT / f"reload_rate{RATE:g}.log"
            deadline = time.monotonic() + 120
            want = f"calibration_file: {len(saved.values)} values from {path}"

            def said() -> bool:
                return any("calibrator_node" in line and want in line
                           for line in log.read_text().splitlines())

            while not said() and time.monotonic() < deadline:
                time.sleep(0.5)
            self.assertTrue(said(), f"no '{want}' from the calibrator:\n{log.read_text()}")
        finally:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)

    def test_7_diagnostics_ok(self) -> None:
        diag = self.rec.diagnostics
        RESULTS["diagnostics"] = diag
        for node in NODES:
            entries = {k: v for k, v in diag.items() if k.startswith(f"/{node}")}
            self.assertTrue(entries, f"no diagnostics from {node}: {sorted(diag)}")
            for name, (level, message) in entries.items():
                self.assertEqual(level, 0, f"{name}: {message}")


@launch_testing.post_shutdown_test()
class TestShutdown(unittest.TestCase):
    def test_clean_exit(self, proc_info) -> None:
        launch_testing.asserts.assertExitCodes(proc_info, allowable_exit_codes=[0, -2, -15])
