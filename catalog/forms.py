"""Console forms: they turn what a person typed into what a service takes,
and the builder's problems back into errors on the fields that caused them.

No catalog rule lives here: a form only parses (a number is a number, a
list is comma-separated) and maps field paths.
"""

from __future__ import annotations

import yaml
from django import forms

from .builder import CLASSES, CatalogError
from .services import models as model_services
from .services.errors import Refusal

CLASS_CHOICES = [("", "— from scaling —"), *[(c, c) for c in CLASSES]]


def split_list(text: str) -> list[str]:
    """Names typed with commas, spaces or one per line."""
    return [part for part in text.replace(",", " ").split() if part]


class CatalogForm(forms.Form):
    """A form whose errors can come from the builder.

    ``paths`` maps a builder field path (or its first part) to the form
    field it belongs on; a problem of another model, or of a path no field
    covers, goes to the top of the form with its model and path named.
    """

    paths: dict[str, str] = {}
    template_name = "catalog/partials/_form.html"

    def field_for(self, path: str) -> str | None:
        parts = path.split(".")
        for cut in range(len(parts), 0, -1):
            field = self.paths.get(".".join(parts[:cut]))
            if field:
                return field
        return parts[0] if parts[0] in self.fields else None

    def submit(self, action, subject: str | None = None):
        """Call a service; what it refuses becomes this form's errors.
        Returns what the service returned, or None when it refused."""
        try:
            return action()
        except CatalogError as exc:
            self.add_catalog_error(exc, subject)
        except Refusal as exc:
            self.add_error(None, exc.message)
        return None

    def add_catalog_error(self, exc: CatalogError, subject: str | None) -> None:
        for p in exc.problems:
            other = p.model and subject and p.model != subject and not p.model.startswith("#")
            field = None if other else self.field_for(p.path)
            message = p.message
            if other:
                message = f"model {p.model!r}: {p.path + ': ' if p.path else ''}{message}"
            elif field and p.path and field != p.path and "." in p.path:
                message = f"{p.path}: {message}"
            self.add_error(field, message)


def _origin(data: dict) -> dict | None:
    origin = {key: data.get(f"origin_{key}") or "" for key in ("repo", "revision", "digest", "fetched_at")}
    return origin if any(origin.values()) else None


def _adapters(text: str) -> list[dict]:
    """One adapter a line: ``NAME SOURCE``."""
    adapters = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 2:
            raise forms.ValidationError(f"line {number}: write each adapter as NAME SOURCE")
        adapters.append({"name": parts[0], "source": parts[1]})
    return adapters


