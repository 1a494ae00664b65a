"""The local control plane: lifecycle.py (up/down/env), build.sh, the local pod runner."""
