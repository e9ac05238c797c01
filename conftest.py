"""Settings for every suite in this repository: the core's ``tests/``, each plugin's ``plugins/<name>/tests/`` and
the conformance kit. The compiler's checks of its own stages (``UOPS_SPEC``, off in release runs) are on for
every test and every subprocess a test starts.
"""

from __future__ import annotations

import os

os.environ.setdefault("UOPS_SPEC", "1")
