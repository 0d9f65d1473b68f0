# schedweb image: web (uvicorn), Celery worker and beat all run from it (docker-compose.yml).
FROM python:3.11-slim-bookworm
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
WORKDIR /app
COPY requirements.txt .
RUN pip install -r requirements.txt
COPY . .
RUN SCHEDWEB_SECRET_KEY=build-only python manage.py collectstatic --noinput -v0
RUN useradd --system --uid 10001 schedweb && chown -R schedweb /app
USER schedweb
EXPOSE 8000
CMD ["uvicorn", "schedweb.asgi:application", "--host", "0.0.0.0", "--port", "8000", "--workers", "2", "--loop", "uvloop", "--http", "schedweb.http_timeouts:TimedHttpToolsProtocol"]
