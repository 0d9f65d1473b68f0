"""Server-rendered pages of schedweb (Django templates + htmx).

policy_views: the policies list, the playground with its live preview, versions, diff, test cases;
preview: evaluation results shaped for the playground's fragments; markers: validation and
evaluation errors as editor markers; jobs: the Celery-backed preview of all pending pods.
"""
