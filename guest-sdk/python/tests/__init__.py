"""Native unit tests of the Python guest SDK (python -m unittest discover -s guest-sdk/python/tests)."""
