# The image the Helm chart runs: the ratelimit service, the operator and the control plane in one.
# `npm run image` builds it as envoy-ratelimit-ts:<chart appVersion>, the chart's default image
# (docs/helm.md: how to push it to a registry and set image.repository).
# Production code only: dist/ holds what tsconfig.build.json compiles (no tests, test helpers,
# benchmarks, e2e harness or the papers workspace), node_modules only production dependencies.
# (Not built in this repository's CI: the CI machine has no Docker engine.)
FROM node:24-bookworm-slim AS build
WORKDIR /app
# The lock file covers the papers workspace too, so npm ci needs its package.json.
COPY package.json package-lock.json ./
COPY papers/package.json ./papers/
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY common ./common
COPY proto ./proto
COPY h2grpc ./h2grpc
COPY ratelimit ./ratelimit
COPY control-plane ./control-plane
COPY operator ./operator
COPY cli ./cli
RUN npm run build && npm prune --omit=dev && rm -f node_modules/papers dist/.tsbuildinfo \
  && find proto -name '*.ts' -delete

FROM node:24-bookworm-slim
WORKDIR /app
ENV NODE_ENV=production
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY bin ./bin
# The .proto files (only) are loaded at run time (proto/loader.ts).
COPY --from=build /app/proto ./proto
COPY package.json ./
USER 65532
EXPOSE 8080 8081 6070 18000
# A young generation sized for one core (docs/decisions/004-gc-settings.md); the chart sets the same
# through NODE_OPTIONS (ratelimit.nodeOptions). Only the service's command: the control plane and the
# operator run with Node's defaults.
CMD ["node", "--max-semi-space-size=4", "--single-threaded-gc", "bin/ratelimit.js"]
