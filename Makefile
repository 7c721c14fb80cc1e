# oncehook: an exactly-once webhook consumer on AWS Lambda + DynamoDB.
#
#   make run    the whole stack in the local emulator (no AWS account): deploy, print the URLs
#               and the commands to try it with, in any shell (bin/hookctl)
#   make test   start the local emulator, vet, and run every test against it
#
# Everything either command installs (Go modules, the emulator) is pinned by this repository
# and cached under .cache/ (gitignored). Set AWS_ENDPOINT_URL to use an endpoint of your own
# (LocalStack, moto, real AWS) instead of the MiniStack that localstack/up starts.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

CACHE := $(CURDIR)/.cache
export GOMODCACHE := $(CACHE)/go-mod
export GOFLAGS := -mod=readonly

# The local endpoint and the emulator's dummy credentials, unless the caller set their own.
LOCAL_ENDPOINT := http://127.0.0.1:$(or $(MINISTACK_PORT),4566)
AWS_ENV := AWS_ENDPOINT_URL=$${AWS_ENDPOINT_URL:-$(LOCAL_ENDPOINT)} \
	AWS_REGION=$${AWS_REGION:-us-east-1} \
	AWS_ACCESS_KEY_ID=$${AWS_ACCESS_KEY_ID:-test} \
	AWS_SECRET_ACCESS_KEY=$${AWS_SECRET_ACCESS_KEY:-test}

GO_TEST_FLAGS ?= -count=1 -timeout 20m

# The modules make test vets and tests, by audience: the library a team links into its functions
# (.), the operator's tools (ops: hookctl and the console) and the end-to-end tests (e2e). The
# construct (infra) and the standalone example have targets of their own.
MODULES := . ops e2e

.PHONY: help run demo test vet unit bench bench-redrive test-moto up down clean build synth test-infra test-example deploy hookctl browser flakes

# Lambda binaries for provided.al2023: dist/<function>/bootstrap (the stack bundles the
# sources file with each). ARCH=arm64 for AWS; the host's architecture by default, for the
# local emulator. RECEIVER is the receiver's package (oncehook's own, without planners, by
# default; the local stack deploys the reference application's). FAULTS=1 links the fault
# injector (-tags faultinject): the local stack's builds only, never make synth's.
ARCH ?= $(shell go env GOARCH)
SOURCES ?=
RECEIVER ?= ./functions/receiver
FAULTS ?=
comma := ,
TAGS := lambda.norpc$(if $(FAULTS),$(comma)faultinject)

build:
	@for f in receiver outbox sweeper; do \
	  pkg=./functions/$$f; [ $$f = receiver ] && pkg=$(RECEIVER); \
	  mkdir -p dist/$$f; \
	  CGO_ENABLED=0 GOOS=linux GOARCH=$(ARCH) go build -trimpath -ldflags='-s -w' -tags '$(TAGS)' -o dist/$$f/bootstrap $$pkg; \
	  echo "dist/$$f/bootstrap ($$pkg, $(ARCH), tags $(TAGS), $$(du -h dist/$$f/bootstrap | cut -f1))"; \
	done

help:
	@sed -n '3,5p' Makefile | sed 's/^#   //'
	@echo "also: demo, hookctl (bin/hookctl), up, down, build, synth, deploy, unit, bench, bench-redrive, test-moto, test-example, clean"
	@echo "      flakes (the randomized and concurrent tests, FLAKE_COUNT=$(FLAKE_COUNT) runs each, fresh seeds)"

# The operator's CLI, which the local deploys' printed commands run (docs/hookctl.md).
hookctl:
	@cd ops && go build -o ../bin/hookctl ./hookctl

up:
	@localstack/up

down:
	@localstack/down

# Debian's Chromium (apt, as root), for the console's browser test: without it that test skips.
browser:
	@localstack/browser

# DEMO_PORT (default 8025): the demo downstream's port, in the sources file deployed too.
run: up
	@$(AWS_ENV) localstack/run

# The dedup core alone, committing one event twice (no stack needed).
demo: up
	@$(AWS_ENV) go run ./examples/committwice

vet:
	@echo "==> gofmt, go mod tidy and go vet"
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	@for m in $(MODULES) infra examples/storefront; do (cd $$m && GOFLAGS=-mod=mod go mod tidy -diff >/dev/null) || { echo "$$m: go.mod is not tidy (go mod tidy)"; exit 1; }; done
	@for m in $(MODULES); do (cd $$m && go vet ./...); done

# docs/hookctl.md's storm against the local stack: its downstream takes 8025, which the e2e
# tests' own holds, so it runs after them.
DOC_STORM := bin/hookctl storm -events 200 -copies 4 -downstream 127.0.0.1:8025 shop

