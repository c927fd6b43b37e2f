"""The browser tier as a package, so that its package-scoped fixtures (tests/e2e/conftest.py) end with its last test."""