class ModelForm(CatalogForm):
    """Add a runtime model, field by field. Fields left empty take the
    cluster's defaults."""

    name = forms.CharField(max_length=200, help_text="letters, digits and . _ : / -, e.g. org/Model-7B or model:tag")
    aliases = forms.CharField(required=False, help_text="other names, separated by commas")
    description = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))
    engine = forms.ChoiceField(required=False)
    source = forms.CharField(help_text="hf://ORG/NAME, s3://BUCKET/KEY, gs://, oci://, file:///PATH, https://")
    origin_repo = forms.CharField(required=False, label="Origin repository")
    origin_revision = forms.CharField(required=False, label="Origin revision")
    origin_digest = forms.CharField(required=False, label="Origin digest")
    profiles = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3}),
                               help_text="YAML list, e.g. [{name: a100, gpus: 1, gpu_type: A100}]; "
                                         "empty: one GPU. gpus: 0 needs min_memory_gb")
    adapters = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}),
                               help_text="LoRA adapters, one per line: NAME SOURCE")
    scaling_min = forms.IntegerField(required=False, label="Replicas at least")
    scaling_max = forms.IntegerField(required=False, label="Replicas at most")
    klass = forms.ChoiceField(required=False, choices=CLASS_CHOICES, label="Class")
    owner = forms.CharField(required=False, help_text="empty (shared), org:ID, team:ID or project:ID")
    fallbacks = forms.CharField(required=False, help_text="models to fall back to, in order, separated by commas")
    canary_model = forms.CharField(required=False, label="Canary model")
    canary_percent = forms.IntegerField(required=False, label="Canary percent")
    eval_suite = forms.CharField(required=False, label="Eval suite")
    eval_min_score = forms.FloatField(required=False, label="Eval minimum score")

    paths = {"origin": "origin_repo", "scaling.min": "scaling_min", "scaling.max": "scaling_max",
             "scaling": "scaling_max", "class": "klass", "canary.model": "canary_model",
             "canary.percent": "canary_percent", "canary": "canary_model", "eval.suite": "eval_suite",
             "eval.min_score": "eval_min_score", "eval": "eval_suite"}

    def __init__(self, *args, engines=(), default_engine="", **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["engine"].choices = [("", f"— default ({default_engine}) —"), *[(e, e) for e in engines]]

    def clean_profiles(self):
        text = self.cleaned_data["profiles"].strip()
        if not text:
            return None
        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise forms.ValidationError(f"not valid YAML: {exc}") from None

    def clean_adapters(self):
        return _adapters(self.cleaned_data["adapters"])

    def definition(self) -> dict:
        """The definition as given: what was left empty is left out, so the
        defaults apply (and keep applying when they change)."""
        data = self.cleaned_data
        definition: dict = {"name": data["name"], "source": data["source"]}
        optional = {
            "aliases": split_list(data["aliases"]),
            "description": data["description"],
            "engine": data["engine"],
            "origin": _origin(data),
            "profiles": data["profiles"],
            "adapters": data["adapters"],
            "class": data["klass"],
            "owner": data["owner"],
            "fallbacks": split_list(data["fallbacks"]),
        }
        definition.update({k: v for k, v in optional.items() if v not in (None, "", [])})
        if data["scaling_min"] is not None or data["scaling_max"] is not None:
            definition["scaling"] = {k: v for k, v in (("min", data["scaling_min"]), ("max", data["scaling_max"]))
                                     if v is not None}
        if data["canary_model"] or data["canary_percent"] is not None:
            definition["canary"] = {"model": data["canary_model"], "percent": data["canary_percent"]}
        if data["eval_suite"] or data["eval_min_score"] is not None:
            definition["eval"] = {"suite": data["eval_suite"], "min_score": data["eval_min_score"]}
        return definition


class ModelDocumentForm(CatalogForm):
    """Add a runtime model by pasting its definition as YAML or JSON."""

    document = forms.CharField(widget=forms.Textarea(attrs={"rows": 14, "spellcheck": "false"}),
                               help_text="the model's fields as YAML or JSON (SPEC §2.2)")

    def field_for(self, path: str) -> str | None:
        return "document"

    def add_catalog_error(self, exc: CatalogError, subject: str | None) -> None:
        for p in exc.problems:
            other = p.model and subject and p.model != subject and not p.model.startswith("#")
            where = ": ".join(x for x in (f"model {p.model!r}" if other else "", p.path) if x)
            self.add_error("document", f"{where}: {p.message}" if where else p.message)

    def clean_document(self):
        try:
            value = yaml.safe_load(self.cleaned_data["document"])
        except yaml.YAMLError as exc:
            raise forms.ValidationError(f"not valid YAML or JSON: {exc}") from None
        if not isinstance(value, dict):
            raise forms.ValidationError("the definition must be a mapping of fields")
        return value

    def definition(self) -> dict:
        return self.cleaned_data["document"]


# --- one form per operation on a runtime model -----------------------------

class OperationForm(CatalogForm):
    """An operation on one runtime model; ``apply`` calls its service."""

    title = ""
    op = ""
    button = "Save"

    def __init__(self, *args, model: dict, **kwargs):
        self.model = model
        super().__init__(*args, **kwargs)

    def apply(self, *, by: str) -> dict:
        raise NotImplementedError


class ScaleForm(OperationForm):
    title, op, button = "Scaling", "scale", "Save scaling"
    min = forms.IntegerField(label="Replicas at least")
    max = forms.IntegerField(label="Replicas at most")
    paths = {"scaling.min": "min", "scaling.max": "max", "scaling": "max"}

    @staticmethod
    def initial_from(model):
        return {"min": model["scaling"]["min"], "max": model["scaling"]["max"]}

    def apply(self, *, by):
        return model_services.scale_model(name=self.model["name"], min=self.cleaned_data["min"],
                                          max=self.cleaned_data["max"], by=by)


class ResourcesForm(OperationForm):
    title, op, button = "Host resources", "resources", "Save resources"
    profile = forms.ChoiceField(required=False, help_text="every profile when none is chosen")
    min_memory_gb = forms.IntegerField(label="Host memory (GB)")
    cpu_cores = forms.IntegerField(label="CPU cores")

    def __init__(self, *args, model: dict, **kwargs):
        super().__init__(*args, model=model, **kwargs)
        self.fields["profile"].choices = [("", "— every profile —"), *[(p["name"], p["name"])
                                                                      for p in model["profiles"]]]

    @staticmethod
    def initial_from(model):
        first = model["profiles"][0] if model["profiles"] else {}
        return {"min_memory_gb": first.get("min_memory_gb", 0), "cpu_cores": first.get("cpu_cores", 0)}

    def apply(self, *, by):
        data = self.cleaned_data
        return model_services.set_resources(name=self.model["name"], profile=data["profile"] or None,
                                            min_memory_gb=data["min_memory_gb"], cpu_cores=data["cpu_cores"], by=by)


class ClassForm(OperationForm):
    title, op, button = "Class", "class", "Save class"
    klass = forms.ChoiceField(required=False, choices=CLASS_CHOICES, label="Class")
    paths = {"class": "klass"}

    @staticmethod
    def initial_from(model):
        return {"klass": model["class"]}

    def apply(self, *, by):
        return model_services.set_class(name=self.model["name"], cls=self.cleaned_data["klass"], by=by)


class OwnerForm(OperationForm):
    title, op, button = "Owner", "owner", "Save owner"
    owner = forms.CharField(required=False, help_text="empty (shared), org:ID, team:ID or project:ID")

    @staticmethod
    def initial_from(model):
        return {"owner": model["owner"]}

    def apply(self, *, by):
        return model_services.set_owner(name=self.model["name"], owner=self.cleaned_data["owner"], by=by)


class AdaptersForm(OperationForm):
    title, op, button = "LoRA adapters", "adapters", "Save adapters"
    adapters = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3}),
                               help_text="one per line: NAME SOURCE")

    @staticmethod
    def initial_from(model):
        return {"adapters": "\n".join(f"{a['name']} {a['source']}" for a in model["adapters"])}

    def clean_adapters(self):
        return _adapters(self.cleaned_data["adapters"])

    def apply(self, *, by):
        return model_services.set_adapters(name=self.model["name"], adapters=self.cleaned_data["adapters"], by=by)


