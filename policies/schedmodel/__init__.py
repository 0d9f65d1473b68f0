"""A model of kube-scheduler v1.35's default profile over the engine's pod and node views.

Pure like the engine (standard library, `yaml` and `policies.engine` only): the preview runs it
around the policy so that it shows what the stock kube-scheduler will do with the extender -
its own filters, the policy's filter over the nodes that pass them, its own scores, the
extender's 0-10 score times the extender weight times 10, the total and the tie group it picks
from at random. Formulas follow pkg/scheduler/framework/plugins/ of kubernetes v1.35.8.
"""
