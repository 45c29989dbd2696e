"""The commands outside pytest: a real ``manage.py`` process."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings


@pytest.mark.slow
def test_models_list_json_runs_as_a_real_process(tmp_path, settings_file):
    base = Path(settings.BASE_DIR)
    venv_python = base / ".venv" / "bin" / "python"
    python = str(venv_python if venv_python.exists() else sys.executable)
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")}
    env.update(DATABASE_URL=f"sqlite:///{tmp_path / 'cli.sqlite3'}", LLMGW_SETTINGS_FILE=str(settings_file.path),
               DJANGO_SETTINGS_MODULE="llmgw_console.settings")

    def manage(*args):
        return subprocess.run([python, "manage.py", *args], cwd=base, env=env, capture_output=True, text=True,
                              timeout=120)

    migrated = manage("migrate", "--noinput", "-v", "0")
    assert migrated.returncode == 0, migrated.stderr
    listed = manage("models", "list", "--json")

    assert listed.returncode == 0, listed.stderr
    assert {m["name"] for m in json.loads(listed.stdout)} == {"declared/llama", "declared-cpu"}