class SourceForm(OperationForm):
    title, op, button = "Weights source and origin", "source", "Save source"
    source = forms.CharField()
    origin_repo = forms.CharField(required=False, label="Origin repository")
    origin_revision = forms.CharField(required=False, label="Origin revision")
    origin_digest = forms.CharField(required=False, label="Origin digest")
    origin_fetched_at = forms.CharField(required=False, label="Fetched at")
    paths = {"origin": "origin_repo", "origin.repo": "origin_repo", "origin.revision": "origin_revision",
             "origin.digest": "origin_digest", "origin.fetched_at": "origin_fetched_at"}

    @staticmethod
    def initial_from(model):
        origin = model.get("origin") or {}
        return {"source": model["source"], **{f"origin_{k}": v for k, v in origin.items()}}

    def apply(self, *, by):
        return model_services.set_source(name=self.model["name"], source=self.cleaned_data["source"],
                                         origin=_origin(self.cleaned_data), by=by)


class CanaryForm(OperationForm):
    title, op, button = "Canary", "canary", "Save canary"
    canary_model = forms.CharField(required=False, label="Candidate model")
    percent = forms.IntegerField(required=False, help_text="share of traffic, 1 to 99")
    paths = {"canary.model": "canary_model", "canary.percent": "percent", "canary": "canary_model"}

    @staticmethod
    def initial_from(model):
        canary = model.get("canary") or {}
        return {"canary_model": canary.get("model", ""), "percent": canary.get("percent")}

    def apply(self, *, by):
        data = self.cleaned_data
        canary = None if not data["canary_model"] and data["percent"] is None else \
            {"model": data["canary_model"], "percent": data["percent"]}
        return model_services.set_canary(name=self.model["name"], canary=canary, by=by)


class EvalForm(OperationForm):
    title, op, button = "Eval gate", "eval", "Save eval gate"
    suite = forms.CharField(required=False, help_text="empty removes the gate")
    min_score = forms.FloatField(required=False, help_text="0.0 to 1.0")
    paths = {"eval.suite": "suite", "eval.min_score": "min_score", "eval": "suite"}

    @staticmethod
    def initial_from(model):
        gate = model.get("eval") or {}
        return {"suite": gate.get("suite", ""), "min_score": gate.get("min_score")}

    def apply(self, *, by):
        data = self.cleaned_data
        gate = None if not data["suite"] and data["min_score"] is None else \
            {"suite": data["suite"], "min_score": data["min_score"]}
        return model_services.set_eval(name=self.model["name"], gate=gate, by=by)


class FallbacksForm(OperationForm):
    title, op, button = "Fallbacks", "fallbacks", "Save fallbacks"
    fallbacks = forms.CharField(required=False, help_text="in order, separated by commas; empty for none")

    @staticmethod
    def initial_from(model):
        return {"fallbacks": ", ".join(model["fallbacks"])}

    def apply(self, *, by):
        return model_services.set_fallbacks(name=self.model["name"],
                                            fallbacks=split_list(self.cleaned_data["fallbacks"]), by=by)


OPERATIONS = {form.op: form for form in (ScaleForm, ResourcesForm, ClassForm, OwnerForm, AdaptersForm, SourceForm,
                                         CanaryForm, EvalForm, FallbacksForm)}
