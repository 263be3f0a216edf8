"""Run a synprep command on a disk that is full for some files: `python tests/enospc.py GLOB ARGS...` runs
`synprep ARGS...` where every fsync of a file whose path matches GLOB fails with ENOSPC, as on a full disk
(synprep's writers fsync each file before renaming it into place, so the failure comes at the real write)."""

from __future__ import annotations

import errno
import fnmatch
import os
import sys

_FSYNC = os.fsync
_PATTERN = ""


def _full_fsync(fd: int) -> None:
    if fnmatch.fnmatch(os.readlink(f"/proc/self/fd/{fd}"), _PATTERN):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    _FSYNC(fd)


if __name__ == "__main__":
    _PATTERN = sys.argv[1]
    sys.argv = ["synprep", *sys.argv[2:]]
    os.fsync = _full_fsync
    from synprep.cli import main

    main()
