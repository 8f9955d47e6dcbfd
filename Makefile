.PHONY: setup deploy test local-target lint

setup:
	./scripts/setup-dev.sh

local-target: setup
	./scripts/local-target.sh

# The main job against the default target (this machine's local-target venv).
deploy: local-target
	.venv/bin/ansible-playbook deploy.yml -l blackwell

test: setup
	./scripts/test.sh

lint: setup
	.venv/bin/ansible-lint