# On a local endpoint the whole stack is deployed first, and the end-to-end tests (e2e/) run
# against it; on any other endpoint they skip.
test: vet unit up test-infra test-example
	@endpoint=$${AWS_ENDPOINT_URL:-$(LOCAL_ENDPOINT)}; \
	case "$$endpoint" in \
	  http://127.*|http://localhost*) \
	    echo "==> deploying the stack to $$endpoint (localstack/deploy; log in .cache/deploy.log)"; \
	    $(AWS_ENV) localstack/deploy > .cache/deploy.log 2>&1 || { tail -n 40 .cache/deploy.log; exit 1; }; \
	    set -a; . .oncehook/stack.env; set +a; \
	    export ONCEHOOK_E2E=required ONCEHOOK_DEPLOY_OUTPUT=$(CURDIR)/.cache/deploy.log;; \
	  *) echo "==> $$endpoint is not local: the end-to-end tests will skip";; \
	esac; \
	for m in $(MODULES); do \
	  echo "==> go test ./... in $$m against $$endpoint"; \
	  (cd $$m && $(AWS_ENV) go test $(GO_TEST_FLAGS) ./...); \
	done; \
	case "$$endpoint" in \
	  http://127.*|http://localhost*) \
	    grep -qF -- "$(DOC_STORM)" docs/hookctl.md || { echo "docs/hookctl.md no longer prints $(DOC_STORM): make test runs what the docs print"; exit 1; }; \
	    echo "==> docs/hookctl.md's storm, as printed, in a shell with only PATH and HOME (8025 is free again)"; \
	    env -i PATH="$$PATH" HOME="$$HOME" bash -c '$(DOC_STORM)';; \
	esac

# The standalone example (examples/storefront, a module of its own that depends on oncehook as
# a team would): vet, its planner tests, and, on a local endpoint, its stack built by the
# construct from its own packages, deployed to the emulator by hookctl deploy-local as a team
# deploys its own, and driven end to end, the commands the deploy printed included.
STOREFRONT := examples/storefront
# The docs' local deploy of a team's app, run as printed with bin/hookctl and the pinned cdklocal
# first on PATH (where a team has its own).
DEPLOY_LOCAL := hookctl deploy-local -app 'go run ./infra' -c local=true
test-example: hookctl
	@echo "==> $(STOREFRONT): go vet, planner tests"
	@cd $(STOREFRONT) && go vet ./... && go test $(GO_TEST_FLAGS) ./planners/...
	@endpoint=$${AWS_ENDPOINT_URL:-$(LOCAL_ENDPOINT)}; \
	case "$$endpoint" in \
	  http://127.*|http://localhost*) ;; \
	  *) echo "==> $$endpoint is not local: the storefront's end-to-end test skips"; exit 0;; \
	esac; \
	echo "==> $(STOREFRONT): $(DEPLOY_LOCAL), as the README prints it, to $$endpoint (its output in .cache/storefront-deploy.log)"; \
	for doc in README.md docs/own-module.md docs/hookctl.md; do \
	  grep -qF -- "$(DEPLOY_LOCAL)" $$doc || { echo "$$doc no longer prints $(DEPLOY_LOCAL): make test-example runs what the docs print"; exit 1; }; \
	done; \
	localstack/cdk local --version > /dev/null; \
	(cd $(STOREFRONT) && PATH="$(CURDIR)/bin:$(CACHE)/node/node_modules/.bin:$$PATH" CDK_DISABLE_CLI_TELEMETRY=true $(AWS_ENV) $(DEPLOY_LOCAL)) \
	  > $(CACHE)/storefront-deploy.log 2>&1 || { tail -n 40 $(CACHE)/storefront-deploy.log; exit 1; }; \
	echo "==> $(STOREFRONT): end to end, and the commands its deploy printed (hookctl on PATH, as it was for the deploy)"; \
	cd $(STOREFRONT) && set -a && . .oncehook/stack.env && set +a && \
	  PATH="$(CURDIR)/bin:$$PATH" STOREFRONT_E2E=required STOREFRONT_URL="$$ONCEHOOK_WEBHOOK_URL" STOREFRONT_TABLE="$$TABLE_NAME" \
	  STOREFRONT_DEPLOY_OUTPUT=$(CACHE)/storefront-deploy.log go test $(GO_TEST_FLAGS) ./e2e/...

# The CDK app is its own module (infra/go.mod), so the functions never link the CDK. Its tests
# synthesize the stack (the CDK runs on Node through jsii) and assert the template, cdk-nag,
# cfn-lint and checkov (pinned in localstack/requirements-lint.txt, installed into
# .cache/lint-venv).
LINT_VENV := $(CACHE)/lint-venv
LINT_REQ := localstack/requirements-lint.txt
test-infra:
	@want=$$(sha256sum $(LINT_REQ) | cut -d' ' -f1); \
	if [ ! -x $(LINT_VENV)/bin/cfn-lint ] || [ "$$(cat $(LINT_VENV)/.requirements.sha256 2>/dev/null)" != "$$want" ]; then \
	  echo "==> installing $$(grep -v '^#' $(LINT_REQ) | tr '\n' ' ')into $(LINT_VENV)"; \
	  python3 -m venv $(LINT_VENV) && $(LINT_VENV)/bin/pip install --quiet --disable-pip-version-check -r $(LINT_REQ); \
	  echo "$$want" > $(LINT_VENV)/.requirements.sha256; \
	fi
	@echo "==> go test ./infra/... (CDK assertions, cdk-nag, cfn-lint, checkov)"
	@cd infra && go vet ./... && ONCEHOOK_CFN_LINT=$(LINT_VENV)/bin/cfn-lint ONCEHOOK_CHECKOV=$(LINT_VENV)/bin/checkov go test $(GO_TEST_FLAGS) ./... 2>&1 | sed '/^!!/d'

