"""``wmr compile``: the kernels a product path needs are in the cache afterwards.

Oracle: numba's own compile events. After ``wmr compile`` (run as a user runs it, a subprocess
on the same cache), a fresh process running product paths for *another* vehicle than the one the
warm-up used compiles no wmr_model kernel: everything is loaded from the cache.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from wmr_model._jit import JIT_ENABLED

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def _wmr(*args: str, timeout: float = 1200) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "wmr_model", *args], capture_output=True,
                          text=True, cwd=REPO, timeout=timeout)


# Product paths of the nodes and the CLI, for rocky7 (the warm-up uses Zoe), counting the
# wmr_model kernels numba compiles in this process.
_PATHS = """
import json, numpy as np
from numba.core import event
compiled = []
class Listener(event.Listener):
    def on_start(self, e):
        name = e.data["dispatcher"].py_func.__module__
        if name.startswith("wmr_model"):
            compiled.append(name + "." + e.data["dispatcher"].py_func.__qualname__)
    def on_end(self, e):
        pass
event.register("numba:compile", Listener())
from wmr_model.io.vehicles import load_vehicle
from wmr_model.kinematics import api as kin
from wmr_model.prediction.controllers import straight_wheel_rates
from wmr_model.prediction.rollouts import rollout
from wmr_model.dynamics.simulate import simulate_dynamics
from wmr_model.estimation.odometry import Odometry3D
from wmr_model.terrain.surface import rough
m = load_vehicle("rocky7")
t = rough(0.05, 0.5, 3, (-3.0, 3.0), (-3.0, 3.0), 0.1)
q0, _ = kin.initialize_contact(m, t)
u = np.tile(straight_wheel_rates(m, 0.5), (10, 1))
kin.simulate(m, t, q0, u, 0.04, integrator="rk4")
for fidelity in ("kinematic", "enhanced", "dynamic"):
    rollout(m, t, q0, np.stack([u] * 12), 0.04, fidelity=fidelity)
simulate_dynamics(m, t, q0, np.zeros(m.nv), u, 0.04)
odo = Odometry3D(m, t, fidelity="enhanced")
names = [m.joint_names[j] for j in m.actuated_joints]
for k in range(5):
    odo.update_imu(0.05 * k, (0.0, 0.0, 0.02))
    odo.update_encoders(0.05 * k, names, velocities=u[0])
print(json.dumps(sorted(set(compiled))))
"""


@pytest.mark.skipif(not JIT_ENABLED, reason="numba is not importable: nothing is compiled")
def test_after_compile_product_paths_load_every_kernel_from_the_cache():
    res = _wmr("compile", "--json")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["jit"] is True
    assert {g["group"] for g in out["groups"]} == {"kinematic", "dynamic", "planner"}
    assert all(g["error"] == "" for g in out["groups"]), out
    proc = subprocess.run([sys.executable, "-c", _PATHS], capture_output=True, text=True,
                          cwd=REPO, timeout=1200)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == []


@pytest.mark.parametrize("args, needle", [
    (("--group", "nope"), "group: expected one of"),
    (("--jobs", "0"), "jobs: must be an integer >= 1"),
    (("--vehicle", "no_such_vehicle"), "no_such_vehicle"),
])
def test_bad_arguments_are_one_line_and_exit_2(args, needle):
    res = _wmr("compile", *args, timeout=120)
    assert res.returncode == 2, (res.stdout, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("wmr: error:") and needle in lines[0], lines
