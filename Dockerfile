# draco's container image: the wheel built from this repository, installed into a slim
# Python with no build tools, run as an unprivileged numeric user (the chart's
# runAsNonRoot needs a numeric UID to verify).
#
#   docker build -t draco:0.1.0 .
#   docker run --rm draco:0.1.0 --help
#
# CI cannot pull this base; it builds the same image with hack/image (Debian bookworm,
# no registry), and tests/chart/test_dockerfile.py keeps the two recipes in step.

ARG PYTHON_IMAGE=python:3.11-slim

# --- build: draco's wheel and the wheels of its dependencies
FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY operators ./operators
RUN pip wheel --wheel-dir /wheels .

# --- runtime: only the installed wheels
FROM ${PYTHON_IMAGE}
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
COPY --from=build /wheels /wheels
RUN pip install --no-index --find-links /wheels draco \
    && rm -rf /wheels \
    && draco --help > /dev/null
LABEL org.opencontainers.image.title="draco" \
      org.opencontainers.image.description="DRA control-plane operators" \
      org.opencontainers.image.licenses="Apache-2.0"
# 65532: the conventional "nonroot" UID/GID of distroless images; the chart runs as it.
USER 65532:65532
WORKDIR /tmp
EXPOSE 8080 8081 9443
ENTRYPOINT ["draco"]
CMD ["run"]
