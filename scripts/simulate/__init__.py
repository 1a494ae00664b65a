"""Replay a serving trace through the gate's own policy against an in-memory fleet."""
