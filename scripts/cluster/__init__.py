"""Adapters to Kubernetes and Argo: one interface, an in-memory and a real implementation."""
