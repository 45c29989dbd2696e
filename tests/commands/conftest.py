import io
import json

import pytest
from django.core.management import CommandError, call_command


class Run:
    """``manage.py`` in-process: stdout and stderr captured, stdin given."""

    def __call__(self, *args: str, stdin: str | None = None) -> str:
        out, err = io.StringIO(), io.StringIO()
        options = {"stdout": out, "stderr": err}
        if stdin is not None:
            options["stdin"] = io.StringIO(stdin)
        call_command(*args, **options)
        self.stderr = err.getvalue()
        return out.getvalue()

    def json(self, *args: str, stdin: str | None = None):
        return json.loads(self(*args, "--json", stdin=stdin))

    def refused(self, *args: str, stdin: str | None = None) -> str:
        """The one line a refusal prints; fails if the command succeeded."""
        with pytest.raises(CommandError) as info:
            self(*args, stdin=stdin)
        message = str(info.value)
        assert message.startswith("refused: ")
        assert "\n" not in message and "Traceback" not in message
        return message



@pytest.fixture
def run(db):
    return Run()
