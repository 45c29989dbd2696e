"""R8: the production settings pass Django's deployment checks."""

import os
import secrets
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_check_deploy_is_clean_with_production_settings(tmp_path):
    env = {
        **os.environ,
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
        "DJANGO_SECURE": "1",
        "DJANGO_DEBUG": "0",
        "DJANGO_ALLOWED_HOSTS": "console.example.com",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'deploy.sqlite3'}",
    }
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)  # the browser tests' setting, never production's
    result = subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
                            cwd=ROOT, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_the_development_key_fails_the_deployment_check(tmp_path):
    env = {**os.environ, "DJANGO_SECURE": "1", "DATABASE_URL": f"sqlite:///{tmp_path / 'deploy.sqlite3'}"}
    env.pop("DJANGO_SECRET_KEY", None)
    result = subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
                            cwd=ROOT, env=env, capture_output=True, text=True)
    assert result.returncode != 0
    assert "SECRET_KEY" in result.stdout + result.stderr
