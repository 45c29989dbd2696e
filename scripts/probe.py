#!/usr/bin/env python3
"""Exit 0 if something accepts a TCP connection on HOST PORT, else 1.

Used by `make test` to decide whether the PostgreSQL/Redis-backed tests can
run here. Standard library only: it runs before the virtualenv exists.
"""

import socket
import sys


def answers(host, port, timeout=0.5):
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def main(argv):
    if len(argv) != 3:
        print("usage: probe.py HOST PORT", file=sys.stderr)
        return 2
    try:
        port = int(argv[2])
    except ValueError:
        print(f"probe.py: PORT must be a number, got {argv[2]!r}", file=sys.stderr)
        return 2
    return 0 if answers(argv[1], port) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
