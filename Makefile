# offhours — `make help` lists the targets.
PYTHON ?= python3
PYTEST ?= $(PYTHON) -m pytest

.DEFAULT_GOAL := help

.PHONY: help
help: ## List the targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

.PHONY: deps
deps: ## Install what the tests need beyond Python: Prometheus, Chromium (Debian), s3proxy (Maven Central), go, node
	@command -v prometheus >/dev/null || { apt-get update -qq && apt-get install -y -qq --no-install-recommends prometheus >/dev/null; }
	@# go builds the launcher, node evaluates Argo expressions: on this machine kind already, else Debian's.
	@command -v go >/dev/null || { apt-get update -qq && apt-get install -y -qq --no-install-recommends golang-go >/dev/null; }
	@command -v node >/dev/null || { apt-get update -qq && apt-get install -y -qq --no-install-recommends nodejs >/dev/null; }
	@go version && echo "node $$(node --version)"
	@prometheus --version 2>&1 | head -1
	@command -v chromedriver >/dev/null || { apt-get update -qq && apt-get install -y -qq --no-install-recommends chromium chromium-driver >/dev/null; }
	@chromium --version 2>/dev/null | head -1
	@# 4.0.0 honours conditional puts (the store's fence); 2.4.1 ignores them, and the store must refuse it.
	@mvn -q dependency:get -Dartifact=org.gaul:s3proxy:4.0.0:jar:jar-with-dependencies -Dtransitive=false
	@mvn -q dependency:get -Dartifact=org.gaul:s3proxy:2.4.1:jar:jar-with-dependencies -Dtransitive=false
	@echo "s3proxy 4.0.0 and 2.4.1 (Maven Central)"

.PHONY: install
install: ## Install offhours (editable, strict: tools see one real `offhours` tree; rerun after adding a module)
	$(PYTHON) -m pip install -q -e ".[dev]" --config-settings editable_mode=strict

.PHONY: test
# The offline tiers on every core (pytest-xdist); TEST_WORKERS=0 runs them in one process.
TEST_WORKERS ?= auto

test: ## Run every tier but e2e: unit, integration (Prometheus, s3proxy, Chromium, go: make deps first), golden
	$(PYTEST) -q -n $(TEST_WORKERS)

.PHONY: unit
unit: ## The fast tier: no sockets, no subprocesses (tests/unit)
	$(PYTEST) -q tests/unit

.PHONY: campaign
campaign: ## The gate's whole campaign (issue 31 §7) long and randomized: EXAMPLES=2000 STEPS=60 by default
	OFFHOURS_CAMPAIGN=long OFFHOURS_CAMPAIGN_EXAMPLES=$(or $(EXAMPLES),2000) OFFHOURS_CAMPAIGN_STEPS=$(or $(STEPS),60) \
		$(PYTEST) -q -p no:randomly tests/unit/test_gate_campaign.py

.PHONY: golden
golden: ## Regenerate tests/golden from the templates (review the diff!)
	@# A rewritten golden fails the regenerating run (it compared nothing); the second run compares every file.
	$(PYTEST) -q tests/golden/test_golden.py tests/unit/test_schedule.py tests/golden/test_render_console.py --regen-golden || $(PYTEST) -q tests/golden/test_golden.py tests/unit/test_schedule.py tests/golden/test_render_console.py

.PHONY: docs
docs: ## Build the documentation site into build/site (mkdocs --strict: links, anchors, nav; reference generated from the code)
	@$(PYTHON) -c "import mkdocs, material" 2>/dev/null || $(PYTHON) -m pip install -q -e ".[docs]" --config-settings editable_mode=strict
	@# Not --quiet: it hides the warnings that --strict turns into failures, and the build then passes.
	NO_MKDOCS_2_WARNING=1 $(PYTHON) -m mkdocs build --strict

.PHONY: render
render: ## Render every manifest into build/manifests
	offhours render --out build/manifests

.PHONY: lint
lint: ## ruff (E, F, I, D), the import layers (lint-imports, .importlinter), mypy, gofmt and go vet
	$(PYTHON) -m ruff check .
	$(PYTHON) -c "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"
	$(PYTHON) -m mypy --config-file pyproject.toml -p offhours
	cd scripts/launcher && gofmt -l . | (! grep .) && go vet .

.PHONY: bench
bench: ## Run the benchmarks; results go to bench/results/
	$(PYTHON) bench/bench_templates.py
	$(PYTHON) bench/bench_gate.py
	$(PYTHON) bench/bench_tick.py
	$(PYTHON) bench/bench_simulate.py
	$(PYTHON) bench/bench_scale.py
	$(PYTHON) bench/bench_frontier.py
	$(PYTHON) bench/bench_tune_folds.py

.PHONY: mutation
mutation: ## Mutation testing (mutmut 3) of the policy, metrics maths, exit hook, gate act path; bench/results/mutation.json
	$(PYTHON) -m pip install -q "mutmut==3.8.1"
	$(PYTHON) bench/mutation.py

.PHONY: cluster-up
cluster-up: ## Build (cached) and start the local control plane: Kubernetes, etcd, kwok GPU nodes, Argo, pod runner
	$(PYTHON) scripts/controlplane/lifecycle.py up

.PHONY: cluster-down
cluster-down: ## Stop every process of the local control plane
	$(PYTHON) scripts/controlplane/lifecycle.py down

.PHONY: demo
demo: ## The whole loop live on the local control plane (make cluster-up first): offhours demo, then a summary
	$(PYTHON) -m offhours.scripts.cli.main demo

.PHONY: sandbox
sandbox: ## The demo kept live for your own jobs until Ctrl-C or make sandbox-stop (make cluster-up first)
	$(PYTHON) -m offhours.scripts.cli.main demo --keep

.PHONY: sandbox-stop
sandbox-stop: ## Stop the running sandbox (from another shell); it says what it leaves on the cluster
	$(PYTHON) -m offhours.scripts.cli.main demo --stop

E2E_SHARDS ?= 2

.PHONY: e2e
e2e: ## Run the end-to-end tier on E2E_SHARDS control planes of its own at once (whole files each); records its time
	$(PYTHON) scripts/controlplane/measure.py run e2e_tier -- \
	  $(PYTHON) scripts/controlplane/shards.py run --shards $(E2E_SHARDS) -- -q -m "cluster and not unproven"

.PHONY: e2e-here
e2e-here: ## Run the end-to-end tier, or E2E_FILES, on the control plane of make cluster-up, one file after another
	$(PYTEST) -q -m "cluster and not unproven" $(or $(E2E_FILES),tests/e2e)

.PHONY: e2e-unproven
e2e-unproven: ## The end-to-end tests that do not pass yet (marked unproven, each with its comment)
	$(PYTEST) -q -m "cluster and unproven" tests/e2e

.PHONY: ci
ci: deps install lint docs test ## What CI runs: deps, install, lint, the docs site (strict), tests (then .ci/run runs the e2e tier)
