"""The one door every input comes in by: files, streams and HTTP answers, each read within bounds.

Size (per kind), text encoding, YAML aliases, duplicate keys and nesting, CSV fields and rows, and an
HTTP answer's total time and bytes are checked here, before anything is parsed or believed; what is
wrong is one `InputError` naming the file or URL. Nothing outside this package calls a YAML loader,
`csv.reader`, `json.load` on a file, or an HTTP client (tests/unit/test_inputs_only_door.py).
It imports only the standard library and PyYAML, so every layer above may use it.
"""
