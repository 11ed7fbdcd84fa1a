"""Each search setting is defined once (tunebank/tuner/settings.py), and every door that takes it
reads that definition: `bank tune`'s option and help, the campaign file's field and types, the
bounds and choices both check, and the task_started field a tune records it under."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer

from tunebank.bank import Bank
from tunebank.cli.main import app
from tunebank.tuner.campaign.file import read_campaign
from tunebank.tuner.errors import TuneError
from tunebank.tuner.flow import tune
from tunebank.tuner.options import TuneOptions
from tunebank.tuner.settings import IN_CAMPAIGN_FILES, RESUMED, SETTINGS

MODEL = Path(__file__).resolve().parents[2] / "fixtures" / "models" / "squeezenet.onnx"


def test_bank_tune_takes_each_setting_by_its_flag_and_help() -> None:
    command = typer.main.get_command(app).commands["tune"]  # type: ignore[attr-defined]
    options = {flag: param for param in command.params for flag in (*param.opts, *param.secondary_opts)}
    for setting in SETTINGS.values():
        param = options[setting.flag.split("/")[0]]
        assert param.help == setting.help, setting.name
        if "/" in setting.flag:
            assert param.secondary_opts == [setting.flag.split("/")[1]]


def test_a_tune_records_every_resumed_setting(tmp_path: Path) -> None:
    with Bank.open(str(tmp_path / "b.db"), create=True) as bank:
        report = tune(lambda: bank, TuneOptions(model=MODEL, soc_version="Ascend310", budget=8,
                                                seed=3, noise=0.01, run_loop=3, work_dir=tmp_path))
        started = next(bank.events(task_id=report.task_id)).event.payload
    assert set(RESUMED.values()) - {"search_mode"} <= set(started)
    assert (started["budget"], started["seed"], started["noise"], started["run_loop"]) == (8, 3, 0.01, 3)


@pytest.mark.parametrize("name", sorted(IN_CAMPAIGN_FILES))
def test_a_campaign_file_holds_each_setting_with_the_same_checks(tmp_path: Path, name: str) -> None:
    setting = SETTINGS[name]
    (tmp_path / "m.onnx").write_bytes(MODEL.read_bytes())
    good = {"mode": '"rl"', "backend": '"sim"', "retune": "true", "transfer": "false",
            "noise": "0.1"}.get(name, "2")
    body = f'chips = ["Ascend310"]\n{name} = {good}\n[[models]]\npath = "m.onnx"\n'
    (tmp_path / "c.toml").write_text(body, encoding="utf-8")
    assert name in read_campaign(tmp_path / "c.toml").settings
    if setting.bounds is None and name not in ("mode", "backend"):
        return
    bad = {"mode": '"annealing"', "backend": '"tpu"'}.get(name, "-7")
    (tmp_path / "c.toml").write_text(body.replace(f"{name} = {good}", f"{name} = {bad}"), encoding="utf-8")
    with pytest.raises(TuneError) as from_file:
        read_campaign(tmp_path / "c.toml")
    with pytest.raises(TuneError) as from_option:
        setting.check(-7 if bad == "-7" else bad.strip('"'), setting.flag)
    assert str(from_file.value).split(f"{name}: ", 1)[1] == str(from_option.value).split(": ", 1)[1]
