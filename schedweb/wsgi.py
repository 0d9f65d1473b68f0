"""WSGI entry point, for those who deploy with a WSGI server: plain Django.

WSGI deployments serve the pages and the API; the extender (POST /extender/<verb>) has its own
listener only (schedweb.asgi:extender_application, python -m schedweb.extender_server).
"""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "schedweb.settings")
application = get_wsgi_application()
