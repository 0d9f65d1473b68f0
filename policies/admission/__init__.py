"""schedweb's mutating admission webhook: a policy's queue key becomes the pod's priority."""
