"""The pool as people see it: the read model, its Kubernetes reader, usage, and the operator metrics."""
