"""Backtest (issue 25, item 4): before publishing, a document over the pods of the last N
recorded extender decisions and the pending pods, against the current cluster, listing what
would differ from what happened.

`run.py` gathers the pods and judges each with the scheduler model (kube-scheduler's pick, the
product's one answer) under the installation's CEL budget and a total time cap; `jobs.py` runs
a large backtest as a Celery task with progress (the job bookkeeping of policies/preview_jobs.py)
and a small one in the request.
"""
