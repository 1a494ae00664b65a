"""Reading the gate configuration from its YAML file into the policy's types."""
