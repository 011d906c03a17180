"""Files the package finds beside its own source, wherever a module of it sits.

Modules moved into subpackages once kept ``Path(__file__).parents[k]`` counts of their old
place: the shipped vehicles and the message definitions were then found only through an
installed share directory, so an edited URDF in the checkout was silently ignored.
"""

from pathlib import Path

import wmr_model
from wmr_model.io.vehicles import data_roots, vehicle_files
from wmr_model.pipelines import runner
from wmr_model.pipelines.replay import _calibration_msgdef

CHECKOUT = Path(wmr_model.__file__).resolve().parents[1]


def test_the_checkout_is_the_first_data_root():
    assert data_roots()[0] == CHECKOUT
    urdf, sidecar = vehicle_files("warthog")
    assert urdf == CHECKOUT / "urdf" / "warthog.urdf"
    assert sidecar == CHECKOUT / "config" / "vehicles" / "warthog.yaml"


def test_replay_reads_the_checkouts_message_definition():
    assert _calibration_msgdef() == (CHECKOUT / "msg" / "CalibrationState.msg").read_text()


def test_the_task_cache_key_covers_every_subpackage(monkeypatch, tmp_path):
    # code_id hashes every source file of the package: a copy with one kernel file edited
    # must give another id (the cache must never serve results of other code).
    runner.code_id.cache_clear()
    base = runner.code_id()
    fake = tmp_path / "wmr_model"
    for f in Path(wmr_model.__file__).resolve().parent.rglob("*.py"):
        dst = fake / f.relative_to(CHECKOUT / "wmr_model")
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_bytes(f.read_bytes())
    (fake / "kinematics" / "api.py").write_text("# edited\n")
    monkeypatch.setattr(runner, "__file__", str(fake / "pipelines" / "runner.py"))
    runner.code_id.cache_clear()
    try:
        assert runner.code_id() != base
    finally:
        runner.code_id.cache_clear()