# The CloudFormation template and assets for AWS (arm64), in cdk.out/. SOURCES names the
# deployment's sources file: there is no default, so nothing is deployed by accident.
synth:
	@test -n "$(SOURCES)" || { echo "make synth needs SOURCES=path/to/your/sources.json"; exit 1; }
	@$(MAKE) --no-print-directory build ARCH=arm64
	@cd infra && CDK_OUTDIR=$(CURDIR)/cdk.out CDK_CONTEXT_JSON='{"sources":"$(CURDIR)/$(SOURCES)","code":"$(CURDIR)/dist"}' go run ./app 2>&1 | sed '/^!!/d'
	@echo "cdk.out/Oncehook.template.json"

# Deploy to AWS with the standard credentials chain (AWS_PROFILE, SSO, environment...). The
# account needs a `cdk bootstrap` once. SOURCES names the deployment's sources file.
deploy:
	@test -z "$${AWS_ENDPOINT_URL:-}" || { echo "AWS_ENDPOINT_URL is set: make deploy is for AWS (make run deploys locally)"; exit 1; }
	@$(MAKE) --no-print-directory synth SOURCES=$(SOURCES)
	@localstack/cdk deploy --app cdk.out --require-approval broadening

# Pure-logic tests only (no emulator, no endpoint): the fast loop while editing. make test runs
# it first, so that every emulator test skips in -short mode before it needs the endpoint.
unit:
	@for m in $(MODULES); do (cd $$m && env -u AWS_ENDPOINT_URL go test -count=1 -short ./...); done
	@go test -count=1 -short -tags oncehook_notrace_export -run TestABinaryBuiltWithoutExport ./launch/tracing

bench: up
	@$(AWS_ENV) go test -run '^$$' -bench . -benchmem ./dedup/ ./receiver/ ./webhook/

# What duplicates cost DynamoDB during a redrive, through the receiver's own code path
# (internal/benchredrive): NEW events, then a redrive of REDRIVE deliveries of which DUPLICATES
# repeat them, SENDERS at once; DynamoDB calls by operation and units per delivery. PROBE=off
# turns the receiver's duplicate probe off (on by default, as deployed).
NEW ?= 4000
REDRIVE ?= 5000
DUPLICATES ?= 4000
SENDERS ?= 16
PROBE ?=
bench-redrive: up
	@$(AWS_ENV) go run ./internal/benchredrive -new $(NEW) -redrive $(REDRIVE) -duplicates $(DUPLICATES) -senders $(SENDERS) $(if $(PROBE),-probe=$(PROBE))

# Flake hunting: the randomized and concurrent tests, FLAKE_COUNT runs each, each run with a
# fresh seed. A failure logs the seed that replays it (ONCEHOOK_PROPERTY_SEED,
# ONCEHOOK_SCHEDULE_SEED); FLAKE_PKGS narrows the packages.
FLAKE_COUNT ?= 20
FLAKE_PKGS ?= ./receiver/... ./dedup/... ./outbox/... ./webhook/... ./internal/...
FLAKE_RUN := Randomized|NoSignedDelivery|Concurrent|BulkRedrive|Storm|^Fuzz
flakes: up
	@echo "==> $(FLAKE_COUNT) runs of each test matching '$(FLAKE_RUN)' in $(FLAKE_PKGS)"
	@$(AWS_ENV) go test -count=$(FLAKE_COUNT) -timeout 60m -run '$(FLAKE_RUN)' $(FLAKE_PKGS)

# Cross-check the dedup core against moto, a second, independent DynamoDB implementation.
# moto is not atomic under concurrent writers (README, "Engines"), so the concurrency and
# bulk tests run on MiniStack only. moto also sizes an item otherwise than DynamoDB documents
# (it refuses the largest plan Check accepts) and answers 500 to a claim condition that meets an
# expires_at of another type, so those two tests run on MiniStack only too.
MOTO_SKIP := TestConcurrentDoubles|TestBulkRedrive|TestTracingNeverChangesWhatIsAccepted|TestProbeReadsAnyStoredExpiryAsTheClaimConditionDoes
test-moto:
	@localstack/moto go test $(GO_TEST_FLAGS) -skip '$(MOTO_SKIP)' ./dedup/

clean: down
	rm -rf $(CACHE) bin dist .oncehook $(STOREFRONT)/.oncehook
