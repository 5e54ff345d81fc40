# The gateway as a container: `docker build -t switchyard .` then
# `docker run -p 8080:8080 -v $PWD/switchyard.yaml:/etc/switchyard.yaml -e SWITCHYARD_CONFIG=/etc/switchyard.yaml switchyard`.
# Without a config it serves every queue from /data/switchyard.sqlite (mount /data to keep it).

# Build: every workspace package compiled to dist/, then only what the gateway needs at run time.
FROM node:20-bookworm-slim AS build
WORKDIR /src
# better-sqlite3 compiles its addon when no prebuilt one fits.
RUN apt-get update && apt-get install -y --no-install-recommends python3 make g++ && rm -rf /var/lib/apt/lists/*
COPY package.json package-lock.json tsconfig.base.json turbo.json ./
COPY packages ./packages
COPY apps ./apps
RUN npm install --no-audit --no-fund && npm run build
# A self-contained install of the gateway: its built packages and their production dependencies.
RUN npm pack --workspaces --pack-destination /tarballs \
 && mkdir /app && cd /app && npm init -y >/dev/null \
 && npm install --omit=dev --no-audit --no-fund /tarballs/*.tgz pg mysql2

FROM node:20-bookworm-slim
ENV NODE_ENV=production HOST=0.0.0.0 PORT=8080
COPY --from=build /app /app
RUN mkdir /data && chown node:node /data
USER node
WORKDIR /data
EXPOSE 8080
HEALTHCHECK --interval=15s --timeout=5s --start-period=10s CMD node -e "fetch('http://127.0.0.1:'+(process.env.PORT||8080)+'/health').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"
ENTRYPOINT ["/app/node_modules/.bin/switchyard"]
CMD ["serve"]
