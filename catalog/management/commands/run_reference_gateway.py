"""manage.py run_reference_gateway --port P --token T [--state-file F]"""

from django.core.management.base import BaseCommand, CommandError

from ...reference_gateway import ReferenceGateway


class Command(BaseCommand):
    help = "Serve the reference gateway receiver: the gateway side of the catalog protocol."

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, required=True)
        parser.add_argument("--token", required=True, help="the bearer token the console must send")
        parser.add_argument("--state-file", help="where the applied catalog is kept across restarts")

    def handle(self, *args, host, port, token, state_file, **options):
        if len(token) < 16:
            raise CommandError("refused: --token must be at least 16 characters")
        gateway = ReferenceGateway(token, state_file)
        try:
            server = gateway.server(host, port)
        except OSError as exc:
            raise CommandError(f"refused: cannot listen on {host}:{port}: {exc}") from None
        self.stdout.write(f"reference gateway on http://{host}:{server.server_address[1]} "
                          f"(applied version {gateway.version})")
        self.stdout.flush()
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()
