"""Starts MiniStack with a clock a test moves: time.time() is the real time plus an offset,
which the test advances by writing "advance <seconds>" lines to this process's stdin; each is
acknowledged with "ok <offset>" on file descriptor 3. Closing stdin stops the emulator.

MiniStack's SQS and SNS read time.time() for their FIFO deduplication windows (and for message
timers), so advancing the offset past 5 minutes is, to them, 5 minutes passing. The patch is
installed before MiniStack is imported, so a module that binds time.time at import binds it too.
"""

import os
import sys
import threading
import time

_real = time.time
_offset = [0.0]


def _shifted():
    return _real() + _offset[0]


def _shifted_ns():
    return int(_shifted() * 1e9)


time.time = _shifted
time.time_ns = _shifted_ns


def _control():
    ack = os.fdopen(3, "w")
    for line in sys.stdin:
        cmd, _, arg = line.strip().partition(" ")
        if cmd == "advance":
            _offset[0] += float(arg)
            ack.write("ok %s\n" % _offset[0])
            ack.flush()
    os._exit(0)  # stdin closed: the test is done with this emulator


threading.Thread(target=_control, daemon=True).start()

from ministack.app import main  # noqa: E402  (after the clock is installed)

sys.exit(main())
