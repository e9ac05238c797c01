"""The conformance kit's test modules: each one checks one part of the backend contract on ``device``."""
