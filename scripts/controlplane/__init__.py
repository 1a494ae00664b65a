"""The local control plane: cluster.py (up/down/env), build.sh, the local pod runner."""
