"""`make servers` points the `prefect` command at this project's server through the project's own prefect.toml, never
through the user-wide profile: a `prefect` command run in another folder (another checkout) keeps its settings."""

import os
import subprocess
import sys

from stsreg.infra import prefect_project

READ_URL = "from prefect.settings import PREFECT_API_URL; print(PREFECT_API_URL.value())"


def _prefect_url(cwd, home) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(HOME=str(home), PREFECT_HOME=str(home / ".prefect"))
    return subprocess.run([sys.executable, "-c", READ_URL], cwd=cwd, env=env, capture_output=True, text=True,
                          check=True).stdout.strip()


def test_the_servers_url_reaches_this_project_only(tmp_path):
    project, other, home = tmp_path / "project", tmp_path / "other", tmp_path / "home"
    for folder in (project, other, home / ".prefect"):
        folder.mkdir(parents=True)
    assert prefect_project.write(project, "http://127.0.0.1:4999/api")
    assert _prefect_url(project, home) == "http://127.0.0.1:4999/api"
    assert _prefect_url(other, home) == "None"  # another checkout: untouched, no profile was activated
    assert not (home / ".prefect/profiles.toml").exists()
    prefect_project.remove(project)
    assert not (project / "prefect.toml").exists() and _prefect_url(project, home) == "None"


def test_a_users_own_prefect_toml_is_never_overwritten_or_removed(tmp_path):
    mine = '[api]\nurl = "http://my-server:4200/api"\n'
    (tmp_path / "prefect.toml").write_text(mine)
    assert not prefect_project.write(tmp_path, "http://127.0.0.1:4999/api")
    prefect_project.remove(tmp_path)
    assert (tmp_path / "prefect.toml").read_text() == mine
