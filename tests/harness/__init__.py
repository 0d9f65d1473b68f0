"""Test infrastructure: a real etcd + kube-apiserver (+ kube-scheduler) on 127.0.0.1.

The Go module here builds the stock binaries (scripts/k8s-binaries.sh); `controlplane` runs them,
`resources` writes nodes and pods, `fixtures` is the pytest plugin with the `control_plane` fixture.
"""
