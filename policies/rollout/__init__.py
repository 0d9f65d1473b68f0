"""Rollout beside the active version (issue 25): a shadow version judged after every answer.

`services.py` promotes or discards a shadow (publishing one is `policies.services.policy_publish`
with `shadow=True`: the publish path, its gate and its confirmation) and adds the model's
kube-scheduler pick under both versions to recent records (a beat task, off the extender);
`selectors.py` reads the shadow records (policies.models.Decision, role `shadow`) for the report
and the dashboard; `records.py` is what of a queued record the decisions store keeps. The
extender's side, evaluating the shadow off the answer's critical path, is
`policies/extender/shadow.py`. A canary (another role of the activation) decides a share of the
pods: `split.py` says which version judges a pod, `guard.py` whether the canary is worse than the
stable version, `canary.py` its rollout, promote, abort and the worker's guard pass; the
extender's counts are `policies/extender/canary.py`.
"""
