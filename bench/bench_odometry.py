"""Odometry update latency and CPU, prediction-service latency (prints numbers, asserts nothing).

1. :class:`wmr_model.estimation.odometry.Odometry3D` on the Warthog (4 wheels, rocker differential,
encoder
   map, gyro known) over rough terrain: encoder messages at 100 Hz and 1 kHz, IMU at 2x the
   encoder rate (the 1 kHz case: 1 kHz), 20 s of synthetic driving each. Per-message wall time
   of ``update_encoders`` (each one steps: solve (2.38), Euler step, covariance) and
   ``update_imu``; CPU = process time per simulated second, i.e. the share of one core the
   odometry needs in real time.
2. The prediction node's request path without DDS: :func:`prediction_inputs` (checks and
   conversion), :func:`wmr_model.prediction.predict.predict` (kinematic, covariance on), and
   :func:`fill_response` (building the C paths and joint trajectories) for 1, 100 and 1000
   candidates of 50 steps (5 s at 0.1 s) of the diffdrive robot. Needs rclpy for part 2.

Run: ``.venv/bin/python bench/bench_odometry.py``; prints tables, then one JSON line.
"""

from __future__ import annotations

import json
import math
import time

import numpy as np

from wmr_model.experiments import kinematic as ex
from wmr_model.io.vehicles import load_vehicle
from wmr_model.terrain import surface as tr

SECONDS = 20.0


def bench_odometry(rate: float, imu_rate: float) -> dict:
    return ex.odometry_latency(rate, imu_rate, seconds=SECONDS, vehicle="warthog")


def bench_prediction(candidates: tuple[int, ...] = (1, 100, 1000), repeat: int = 3) -> list:
    try:
        from wmr_model.ros.prediction_node import fill_response, prediction_inputs
        from wmr_model.srv import PredictTrajectory
    except ImportError as exc:  # pragma: no cover - without rclpy
        print(f"prediction service part skipped: {exc}")
        return []
    from wmr_model.estimation.odometry import DEFAULT_QPRIME_U
    from wmr_model.kinematics.uncertainty import qprime_from_parameters
    from wmr_model.prediction.predict import predict

    model = load_vehicle("diffdrive")
    terrain = tr.flat()
    Q = qprime_from_parameters(DEFAULT_QPRIME_U)
    rows = []
    T, dt = 50, 0.1
    for C in candidates:
        req = PredictTrajectory.Request()
        req.step_size = dt
        req.num_candidates = C
        req.num_steps = T
        req.command_joint_names = ["left_wheel_joint", "right_wheel_joint"]
        req.joint_commands = np.random.default_rng(C).uniform(0, 5, C * T * 2).tolist()
        best = {"inputs": math.inf, "predict": math.inf, "response": math.inf}
        for _ in range(repeat + 1):  # first round warms up
            t0 = time.perf_counter()
            inp = prediction_inputs(model, req, None, max_candidates=10**6, max_steps=10**6,
                                    max_horizon=1e6)
            t1 = time.perf_counter()
            pred = predict(model, terrain, inp.q0, inp.commands, dt, Qprime=Q)
            t2 = time.perf_counter()
            fill_response(model, inp, pred, PredictTrajectory.Response())
            t3 = time.perf_counter()
            for key, v in (("inputs", t1 - t0), ("predict", t2 - t1), ("response", t3 - t2)):
                best[key] = min(best[key], v)
        rows.append({"candidates": C, "steps": T, **{f"{k}_ms": 1e3 * v for k, v in
                                                       best.items()},
                     "total_ms": 1e3 * sum(best.values())})
    return rows


def main() -> dict:
    odo = [bench_odometry(100.0, 200.0), bench_odometry(1000.0, 1000.0)]
    print("Odometry3D on warthog, rough terrain, gyro known (per message, wall time)")
    print(f"{'enc Hz':>7} {'imu Hz':>7} {'enc med us':>11} {'enc p99 us':>11} "
          f"{'imu med us':>11} {'CPU % core':>11}")
    for r in odo:
        print(f"{r['encoder_rate_hz']:7.0f} {r['imu_rate_hz']:7.0f} {r['encoder_us_median']:11.1f}"
              f" {r['encoder_us_p99']:11.1f} {r['imu_us_median']:11.1f} "
              f"{r['cpu_percent_of_one_core']:11.1f}")
    pred = bench_prediction()
    if pred:
        print("\nprediction request path (no DDS), diffdrive, kinematic + covariance, 50 steps")
        print(f"{'C':>6} {'checks ms':>10} {'predict ms':>11} {'response ms':>12} {'total ms':>9}")
        for r in pred:
            print(f"{r['candidates']:6d} {r['inputs_ms']:10.2f} {r['predict_ms']:11.2f} "
                  f"{r['response_ms']:12.2f} {r['total_ms']:9.2f}")
    out = {"odometry": odo, "prediction": pred}
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
