"""Test settings: the product's settings with the development switch turned on explicitly.

The product's default is DEBUG off (schedweb/settings.py). The tests ask for the development
defaults (the dev secret key, static files served from static/ without collectstatic);
pytest-django still runs each test with DEBUG off, and the gallery tests turn it on themselves.
"""

import os

os.environ.setdefault("SCHEDWEB_DEBUG", "1")

from schedweb.settings import *  # noqa: F403
