"""MuJoCo divergence detection on a bare model: the counters, and the auto-reset that hides a second divergence."""

import mujoco
import pytest

from hylo.core.errors import InvalidAction, SimulationDiverged
from hylo.envs.mujoco_watch import DivergenceWatch

BALL = '<mujoco><worldbody><body><freejoint/><geom size="0.1"/></body></worldbody></mujoco>'


@pytest.fixture
def sim():
    model = mujoco.MjModel.from_xml_string(BALL)
    data = mujoco.MjData(model)
    return model, data


def _step(watch, model, data):
    before = watch.counts()
    mujoco.mj_step(model, data)
    watch.check(before)


def test_a_clean_step_passes_and_a_divergence_names_its_warning(sim, capfd, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    model, data = sim
    watch = DivergenceWatch(data)
    for _ in range(5):
        _step(watch, model, data)
    data.qvel[:] = 1e20
    with pytest.raises(SimulationDiverged, match="BADQVEL"):
        _step(watch, model, data)
    assert capfd.readouterr().out == ""  # MuJoCo's warning went to logging, not stdout
    assert not (tmp_path / "MUJOCO_LOG.TXT").exists()


def test_a_second_divergence_after_the_auto_reset_is_still_caught(sim):
    model, data = sim
    watch = DivergenceWatch(lambda: data)
    for _ in range(3):
        _step(watch, model, data)
    data.qvel[:] = 1e20
    with pytest.raises(SimulationDiverged):
        _step(watch, model, data)
    for _ in range(3):  # the env goes on after MuJoCo's silent reset
        mujoco.mj_step(model, data)
    data.qvel[:] = 1e20
    with pytest.raises(SimulationDiverged, match="BADQVEL"):
        _step(watch, model, data)


def test_a_bad_control_is_the_agents_fault():
    model = mujoco.MjModel.from_xml_string(
        '<mujoco><worldbody><body><joint name="j" type="slide"/><geom size="0.1"/></body></worldbody>'
        '<actuator><motor joint="j"/></actuator></mujoco>'
    )
    data = mujoco.MjData(model)
    watch = DivergenceWatch(data)
    data.ctrl[:] = float("nan")
    with pytest.raises(InvalidAction, match="BADCTRL"):
        _step(watch, model, data)
