"""The pure policy engine: CEL compilation and evaluation, the score pipeline, policy documents.

Imports neither Django nor kubernetes (a test enforces it); inputs are plain data (pod and node
views), outputs plain dataclasses and lists. One evaluator serves the browser preview, the REST
preview, the `evaluate` command and the extender.
"""
