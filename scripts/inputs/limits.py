"""Every bound of the input layer, by kind of input; each says why it is that big.

A bound is far above any honest input of its kind and far below what would cost the reader its
memory or its deadline: an input past it is refused, never read in part.
"""

MIB = 1024 * 1024

# Sizes, per kind of input.
CONFIG_BYTES = 1 * MIB  # a gate configuration is a few KiB; a ConfigMap holds at most 1 MiB
MANIFEST_BYTES = 32 * MIB  # etcd keeps objects under 1.5 MiB; a file of many is still far below this
FLEET_BYTES = 8 * MIB  # a fleet or jobs file for the simulator: hundreds of services or jobs are ~100 KiB
KUBECONFIG_BYTES = 4 * MIB  # certificates inline for dozens of clusters are ~100 KiB
TRACE_BYTES = 128 * MIB  # a per-minute trace row is ~30 B: a year of minutes is ~16 MiB
METRICS_PAGE_BYTES = 16 * MIB  # a vLLM /metrics page is ~16 KiB; anything this big is not one
PROMETHEUS_ANSWER_BYTES = 64 * MIB  # a range query of 11,000 points is ~300 KiB per series
FORM_BYTES = 1 * MIB  # a console form: a token or a job's parameters; Argo keeps a whole workflow in one etcd object

# A pipe or a device named as a file (`<(kubectl get ...)`, /dev/stdin) must end within this: a
# regular file is bounded by its size, a stream that trickles by time.
FILE_READ_SECONDS = 60.0

# YAML (and JSON) documents.
MAX_DEPTH = 64  # Kubernetes manifests nest ~20 deep; the parsers' own recursion gives out near 1,000
YAML_MAX_ALIAS_NODES = 100_000  # nodes that aliases may add beyond the written ones ("billion laughs")

# CSV (traces).
CSV_MAX_FIELD_CHARS = 1024  # a trace's cells are numbers; the csv module's own limit is 128 KiB
CSV_MAX_COLUMNS = 64  # a trace has 4
TRACE_MAX_ROWS = 2 * 366 * 1440  # two years of minutes: the longest history a replay reads

# HTTP answers: a total deadline for the whole answer is the caller's (its timeout); these are the rest.
HTTP_HEADER_BYTES = 64 * 1024  # an answer's status line and headers are far below this

# Files of the package itself (schemas, the bundled traces, the example configuration) and of the pod.
PACKAGE_DATA_BYTES = 64 * MIB  # the largest, a bundled trace, is ~650 KiB; Argo's CRD schemas gzipped ~200 KiB
SMALL_FILE_BYTES = 64 * 1024  # a pod's service-account namespace file, a pid file, a demo's env file
