"""`stsreg report`'s time-to-a-champion table: each step's wall time, precision and machine, from what the steps
leave beside their outputs (prepare's record under .stsreg/runs, the MLflow runs of the project's store)."""

from stsreg.infra import tracking
from stsreg.product.timings import format_timings, record


def test_each_step_reports_its_wall_time_precision_and_machine(tmp_path):
    uri = f"sqlite:///{tmp_path}/mlflow/mlflow.db"
    assert format_timings(uri, tmp_path) == ""  # nothing ran yet: no table, no store created
    assert not (tmp_path / "mlflow").exists()
    record("prepare", 9.54, tmp_path)
    tags = tracking.environment_tags("cpu")
    for name, precision in (("stage1", "bf16"), ("stage2", "bf16"), ("evaluate", "fp32"), ("register", "none"),
                            ("promote", "fp32")):
        with tracking.tracked_run("stsreg", name, {}, {**tags, "precision": precision}, uri):
            pass
    table = format_timings(uri, tmp_path)
    lines = table.splitlines()
    assert lines[2] == f"| prepare | 0 min 09.5 s |  | {tracking.cpu_name()} |"
    assert [line.split(" | ")[0] for line in lines[3:]] == ["| stage1", "| stage2", "| evaluate", "| register",
                                                               "| promote", "| **total**"]
    assert "| bf16 | " in lines[3] and "| fp32 | " in lines[5] and tags["host_cpu"] in lines[4]
    assert "| - | " in lines[6] and "| fp32 | " in lines[7]  # register computes nothing; promote scored the backbone
    assert tags["host_cpu"].endswith(", native bf16") == tracking.cpu_name().endswith(", native bf16")
