"""Builder tests are pure Python: no database, no settings file, no cache.

The project's autouse fixtures prepare Django for every test; here they are
replaced by no-ops so that a builder test exercises the builder alone (and
hypothesis does not run them once per example).
"""

import pytest


@pytest.fixture(autouse=True)
def settings_file():
    return None


@pytest.fixture(autouse=True)
def _fresh_catalog_cache():
    yield
