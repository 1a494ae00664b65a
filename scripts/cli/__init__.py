"""The `offhours` command line: main wires the parser; one module per verb, each with register(subparsers)."""
