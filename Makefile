.PHONY: setup lab deploy test unit molecule lint lab-down bench collection

setup:
	./scripts/setup-dev.sh

# The container lab: host packages (podman, runc, debootstrap), the image, two systemd hosts with simulated GPUs.
lab: setup
	./lab/install-host-deps.sh
	./lab/up.sh

# The main job against the default target: the lab.
deploy: lab
	.venv/bin/ansible-playbook deploy.yml -i inventories/lab -l blackwell

# Every test (what .ci/run runs): the unit and molecule parts below, overlapped where they wait on different things
# (scripts/test-all.sh), each stage timed.
test:
	./scripts/test-all.sh

unit: setup
	./scripts/test.sh

molecule: setup
	./lab/install-host-deps.sh
	PATH="$(CURDIR)/.venv/bin:$$PATH" .venv/bin/molecule test --all

# The gpufleet.sglang collection: build/ansible_collections/gpufleet/sglang/ and dist/gpufleet-sglang-<version>.tar.gz.
collection: setup
	.venv/bin/python scripts/build_collection.py

lint: setup collection
	ANSIBLE_COLLECTIONS_PATH="$(CURDIR)/.cache/collections:$(CURDIR)/build" .venv/bin/ansible-lint

lab-down:
	./lab/down.sh

bench: lab
	./lab/bench.sh
