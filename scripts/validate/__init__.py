"""`offhours validate`: check Argo manifests against the v4.0.5 CRD schemas and a lint of references."""

from offhours.scripts.validate.runner import load_documents, validate_documents, validate_paths

__all__ = ["load_documents", "validate_documents", "validate_paths"]
