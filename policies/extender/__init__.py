"""The scheduler-extender endpoint: kube-scheduler's hot path, answered from process memory."""
