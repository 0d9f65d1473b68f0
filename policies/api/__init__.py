"""The REST API under /api/v1/ (Django REST framework): thin classes, one per operation."""
