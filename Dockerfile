# schedweb image: web (uvicorn), the extender, the Celery worker and beat and the migrations Job all
# run from it (docker-compose.yml, deploy/helm/schedweb). Only the product's sources are copied
# (.dockerignore lets nothing else into the build context); they stay owned by root, so the
# runtime user cannot change the code it runs.
FROM python:3.11-slim-bookworm
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
WORKDIR /app
COPY requirements.txt .
RUN pip install -r requirements.txt
COPY manage.py .
COPY schedweb schedweb
COPY policies policies
COPY templates templates
COPY static static
RUN SCHEDWEB_SECRET_KEY=build-only python manage.py collectstatic --noinput -v0
RUN useradd --system --uid 10001 --no-create-home schedweb
USER schedweb
EXPOSE 8000
CMD ["uvicorn", "schedweb.asgi:application", "--host", "0.0.0.0", "--port", "8000", "--workers", "2", "--loop", "uvloop", "--http", "schedweb.http_timeouts:TimedHttpToolsProtocol"]
