# The offhours image: the `offhours` CLI (gate, exit hook, validate, simulate) and the static
# launcher that every research step copies into its pod. Build: docker build -t ghcr.io/offhours/offhours:0.1.0 .
FROM golang:1.24-bookworm AS launcher
WORKDIR /src
COPY scripts/launcher/ ./
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/offhours-launch .

FROM python:3.11-slim-bookworm
COPY --from=launcher /out/offhours-launch /usr/local/bin/offhours-launch
WORKDIR /src
COPY pyproject.toml README.md ./
COPY steps/ steps/
COPY workflows/ workflows/
COPY cronworkflows/ cronworkflows/
COPY scripts/ scripts/
COPY schemas/ schemas/
# The s3 extra (boto3): the check-parameters step keeps a run's provenance in an s3:// store, the gate reads progress there.
RUN pip install --no-cache-dir ".[s3]" && rm -rf /src
WORKDIR /
USER 65532:65532
# No ENTRYPOINT: each template names its command (offhours ..., python -m hera.workflows.runner ...).
