"""The small rules: names (and aliases), owners, weights URIs and their shapes."""

import pytest

from catalog.builder import SOURCE_SCHEMES, name_problem, owner_problem, source_problem, source_shape_problem

# --- names ------------------------------------------------------------------

VALID_NAMES = [
    "m",
    "meta-llama/Llama-3.1-8B-Instruct",
    "qwen2.5:7b",
    "org/team/model_v2",
    "a" * 200,
    "-leading-dash",
    "trailing-dash-",
    "..dots-inside",
    "a.b/c..d/e-f",
]


@pytest.mark.parametrize("name", VALID_NAMES)
def test_names_of_letters_digits_and_dot_underscore_colon_slash_dash_are_accepted(name):
    assert name_problem(name) is None


def test_an_empty_name_is_required():
    assert "required" in name_problem("")


def test_a_name_longer_than_200_characters_is_refused():
    assert "200" in name_problem("a" * 201)


@pytest.mark.parametrize("name", ["has space", "ümlaut", "a@b", "a#b", "tab\tname", "new\nline", "a?b", "a\\b"])
def test_a_name_with_a_character_outside_the_charset_is_refused(name):
    assert name_problem(name) is not None


@pytest.mark.parametrize("name", ["/lead", "trail/", "/"])
def test_a_name_cannot_start_or_end_with_a_slash(name):
    assert name_problem(name) is not None


@pytest.mark.parametrize("name", ["a//b", ".", "..", "-", "a/./b", "a/../b", "a/-/b", "./a", "a/..", "-/a", "a/-"])
def test_a_name_with_an_empty_dot_dotdot_or_dash_segment_is_refused(name):
    assert name_problem(name) is not None


@pytest.mark.parametrize("value", [None, 5, ["a"], {"a": 1}, True])
def test_a_name_that_is_not_a_string_is_refused(value):
    assert "string" in name_problem(value)


def test_name_problems_say_which_field_they_are_about():
    assert name_problem("a b", "alias").startswith("alias")


# --- owners ------------------------------------------------------------------

@pytest.mark.parametrize("owner", ["", "org:acme", "team:ml-infra", "project:chat_v2.1", "org:A1"])
def test_an_owner_is_shared_or_an_org_team_or_project(owner):
    assert owner_problem(owner) is None


@pytest.mark.parametrize("owner", ["acme", "user:bob", "org:", "org:a b", "ORG:acme", "team:a/b", "org:acme:x", " org:acme"])
def test_an_owner_of_another_shape_is_refused(owner):
    assert owner_problem(owner) is not None


def test_an_owner_that_is_not_a_string_is_refused():
    assert owner_problem(3) is not None


# --- weights URIs ------------------------------------------------------------

def test_the_source_schemes_are_hf_s3_gs_oci_file_and_https():
    assert set(SOURCE_SCHEMES) == {"hf", "s3", "gs", "oci", "file", "https"}


@pytest.mark.parametrize("source", [
    "hf://org/name", "s3://bucket/key", "gs://bucket/key", "oci://registry.io/repo:tag",
    "file:///models/x.gguf", "https://weights.example.com/x",
])
def test_a_source_with_a_known_scheme_is_accepted(source):
    assert source_problem(source) is None


@pytest.mark.parametrize("source", ["ftp://host/x", "http://host/x", "HF://org/name", "org/name", "hf:/org/name", "hf//org"])
def test_a_source_without_a_known_scheme_is_refused(source):
    assert "hf://" in source_problem(source)


@pytest.mark.parametrize("source", ["hf://", "s3:///", "hf://org/na me", "hf://org/name\n"])
def test_a_source_that_names_no_location_or_has_spaces_is_refused(source):
    assert source_problem(source) is not None


def test_an_empty_source_is_required():
    assert "required" in source_problem("")


@pytest.mark.parametrize("value", [None, 1, ["hf://a/b"]])
def test_a_source_that_is_not_a_string_is_refused(value):
    assert source_problem(value) is not None


SHAPES_ACCEPTED = [
    "hf://org/name", "hf://name", "hf://org/name@main", "hf://meta-llama/Llama-3.1-8B-Instruct",
    "s3://my-bucket/path/to/weights", "gs://my.bucket/key",
    "oci://registry.example.com/models/llama:3.1", "oci://localhost:5000/llama",
    "oci://ghcr.io/org/model@sha256:" + "a" * 64,
    "file:///models/phi.gguf", "file:///srv/models/llama/",
    "https://weights.example.com/llama.tar", "https://localhost:8443/w", "https://example.com",
]


@pytest.mark.parametrize("source", SHAPES_ACCEPTED)
def test_a_source_of_the_right_shape_for_its_scheme_is_accepted(source):
    assert source_shape_problem(source) is None


SHAPES_REFUSED = {
    "hf-three-segments": "hf://org/name/extra",
    "hf-empty-segment": "hf:///name",
    "hf-bad-char": "hf://org/na%me",
    "s3-no-key": "s3://bucket",
    "s3-no-key-slash": "s3://bucket/",
    "s3-uppercase-bucket": "s3://MyBucket/key",
    "s3-short-bucket": "s3://ab/key",
    "gs-no-key": "gs://bucket",
    "oci-no-repository": "oci://registry.example.com",
    "oci-bad-digest": "oci://registry.example.com/repo@sha256:abc",
    "oci-uppercase-repository": "oci://registry.example.com/Repo",
    "file-relative": "file://models/x",
    "file-dotdot": "file:///models/../etc/passwd",
    "file-dotdot-end": "file:///models/..",
    "https-no-dot-host": "https://weights/x",
    "https-bad-host": "https://exa_mple.com/x",
}


@pytest.mark.parametrize("source", list(SHAPES_REFUSED.values()), ids=list(SHAPES_REFUSED))
def test_a_source_of_the_wrong_shape_for_its_scheme_is_refused(source):
    problem = source_shape_problem(source)
    assert problem is not None
    assert source in problem


def test_the_shape_check_refuses_what_the_scheme_check_refuses():
    assert source_shape_problem("ftp://host/x") == source_problem("ftp://host/x")
