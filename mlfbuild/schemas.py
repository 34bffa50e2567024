"""The name and version of every JSON document mlfbuild prints or writes (see docs/json.md).

A document's "schema" is "<name>/<version>"; the version goes up when a key is removed or changes
meaning (new keys do not change it).
"""

from __future__ import annotations

INSPECT = "mlfbuild-inspect/1"      # mlfbuild inspect --json
BOARDS = "mlfbuild-boards/1"        # mlfbuild boards --json
PORTS = "mlfbuild-ports/1"          # mlfbuild ports --json
RUN = "mlfbuild-run/1"              # mlfbuild run --json, OUT/run.json
SIZE = "mlfbuild-size/1"            # mlfbuild size --json, OUT/size.json (a --diff base)
SIZE_DIFF = "mlfbuild-size-diff/1"  # mlfbuild size --diff BASE.json --json
EXPORT = "mlfbuild-export/1"        # mlfbuild export --json, DIR/mlfbuild-export.json
IMPORT = "mlfbuild-import/1"        # mlfbuild import --json
