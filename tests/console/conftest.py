"""Console personas: a browser session per role (the API's are in tests/conftest.py)."""

import html

import pytest
from django.test import Client


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def text(response) -> str:
    """A page as a person reads it: entities decoded."""
    return html.unescape(response.content.decode())


@pytest.fixture
def admin(admin_user) -> Client:
    return signed_in(admin_user)


@pytest.fixture
def operator(operator_user) -> Client:
    return signed_in(operator_user)


@pytest.fixture
def viewer(viewer_user) -> Client:
    return signed_in(viewer_user)
