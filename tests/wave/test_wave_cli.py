"""``tilecraft wave run`` on the CPU: what it writes, and one-line refusals with exit code 2."""
from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from tilecraft.cli import app

runner = CliRunner()


def invoke(*args: str):
    result = runner.invoke(app, ["wave", "run", *args], env={"COLUMNS": "200"})
    return result, result.output


def test_run_writes_record_and_pictures(tmp_path):
    out = tmp_path / "shot"
    result, text = invoke("--shape", "41,61", "--nt", "120", "--velocities", "1500,2500", "--interfaces", "200",
                          "--receivers", "11", "--pml-width", "8", "--backend", "torch", "--out", str(out))
    assert result.exit_code == 0, text
    data = np.load(out / "record.npz")
    assert data["record"].shape == (120, 11) and np.isfinite(data["record"]).all()
    assert np.abs(data["record"]).max() > 0
    info = json.loads(str(data["info"]))
    assert info["backend"] == "torch" and info["order"] == 8 and info["pml_width"] == 8
    for png in ("shot_gather.png", "wavefield.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "CPU: not a GPU figure" in text
    assert "CUDA graphs" in text and "not used: backend torch" in text  # how the steps ran is shown
    assert "into a third array" in text


def test_run_3d_with_model_file_and_free_surface(tmp_path):
    v = np.full((13, 12, 14), 1800.0, dtype=np.float32)
    np.save(tmp_path / "v.npy", v)
    out = tmp_path / "shot3"
    result, text = invoke("--model-file", str(tmp_path / "v.npy"), "--nt", "10", "--order", "4", "--pml-width", "4",
                          "--free-surface", "--receivers", "5", "--backend", "torch", "--out", str(out))
    assert result.exit_code == 0, text
    assert np.load(out / "record.npz")["record"].shape == (10, 5)
    assert (out / "wavefield.png").exists()


@pytest.mark.parametrize("args,message", [
    (("--order", "5"), "order"),
    (("--shape", "10,abc"), "--shape"),
    (("--shape", "10"), "--shape"),
    (("--source", "100000,10"), "outside the model"),
    (("--dt", "1.0"), "unstable"),
    (("--velocity", "-5"), "> 0"),
    (("--velocities", "1500,2500", "--interfaces", "10,20"), "one more velocity"),
    (("--gpus", "2", "--device", "cpu"), "--gpus 2"),
    (("--source", "1,2,3"), "--source needs 2"),
    (("--spacing", "1e-300"), "out of range"),
    (("--velocity", "1e300"), "does not fit"),
    (("--interfaces", "100"), "--interfaces needs --velocities"),
])
def test_bad_input_is_one_line_and_exit_2(args, message, tmp_path):
    result, text = invoke("--shape", "21,31", "--nt", "5", *args, "--out", str(tmp_path / "x"))
    assert result.exit_code == 2, text
    assert message in text and "Traceback" not in text
    assert len([line for line in text.strip().splitlines() if line.startswith("error:")]) == 1
    assert not (tmp_path / "x").exists()


def test_an_out_folder_that_cannot_be_made_is_refused_before_the_run(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    for out in (blocker, blocker / "x"):
        result, text = invoke("--shape", "21,31", "--nt", "5", "--backend", "torch", "--out", str(out))
        assert result.exit_code == 2 and "--out" in text and "Traceback" not in text, text


def test_a_complex_model_file_is_refused(tmp_path):
    np.save(tmp_path / "c.npy", np.full((21, 31), 1500 + 1j))
    result, text = invoke("--model-file", str(tmp_path / "c.npy"), "--nt", "5", "--out", str(tmp_path / "x"))
    assert result.exit_code == 2 and "real numbers" in text, text
