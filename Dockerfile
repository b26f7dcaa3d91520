# The image the Helm chart runs: the ratelimit service, the operator and the control plane in one.
# (Not built in this repository's CI: the CI machine has no Docker engine.)
FROM node:24-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY . .
RUN npm run build && npm prune --omit=dev

FROM node:24-bookworm-slim
WORKDIR /app
ENV NODE_ENV=production
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY --from=build /app/bin ./bin
COPY --from=build /app/proto ./proto
COPY --from=build /app/package.json ./
USER 65532
EXPOSE 8080 8081 6070 18000
CMD ["node", "bin/ratelimit.js"]
