# The codec A/B image: the worker, the load generator and the A/B runner in one.
#
#   docker build -t codec-ab:0.1.0 .
#   podman build --format docker -t codec-ab:0.1.0 .      # OCI format drops HEALTHCHECK
#   docker run --rm codec-ab:0.1.0 codec-worker --help    # the default command
#   docker run --rm codec-ab:0.1.0 codec-loadgen          # configured by LOADGEN_* env
#
# Two stages: `build` installs the hashed runtime lock into /opt/venv and builds the
# project's wheel (hatchling, hash-checked from the dev lock); `runtime` copies the venv,
# installs the wheel with --no-deps and runs as a non-root user. Every dependency is a
# binary wheel (--only-binary), so neither stage needs a compiler.
#
# Base image: pinned by exact tag, fully qualified (podman resolves no short name without
# a default registry). Also pin its digest when you publish the image
# (python:3.11.13-slim-bookworm@sha256:...); the digest is not written here because
# this project's machines reach no container registry, so it could not be verified.

FROM docker.io/library/python:3.11.13-slim-bookworm AS build

ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_ROOT_USER_ACTION=ignore \
    UV_NO_CACHE=1 \
    UV_PYTHON_DOWNLOADS=never \
    UV_COMPILE_BYTECODE=1 \
    UV_LINK_MODE=copy

WORKDIR /src

# The installer (uv) from its hashed lock, then the runtime lock into the venv.
COPY requirements/ requirements/
RUN pip install --require-hashes -r requirements/bootstrap.txt \
 && python -m venv --without-pip /opt/venv \
 && uv pip install --python /opt/venv/bin/python --require-hashes \
      --only-binary :all: -r requirements/runtime.txt

# The project's wheel. Build requirements ([build-system] in pyproject.toml) must match
# the hashes pinned in the dev lock.
COPY pyproject.toml README.md LICENSE ./
COPY schemas/ schemas/
COPY codec/ codec/
COPY service/ service/
COPY loadgen/ loadgen/
COPY abrunner/ abrunner/
COPY localkafka/ localkafka/
COPY codecbench/ codecbench/
COPY schematool/ schematool/
RUN uv build --wheel --python /usr/local/bin/python --out-dir /dist \
      --build-constraints requirements/dev.txt --require-hashes .


FROM docker.io/library/python:3.11.13-slim-bookworm AS runtime

LABEL org.opencontainers.image.title="codec-ab" \
      org.opencontainers.image.description="Codec A/B stream processing for Kafka: worker (codec-worker), load generator (codec-loadgen), A/B runner (codec-ab)" \
      org.opencontainers.image.licenses="Apache-2.0"

ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_ROOT_USER_ACTION=ignore \
    MPLCONFIGDIR=/tmp/matplotlib \
    WORKER_METRICS__HOST=0.0.0.0 \
    WORKER_METRICS__PORT=9100

RUN groupadd --system --gid 10001 app \
 && useradd --system --uid 10001 --gid app --no-create-home \
      --home-dir /nonexistent --shell /usr/sbin/nologin app

COPY --from=build /opt/venv /opt/venv
COPY --from=build /dist/ /tmp/dist/
RUN /usr/local/bin/python -m pip --python /opt/venv/bin/python install --no-deps --no-index \
      /tmp/dist/codec_ab-*.whl \
 && rm -rf /tmp/dist \
 && codec-worker --version

USER 10001:10001
WORKDIR /tmp

# The worker's control plane: /metrics, /healthz, /readyz (WORKER_METRICS__PORT).
EXPOSE 9100

# No curl in slim images: ask /healthz with the standard library. An HTTP error status
# (503: the consume loop stalled) raises, so the check exits non-zero.
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
  CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('WORKER_METRICS__PORT', '9100'), timeout=4)"]

CMD ["codec-worker"]
