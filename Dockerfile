# syntax=docker/dockerfile:1
# The Switchyard gateway. Build: docker build -t switchyard .   Run: see docs/deploy.md.
# The gateway runs as compiled JavaScript (dist/, built by tsc in the build stage); the image
# holds the production dependencies, the compiled code and its launcher, no TypeScript.

ARG NODE_IMAGE=node:20-bookworm-slim

# Production dependencies only, in their own stage: this layer is rebuilt only when package*.json
# change, and npm's cache stays out of the final image. --ignore-scripts: the project's own
# prepare (the build) needs the sources and tsc, which the build stage has; the msgpackr-extract
# override's binaries come as optional packages from the registry, so nothing is compiled here.
FROM ${NODE_IMAGE} AS deps
WORKDIR /app
COPY package.json package-lock.json ./
# The switchyard command is a workspace (api/bin), which npm ci links into node_modules.
COPY api/bin/package.json ./api/bin/
RUN --mount=type=cache,target=/root/.npm \
    npm ci --omit=dev --ignore-scripts --no-audit --no-fund

# The build: every dependency (tsc is a devDependency), the sources, then api/bin/build.mjs
# (which `npm ci` runs as the project's prepare script) compiles them into dist/.
FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json tsconfig.json tsconfig.build.json ./
COPY api ./api
COPY queues ./queues
COPY dispatch ./dispatch
COPY models ./models
COPY sdk ./sdk
RUN --mount=type=cache,target=/root/.npm \
    npm ci --no-audit --no-fund

FROM ${NODE_IMAGE} AS runtime
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=8080 \
    DATA_DIR=/data
WORKDIR /app
# Code and dependencies stay owned by root, so the gateway (user node) can read but not change
# them; the only place it writes is DATA_DIR (artifacts).
COPY --from=deps /app/node_modules ./node_modules
COPY package.json package-lock.json ./
COPY api/bin ./api/bin
COPY --from=build /app/dist ./dist
# A new named volume is populated from the image's directory, ownership included: node owns it.
RUN mkdir -p /data/artifacts && chown -R node:node /data
VOLUME ["/data"]
USER node
EXPOSE 8080
# Liveness only (/healthz): readiness (/readyz, Redis and the store) is the proxy's health check.
# Slim images have no curl; node's fetch does the probe.
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch(`http://127.0.0.1:${process.env.PORT || 8080}/healthz`).then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# Exec form: node itself receives SIGTERM and runs the gateway's graceful shutdown (workers
# drain for SHUTDOWN_DRAIN_MS, then the server closes). Give it a stop timeout longer than that.
CMD ["node", "api/bin/switchyard.mjs", "serve"]
