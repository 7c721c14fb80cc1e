"""Starts MiniStack as its own `ministack` command does, with one fix: TCP_NODELAY on the
Lambda Runtime API server it runs for each function.

Without it, every invocation of a Go (provided.al2023) function stalls about 40 ms: MiniStack's
Runtime API answers `/next` in more than one small write, and Nagle's algorithm holds the
second until the function's delayed ACK arrives. With it, a warm invocation takes about 10 ms
instead of about 50 on this project's machine. The fix touches only the socket option of that
handler class (http.server's own `disable_nagle_algorithm`); nothing else of MiniStack changes.
Set MINISTACK_STOCK=1 to start it unmodified (to compare), or when a MiniStack version no
longer has the hook this wraps (a warning says so and MiniStack starts unmodified).
"""

import os
import sys

from ministack.app import main
from ministack.core import lambda_runtime


def _with_nodelay():
    worker = getattr(lambda_runtime, "ProvidedWorker", None)
    build = getattr(worker, "_build_handler_class", None)
    if build is None:
        print("localstack/emulator.py: this MiniStack has no ProvidedWorker._build_handler_class; "
              "starting it unmodified", file=sys.stderr)
        return

    def build_with_nodelay(self, *args, **kwargs):
        handler = build(self, *args, **kwargs)
        handler.disable_nagle_algorithm = True
        return handler

    worker._build_handler_class = build_with_nodelay
    print("localstack/emulator.py: TCP_NODELAY on the Lambda Runtime API", file=sys.stderr)


if __name__ == "__main__":
    if os.environ.get("MINISTACK_STOCK") != "1":
        _with_nodelay()
    sys.exit(main())
