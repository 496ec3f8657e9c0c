"""Systems under test as adapters (issue 29): one package per system under ``systems/<name>/``."""
