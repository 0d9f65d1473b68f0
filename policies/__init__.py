"""The schedweb app: policies, their versions, previews, the cluster boundary and the extender."""
