"""The Celery app: `celery -A llmgw_console worker` / `beat` find it here.

All configuration lives in Django settings under the CELERY_ prefix, so the
worker and the web process can never disagree about the broker.
"""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "llmgw_console.settings")

app = Celery("llmgw_console")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
