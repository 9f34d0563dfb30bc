# altar in a container: built from this tree on Debian 12, run as one binary.
FROM debian:12 AS build
RUN apt-get update && apt-get install -y --no-install-recommends \
      build-essential cmake pkg-config librdkafka-dev librocksdb-dev libmsgpack-dev \
      libcurl4-openssl-dev libssl-dev libcunit1-dev libjansson-dev libyaml-dev zlib1g-dev libmicrohttpd-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cmake -S . -B /build -DCMAKE_BUILD_TYPE=Release && cmake --build /build -j"$(nproc)" --target altar

FROM debian:12-slim
RUN apt-get update && apt-get install -y --no-install-recommends \
      librdkafka1 librocksdb7.8 libmsgpackc2 libcurl4 libssl3 libjansson4 libyaml-0-2 zlib1g libmicrohttpd12 ca-certificates \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /build/altar /usr/local/bin/altar
WORKDIR /var/lib/altar
ENTRYPOINT ["altar"]
CMD ["--help"]
