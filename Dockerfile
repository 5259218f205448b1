# Multi-stage build: a static binary on a minimal runtime image.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/shoal ./cmd/shoal && mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/shoal /usr/local/bin/shoal
# The data directory must belong to the non-root user before the volume is
# mounted over it, or a fresh volume would be root-owned and unwritable.
COPY --from=build --chown=65532:65532 /out/data /var/lib/shoal
# Data lives on a volume so it survives container replacement.
VOLUME ["/var/lib/shoal"]
# 9092: Kafka; 9644: /metrics, /healthz, /readyz.
EXPOSE 9092 9644
USER nonroot:nonroot
ENV SHOAL_DATA_DIR=/var/lib/shoal \
    SHOAL_LISTEN=0.0.0.0:9092 \
    SHOAL_HTTP_ADDR=0.0.0.0:9644
# Clients must be told an address they can reach: set SHOAL_ADVERTISED_ADDR
# (for example localhost:9092 with `docker run -p 9092:9092`).
ENTRYPOINT ["/usr/local/bin/shoal"]
