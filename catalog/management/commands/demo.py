"""``manage.py demo``: what ``make run`` needs to show something.

Idempotent, so ``make run`` can call it on every start: the settings file
is imported on the first run, the demo models are added only when missing,
and the ``admin`` login gets a fresh random password each run (printed
here, the only place it is ever shown). Likewise the ``demo-gateway`` is
registered once and gets a fresh token each run, printed only inside the
command that runs the reference gateway receiver for it (``make run``
starts that command).
"""

from __future__ import annotations

import secrets


from ... import selectors
from ...builder import CatalogError
from ...models import Gateway
from ...services import gateways as gateway_services
from ...services import models as model_services
from ...services import users as user_services
from ...services.errors import Refusal
from ..cli import LlmgwCommand, catalog_error_line, one_line, refusals

URL = "http://127.0.0.1:{port}/"
USERNAME = "admin"
GATEWAY = "demo-gateway"
GATEWAY_URL = "http://127.0.0.1:{port}"
GATEWAY_COMMAND = (".venv/bin/python manage.py run_reference_gateway --port {port} --token {token} "
                   "--state-file var/demo-gateway.json")

# A small GPU model that falls back to the example settings' Llama, and a
# CPU-only one, so the Models screen shows fallbacks, used-by and both kinds
# of hardware next to the declared models.
DEMO_MODELS = [
    {
        "name": "demo/tinyllama",
        "description": "Small chat model added at runtime by `manage.py demo`.",
        "engine": "vllm",
        "source": "hf://TinyLlama/TinyLlama-1.1B-Chat-v1.0",
        "profiles": [{"name": "t4", "gpus": 1, "gpu_type": "T4", "gpu_memory_gb": 16, "min_memory_gb": 8}],
        "scaling": {"min": 0, "max": 2},
        "fallbacks": ["llama3"],
    },
    {
        "name": "demo/qwen2.5-0.5b-cpu",
        "description": "Tiny CPU-only model added at runtime by `manage.py demo`.",
        "engine": "llama.cpp",
        "source": "hf://Qwen/Qwen2.5-0.5B-Instruct-GGUF",
        "profiles": [{"name": "cpu", "gpus": 0, "min_memory_gb": 4, "cpu_cores": 4}],
        "scaling": {"min": 1, "max": 1},
        "class": "opportunistic",
    },
]


class Command(LlmgwCommand):
    help = "Prepare the embedded demo: settings imported, demo models, and an admin login."

    def add_arguments(self, parser):
        parser.add_argument("--port", type=int, default=8000, help="the port the console serves on (for the URLs)")
        parser.add_argument("--gateway-port", type=int, default=8001, dest="gateway_port",
                            help="the port the demo gateway's reference receiver listens on")
        self.add_actor_argument(parser)
        self.add_json_argument(parser)

    def handle(self, *args, **options):
        by = self.actor(options)
        url = URL.format(port=options["port"])
        settings = selectors.settings_in_force()
        added, present = self._models(by)
        password = secrets.token_urlsafe(12)
        user_services.add_user(username=USERNAME, role="admin", password=password, by=by)
        gateway_url, gateway_command = self._gateway(options["gateway_port"], by)

        if options["as_json"]:
            self.print_json({"url": url, "username": USERNAME, "password": password,
                             "settings_version": settings.version, "models_added": added,
                             "models_present": present, "gateway": GATEWAY, "gateway_url": gateway_url,
                             "reference_gateway_command": gateway_command})
            return
        out = self.stdout.write
        out(f"llmgw console demo (cluster settings v{settings.version})")
        if added:
            out(f"  added demo models: {', '.join(added)}")
        if present:
            out(f"  demo models already there: {', '.join(present)}")
        out("")
        out(f"  open      {url}")
        out(f"  username  {USERNAME}")
        out(f"  password  {password}   (new on every run of manage.py demo)")
        out(f"  admin     {url}admin/")
        out("")
        out(f"  API token: .venv/bin/python manage.py tokens create {USERNAME}")
        out(f"  then:      curl -H \"Authorization: Bearer $TOKEN\" {url}api/v1/models")
        out("")
        out(f"  gateway   {GATEWAY} at {gateway_url}, with a new token on every run; its receiver")
        out("            (make run starts it) is:")
        out(f"  {gateway_command}")

    def _gateway(self, port: int, by: str) -> tuple[str, str]:
        """Register the demo gateway, or give it a fresh token: the
        previous token was printed and may have been copied anywhere."""
        # Hex: a token starting with '-' would read as an option on the command line.
        token = secrets.token_hex(24)
        url = GATEWAY_URL.format(port=port)
        with refusals(GATEWAY):
            if Gateway.objects.filter(name=GATEWAY).exists():
                gateway_services.update_gateway(name=GATEWAY, changes={"token": token, "url": url}, by=by)
            else:
                gateway_services.register_gateway(name=GATEWAY, url=url, token=token, by=by)
        return url, GATEWAY_COMMAND.format(port=port, token=token)

    def _models(self, by: str) -> tuple[list[str], list[str]]:
        added, present = [], []
        for definition in DEMO_MODELS:
            state = selectors.in_force()
            name = definition["name"]
            if state.catalog.resolve(name) is not None:
                present.append(name)
                continue
            definition = dict(definition)
            # Another settings file may not declare the fallback target.
            definition["fallbacks"] = [f for f in definition.get("fallbacks", []) if state.catalog.resolve(f)]
            try:
                model_services.add_model(definition=definition, by=by)
            except CatalogError as exc:
                self.stderr.write(f"demo model {name} not added: {catalog_error_line(exc, name)}")
            except Refusal as exc:
                self.stderr.write(f"demo model {name} not added: {one_line(exc.message)}")
            else:
                added.append(name)
        return added, present
