# KLS server image: build on debian:12, run on debian:12-slim as user `kls`.
#   docker build -t kls .
#   docker run -p 50051:50051 -v kls-data:/var/lib/kls kls
# or: docker compose -f deploy/docker-compose.yml up

# ---- build stage -------------------------------------------------------------
FROM debian:12 AS builder
WORKDIR /src
# Dependencies first, so editing sources does not re-run apt. --image-build:
# only what kls-server and kls need (no test, benchmark or deploy-check packages).
COPY deploy/install-deps.sh deploy/install-deps.sh
RUN bash deploy/install-deps.sh --image-build && rm -rf /var/lib/apt/lists/*
COPY . .
# KLS_NATIVE=OFF: the image must run on CPUs other than the build machine's.
RUN cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release \
          -DKLS_NATIVE=OFF -DKLS_BUILD_TESTS=OFF -DKLS_BUILD_BENCH=OFF \
 && cmake --build build --target kls-server kls \
 && strip build/server/kls-server build/client/kls

# ---- runtime stage -----------------------------------------------------------
FROM debian:12-slim
# Shared libraries only (libgrpc++1.51, libprotobuf32, libspdlog1.10, libsqlite3-0,
# libprometheus-cpp-pull1.0, ca-certificates, ...); the list lives in install-deps.sh
# so it is kept in one place.
COPY deploy/install-deps.sh /tmp/install-deps.sh
RUN bash /tmp/install-deps.sh --runtime-only \
 && rm -rf /var/lib/apt/lists/* /tmp/install-deps.sh
RUN groupadd --system kls \
 && useradd --system --gid kls --home-dir /var/lib/kls --no-create-home --shell /usr/sbin/nologin kls \
 && mkdir -p /var/lib/kls && chown kls:kls /var/lib/kls
COPY --from=builder /src/build/server/kls-server /src/build/client/kls /usr/local/bin/

USER kls
WORKDIR /var/lib/kls
# A named volume mounted here starts with this directory's owner (kls).
VOLUME /var/lib/kls
EXPOSE 50051 8080
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
  CMD ["kls", "--target", "127.0.0.1:50051", "--timeout-seconds", "3", "health"]
# kls-server runs as PID 1: it blocks SIGTERM/SIGINT and takes them with
# sigwait, so `docker stop` triggers the graceful shutdown (health NOT_SERVING,
# in-flight calls get up to 10 s, exit 0).
STOPSIGNAL SIGTERM
CMD ["kls-server", "--listen", "0.0.0.0:50051", "--data-dir", "/var/lib/kls", "--http-listen", "0.0.0.0:8080"]
