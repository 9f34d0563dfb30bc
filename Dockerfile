# altar in a container: built from this tree on Debian 12, run as one binary.
# With a registry the bases are Debian's official images; without one,
# scripts/compose-images.sh makes a Debian 12 base with debootstrap and passes
# --build-arg BASE=altar-base/debian:12 --build-arg RUNTIME_BASE=altar-base/debian:12.
ARG BASE=debian:12
ARG RUNTIME_BASE=debian:12-slim
FROM ${BASE} AS build
RUN apt-get update && apt-get install -y --no-install-recommends \
      build-essential cmake pkg-config librdkafka-dev librocksdb-dev libmsgpack-dev \
      libcurl4-openssl-dev libssl-dev libcunit1-dev libjansson-dev libyaml-dev zlib1g-dev libmicrohttpd-dev libxml2-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cmake -S . -B /build -DCMAKE_BUILD_TYPE=Release && cmake --build /build -j"$(nproc)" --target altar

FROM ${RUNTIME_BASE}
RUN apt-get update && apt-get install -y --no-install-recommends \
      librdkafka1 librocksdb7.8 libmsgpackc2 libcurl4 libssl3 libjansson4 libyaml-0-2 zlib1g libmicrohttpd12 libxml2 ca-certificates \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /build/altar /usr/local/bin/altar
WORKDIR /var/lib/altar
ENTRYPOINT ["altar"]
CMD ["--help"]
