"""Refcount-free kernels (``@njit(refcount=False)``, :mod:`wmr_model._jit`).

numba keeps no reference counts for the arrays such a kernel reads. That is safe only when it
returns no array and receives none from a call (the caller would release a reference nobody
took, or one taken would never be released); numba itself refuses allocations in it. Checked
here: the hot path is marked, none of those compiled as entry points returns an array, and
numba's allocation counters show every allocation of the product paths released.
"""

import sys

import numpy as np
import pytest

from wmr_model import _jit

pytestmark = pytest.mark.skipif(not _jit.JIT_ENABLED, reason="numba is not in use "
                                "(WMR_DISABLE_JIT or no numba): no compiled kernels to check")


def _has_array(t) -> bool:
    from numba.core import types

    if isinstance(t, types.Array):
        return True
    if isinstance(t, types.BaseTuple):
        return any(_has_array(x) for x in t.types)
    return False


@pytest.fixture(scope="module")
def compiled():
    """Run the kinematic product paths (simulation Euler/RK4, wheeled and tracked, prediction
    with enhanced kinematics and covariance) so their kernels are compiled."""
    from wmr_model.io.vehicles import load_vehicle
    from wmr_model.pipelines.warmup import compile_group

    res = compile_group("kinematic")
    assert not res.error, res.error
    from wmr_model.kinematics import api as kin
    from wmr_model.terrain import surface as tr

    for name in ("zoe", "absolem"):
        m = load_vehicle(name)
        q0, _ = kin.initialize_contact(m, tr.flat(), m.neutral_state())
        kin.simulate(m, tr.rough(0.05, 0.5, seed=1), q0, np.ones((5, len(m.actuated_joints))),
                     0.04)
    return [k for k in _jit.REFCOUNT_FREE if k.signatures]


def test_the_hot_path_is_refcount_free():
    import wmr_model.kinematics.api  # noqa: F401  (imports every kinematic kernel module)

    names = {k.py_func.__name__ for k in _jit.REFCOUNT_FREE}
    for hot in ("terrain_height_normal", "wheel_contact_into", "forward_kinematics",
                "constraint_system", "joint_space_velocity", "solve_partitioned_with",
                "resolve_partitioned_with",
                "contact_detection",
                "_step_velocity", "_record_sample", "integrate_euler"):
        assert hot in names, hot
    from wmr_model.dynamics import simulate  # noqa: F401  (imports the dynamics kernels)

    names = {k.py_func.__name__ for k in _jit.REFCOUNT_FREE}
    for hot in ("dynamics_step", "_step_kinematics", "crba_into", "bias_force_into",
                "assemble_constraints", "joint_acceleration_balance",
                "joint_acceleration_error", "newton_step", "force_balance"):
        assert hot in names, hot


def test_no_refcount_free_kernel_returns_an_array(compiled):
    """No array in the return type of those compiled as entry points here (numba refuses to
    return a new array from them; the allocation-counter test below covers the rest)."""
    assert len(compiled) >= 3
    bad = [f"{k.py_func.__qualname__} returns {k.overloads[sig].signature}"
           for k in compiled for sig in k.signatures
           if _has_array(k.overloads[sig].signature.return_type)]
    assert not bad, "\n".join(bad)


_NRT_RUN = """
import numpy as np
from numba.core.runtime import rtsys
from wmr_model.dynamics.simulate import simulate_dynamics
from wmr_model.experiments import kinematic as ex
from wmr_model.io.vehicles import load_vehicle
from wmr_model.kinematics import api as kin
from wmr_model.prediction.predict import predict
from wmr_model.terrain import surface as tr

ter = tr.rough(0.05, 0.5, seed=2)
runs = []
for name in ("zoe", "absolem"):
    m = load_vehicle(name)
    q, _ = kin.initialize_contact(m, ter, m.neutral_state())
    rates = np.full((20, len(m.actuated_joints)), 2.0)
    d = kin.create_data(m)
    known = kin.simulation_known(m)
    qk = np.zeros(m.nv)
    qk[6 + m.actuated_joints] = 2.0
    runs += [lambda m=m, q=q, r=rates: kin.simulate(m, ter, q, r, 0.04),
             lambda m=m, q=q, r=rates: kin.simulate(m, ter, q, r, 0.04, integrator="rk4"),
             lambda m=m, d=d, q=q, k=known, qk=qk: kin.joint_space_velocity(m, d, ter, q, k, qk,
                                                                             1.0),
             lambda m=m, q=q: kin.initialize_contact(m, ter, q)]
m = load_vehicle("zoe")
q0, cmd, _ = ex.random_twist_candidates(m, ter, 8, 0.04, 1.0)
runs.append(lambda: predict(m, ter, q0, cmd, 0.04, fidelity="enhanced",
                            slip_params=ex.BATCH_SLIP, Qprime=ex.BATCH_QPRIME))
q, _ = kin.initialize_contact(m, ter, m.neutral_state())
for solver in ("joint_acceleration", "thesis"):
    runs.append(lambda s=solver: simulate_dynamics(m, ter, q, np.zeros(m.nv),
                                                   np.full((10, len(m.actuated_joints)), 2.0),
                                                   0.04, solver=s))
for run in runs:
    run()  # compiled or loaded, and any one-time allocation made
before = rtsys.get_allocation_stats()
for _ in range(5):
    for run in runs:
        run()
after = rtsys.get_allocation_stats()
print(after.mi_alloc - before.mi_alloc, after.mi_free - before.mi_free)
"""


def test_no_compiled_allocation_leaks(compiled):
    """Every array numba allocates on the product paths through the refcount-free kernels is
    released again (numba's own allocation counters, NUMBA_NRT_STATS): a refcount-free
    kernel that received an array from a call would leak it."""
    import os
    import subprocess

    env = dict(os.environ, NUMBA_NRT_STATS="1")
    out = subprocess.run([sys.executable, "-c", _NRT_RUN], env=env, capture_output=True,
                         text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    allocated, freed = (int(x) for x in out.stdout.split()[-2:])
    assert allocated > 0 and freed == allocated, out.stdout
