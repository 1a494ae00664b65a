"""What runs inside research pods: the parameter kinds and their check, the checkpoint library."""
