"""The core's tests, one package per layer of ``core/uops`` (see docs/internals.md, "Tests").

A package, so a test module reaches a helper in another folder by its full name
(``from tests.frontend.test_fuzz import programs``) whichever folder pytest was started on.
"""

from pathlib import Path

#: the repository's root: the README, docs/, examples/ and bench/ that tests read
REPO = Path(__file__).resolve().parent.parent
