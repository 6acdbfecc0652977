"""Where the test material lives, named once: ``../shared`` (the steering material beside the repository), this
repository's root, and the project's own fixtures and case tables."""
from pathlib import Path

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
SHARED = REPO.parent / "shared"
FIXTURES = TESTS / "fixtures"
CASES = TESTS / "cases"
