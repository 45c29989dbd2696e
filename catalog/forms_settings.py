"""Forms of the Settings, Gateways and Tokens screens.

Like ``forms.py``: a form parses what was typed (YAML is YAML, a version
is a number) and puts the service's problems on the fields they are about;
every rule stays in the builder and the services.
"""

from __future__ import annotations

import yaml
from django import forms

from .builder import CatalogError
from .forms import CatalogForm


def yaml_text(value) -> str:
    """A value as an operator would write it in the settings file.

    PyYAML ends a lone scalar with an explicit document end (``...``),
    which would show up in a page or an editor as part of the value.
    """
    text = yaml.safe_dump(value, sort_keys=False, default_flow_style=False, allow_unicode=True)
    if text.endswith("\n...\n"):
        text = text[: -len("...\n")]
    return text.strip()


class IdsMixin:
    """Ids of its own per form, so two forms on one page never share an id
    (labels, browser tests and keyboard focus rely on them)."""

    auto_id_format = "id_%s"

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("auto_id", self.auto_id_format)
        super().__init__(*args, **kwargs)


def problem_line(path: str, message: str) -> str:
    # The builder's messages often name their key already; say it only when not.
    return message if not path or path in message else f"{path}: {message}"


class SettingsDocumentForm(IdsMixin, CatalogForm):
    """The whole cluster settings document, edited as YAML."""

    auto_id_format = "editor-%s"

    document = forms.CharField(
        label="Cluster settings (YAML)", strip=False,
        widget=forms.Textarea(attrs={"rows": 24, "spellcheck": "false", "autocomplete": "off", "wrap": "off",
                                     "autocapitalize": "off", "class": "code"}),
        help_text="every cluster key; peer tokens show as ******** and are kept unless you type a new one")
    comment = forms.CharField(label="Comment", required=False, max_length=2000,
                              help_text="why, for the history")
    base_version = forms.IntegerField(widget=forms.HiddenInput, min_value=1)

    def clean_document(self):
        text = self.cleaned_data["document"]
        try:
            value = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise forms.ValidationError(f"not valid YAML: {exc}") from None
        if not isinstance(value, dict):
            raise forms.ValidationError("the settings document must be a mapping of keys")
        return value

    def add_catalog_error(self, exc: CatalogError, subject: str | None = None) -> None:
        for p in exc.problems:
            self.add_error("document", problem_line(p.path, p.message))


class SettingsKeyForm(IdsMixin, CatalogForm):
    """One dotted key, set to a YAML value or unset."""

    auto_id_format = "setting-%s"

    key = forms.CharField(label="Key", max_length=300,
                          help_text="dotted, list items by index: defaults.scaling.max, models.0.scaling.min")
    value = forms.CharField(label="Value (YAML)", required=False, strip=False,
                            widget=forms.Textarea(attrs={"rows": 4, "spellcheck": "false", "class": "code"}),
                            help_text="e.g. 4, vllm, [vllm, sglang] or {min: 1, max: 3}; not needed to unset")
    comment = forms.CharField(label="Comment", required=False, max_length=2000)
    base_version = forms.IntegerField(widget=forms.HiddenInput, min_value=1)

    def clean(self):
        """Which button was pressed (``action`` = set or unset) is part of what was asked."""
        data = super().clean()
        data["action"] = self.data.get("action")
        if data["action"] not in ("set", "unset"):
            raise forms.ValidationError("press Set or Unset")
        if data["action"] == "set":
            text = data.get("value", "")
            if not text.strip():
                self.add_error("value", "give the value to set, as YAML (null for an empty value)")
            else:
                try:
                    data["parsed_value"] = yaml.safe_load(text)
                except yaml.YAMLError as exc:
                    self.add_error("value", f"not valid YAML: {exc}")
        return data

    def add_catalog_error(self, exc: CatalogError, subject: str | None = None) -> None:
        """A problem with the key itself goes on the key; one with what the
        value makes of the document goes on the value, or above the form
        when it is about another key."""
        key = self.cleaned_data.get("key", "")
        for p in exc.problems:
            if p.path == "key":
                self.add_error("key", p.message)
            elif p.path == key or p.path.startswith(f"{key}.") or key.startswith(f"{p.path}."):
                self.add_error("value", problem_line(p.path, p.message))
            else:
                self.add_error(None, problem_line(p.path, p.message))


class RollbackForm(IdsMixin, forms.Form):
    auto_id_format = "rollback-%s"

    comment = forms.CharField(label="Comment", required=False, max_length=2000)
    base_version = forms.IntegerField(widget=forms.HiddenInput, min_value=1)


class GatewayForm(IdsMixin, CatalogForm):
    """Register a gateway. The token is the shared secret the gateway
    accepts: typed once, never shown back, not even after an error."""

    auto_id_format = "gateway-%s"

    name = forms.CharField(label="Name", max_length=100, help_text="a-z, 0-9, '.', '_' and '-'")
    url = forms.CharField(label="Base URL", max_length=500, help_text="http(s)://HOST[:PORT][/PATH]")
    token = forms.CharField(label="Token", max_length=500, strip=False,
                            widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
                            help_text="the secret the gateway accepts, 16 to 500 characters")
    enabled = forms.BooleanField(label="Enabled", required=False, initial=True)


class TokenForm(IdsMixin, forms.Form):
    auto_id_format = "token-%s"

    name = forms.CharField(label="Token name", required=False, max_length=100,
                           help_text="what it is for, e.g. ci-deploy")
