import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { serve } from "@hono/node-server";
import { Redis } from "ioredis";
import { type Browser, type BrowserContext, type Locator, type Page, chromium } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serviceUrl } from "../../../test/support/services.js";
import { buildDashboard } from "../dashboard/build.mjs";
import { type Gateway, createGateway } from "../src/index.js";

/*
 * The dashboard in a real headless Chromium (Debian's package, which `npm test` installs with the
 * storage servers) against a real gateway over HTTP: a SQLite backend and a qless-redis one (Redis
 * database 6, this suite's alone), jobs put through the /v1 and qless doors, an HTTP worker. Screenshots
 * go to test-artifacts/dashboard/; with SWITCHYARD_README_SCREENSHOTS=1 the README's to docs/ too.
 */

const ROOT = join(import.meta.dirname, "..", "..", "..");
const ARTIFACTS = join(ROOT, "test-artifacts", "dashboard");
const README_SHOTS = process.env.SWITCHYARD_README_SCREENSHOTS === "1" ? join(ROOT, "docs") : null;
const redisUrl = `${serviceUrl("redis").replace(/\/\d*$/, "")}/6`;
const TOKENS = { OPS: "ops-secret-token", VIEWER: "viewer-secret-token" };
/** Less than the page's 15 s fallback poll: a change seen within this came over the event stream. */
const LIVE_MS = 6_000;

function chromiumPath(): string {
  for (const candidate of ["/usr/bin/chromium", "/usr/bin/chromium-browser"]) if (existsSync(candidate)) return candidate;
  try {
    return execFileSync("sh", ["-c", "command -v chromium"], { encoding: "utf8" }).trim();
  } catch {
    throw new Error(
      "chromium is not installed: `npm test` installs it (scripts/services.mjs), or run `apt-get install -y chromium` as root",
    );
  }
}

let dir: string;
let gateway: Gateway;
let server: Server;
let base: string;
let browser: Browser;

async function api(method: string, path: string, body?: unknown, token = TOKENS.OPS) {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  // biome-ignore lint/suspicious/noExplicitAny: answers are checked field by field.
  return { status: res.status, json: (text ? JSON.parse(text) : undefined) as any };
}

/** An HTTP worker's round: reserve one job of the queue and complete it (or fail it for good). */
async function work(queue: string, outcome: "complete" | "fail" = "complete"): Promise<string> {
  const { json } = await api("POST", `/v1/queues/${queue}/reserve`, { worker: "e2e-worker" });
  const job = json.jobs[0];
  expect(job, `a job to reserve in ${queue}`).toBeDefined();
  if (outcome === "complete")
    await api("POST", `/v1/queues/${queue}/jobs/${job.id}/complete`, { worker: "e2e-worker", result: { ok: true } });
  else
    await api("POST", `/v1/queues/${queue}/jobs/${job.id}/fail`, {
      worker: "e2e-worker",
      retry: false,
      error: { group: "ResizeError", message: "Error: image is corrupt\n    at resize (thumbs.js:42:11)\n    at run (worker.js:7:3)" },
    });
  return job.id;
}

async function shoot(page: Page, name: string, readme?: string): Promise<void> {
  await page.screenshot({ path: join(ARTIFACTS, `${name}.png`), fullPage: true });
  if (README_SHOTS && readme) await page.screenshot({ path: join(README_SHOTS, readme) });
}

/** Waits until the locator's text is `text` (a poll with a deadline, as a user would look). */
async function textBecomes(locator: Locator, text: string | RegExp, timeout = LIVE_MS): Promise<void> {
  const deadline = Date.now() + timeout;
  let seen: string | null = null;
  while (Date.now() < deadline) {
    seen = (await locator.textContent({ timeout }).catch(() => null))?.trim() ?? null;
    if (seen !== null && (typeof text === "string" ? seen === text : text.test(seen))) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`expected ${locator} to read ${text} within ${timeout} ms; it read ${JSON.stringify(seen)}`);
}

/** A signed-in page: the token typed into the dashboard's own form, as a user does. */
async function signIn(token: string, viewport = { width: 1280, height: 860 }): Promise<{ context: BrowserContext; page: Page }> {
  const context = await browser.newContext({ viewport });
  // Chromium's layout-shift entries, summed from the moment a test resets them.
  // (Browser-side code is given as text: this file is compiled without the DOM's types.)
  await context.addInitScript(`
    window.__shift = 0;
    new PerformanceObserver((list) => {
      for (const entry of list.getEntries()) if (!entry.hadRecentInput) window.__shift += entry.value;
    }).observe({ type: "layout-shift", buffered: true });
  `);
  const page = await context.newPage();
  await page.goto(`${base}/dashboard`);
  await page.getByLabel("Token").fill(token);
  await page.getByRole("button", { name: "Open dashboard" }).click();
  await page.getByRole("heading", { name: "Queues" }).waitFor();
  return { context, page };
}

const row = (page: Page, queue: string) => page.locator(`tr[data-queue="${queue}"]`);
const cell = (page: Page, queue: string, state: string) => row(page, queue).locator(`td[data-state="${state}"]`);

beforeAll(async () => {
  mkdirSync(ARTIFACTS, { recursive: true });
  await buildDashboard();
  const redis = new Redis(redisUrl);
  await redis.flushdb();
  redis.disconnect();
  dir = mkdtempSync(join(tmpdir(), "switchyard-dashboard-"));
  gateway = await createGateway({
    config: {
      backends: {
        sqlite: { type: "workerqueue-sql", url: `sqlite:${join(dir, "dashboard.sqlite")}` },
        qless: { type: "qless-redis", url: redisUrl },
      },
      routes: [
        { pattern: "reports*", backend: "qless" },
        { pattern: "*", backend: "sqlite" },
      ],
      auth: {
        tokens: [
          { name: "ops", token: "env:OPS", access: "admin" },
          { name: "viewer", token: "env:VIEWER", access: "read" },
        ],
      },
    },
    env: TOKENS,
  });
  server = await new Promise<Server>((resolve) => {
    const created = serve({ fetch: gateway.app.fetch, port: 0, hostname: "127.0.0.1" }, () => resolve(created as Server));
  });
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  browser = await chromium.launch({ executablePath: chromiumPath(), args: ["--no-sandbox", "--disable-dev-shm-usage"] });

  // Through the /v1 door onto SQLite...
  for (const [i, image] of ["cat.png", "dog.png", "fox.png", "owl.png"].entries()) {
    const res = await api("POST", "/v1/queues/thumbnails/jobs", { name: "resize", data: { image, sizes: [64, 128, 256] }, priority: i });
    expect(res.status).toBe(201);
  }
  // ...and through the qless door onto qless-redis.
  for (const jid of ["weekly-1", "weekly-2", "weekly-3"]) {
    const res = await api("POST", "/qless/put", {
      args: ["producer", "reports", jid, "Reports::Weekly", JSON.stringify({ team: jid }), 0],
    });
    expect(res.status).toBe(200);
  }
}, 120_000);

afterAll(async () => {
  await browser?.close();
  server?.closeAllConnections();
  await new Promise((resolve) => server?.close(resolve));
  await gateway?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("the dashboard in headless Chromium", () => {
  it("shows every queue of both backends, with its type, and counts change live as a worker completes jobs", async () => {
    const { context, page } = await signIn(TOKENS.OPS);
    await textBecomes(cell(page, "thumbnails", "waiting"), "4");
    await textBecomes(cell(page, "reports", "waiting"), "3");
    await expect(row(page, "thumbnails").locator(".badge.type").textContent()).resolves.toBe("workerqueue-sql");
    await expect(row(page, "reports").locator(".badge.type").textContent()).resolves.toBe("qless-redis");
    await textBecomes(page.getByTestId("live-status"), "live");

    const marker = await page.evaluate('window.__marker = "same page"; window.__shift = 0; window.__marker');
    await work("thumbnails");
    await work("reports");
    await work("reports");
    await textBecomes(cell(page, "thumbnails", "completed"), "1");
    await textBecomes(cell(page, "thumbnails", "waiting"), "3");
    await textBecomes(cell(page, "reports", "completed"), "2");
    await textBecomes(cell(page, "reports", "waiting"), "1");
    // Live means the page was told, not reloaded; and numbers changing moved nothing on it.
    expect(await page.evaluate("window.__marker")).toBe(marker);
    expect(await page.evaluate("window.__shift")).toBeLessThan(0.01);
    await shoot(page, "overview", "dashboard-overview.png");
    await context.close();
  }, 90_000);

  it("finds a failed job from its queue page, shows its data and error, and retries it", async () => {
    const failed = await work("thumbnails", "fail");
    const { context, page } = await signIn(TOKENS.OPS);
    await page.getByRole("link", { name: "thumbnails" }).click();
    await page.getByRole("heading", { name: "thumbnails" }).waitFor();
    expect(new URL(page.url()).pathname).toBe("/dashboard/queues/thumbnails");
    await textBecomes(page.getByTestId("count-failed"), "1");
    await page.locator(".tile.state-failed a").click();
    expect(new URL(page.url()).search).toBe("?state=failed");
    await page.locator(`tr[data-job="${failed}"]`).waitFor();
    await expect(page.locator(`tr[data-job="${failed}"] .detail`).textContent()).resolves.toBe("Error: image is corrupt");
    await page.waitForTimeout(300); // the throughput chart settles
    await shoot(page, "queue", "dashboard-queue.png");

    await page.getByRole("link", { name: failed, exact: true }).click();
    await page.getByRole("heading", { name: failed }).waitFor();
    expect(new URL(page.url()).pathname).toBe(`/dashboard/queues/thumbnails/jobs/${failed}`);
    await textBecomes(page.getByTestId("job-state"), "failed");
    expect(await page.getByTestId("job-data").textContent()).toContain('"image": ');
    expect(await page.getByTestId("job-error").textContent()).toContain("at resize (thumbs.js:42:11)");
    await shoot(page, "job-failed", "dashboard-job.png");

    await page.getByRole("button", { name: "Retry" }).click();
    await textBecomes(page.getByTestId("job-state"), "waiting");
    expect((await api("GET", `/v1/queues/thumbnails/jobs/${failed}`)).json.job.state).toBe("waiting");
    await shoot(page, "job-retried");
    await context.close();
  }, 90_000);

  it("pauses and resumes a queue from its page; a URL opens each page directly", async () => {
    const { context, page } = await signIn(TOKENS.OPS);
    await page.goto(`${base}/dashboard/queues/reports`);
    await textBecomes(page.getByTestId("queue-state"), "running");
    await page.getByRole("button", { name: "Pause queue" }).click();
    await textBecomes(page.getByTestId("queue-state"), "paused");
    expect((await api("GET", "/v1/queues/reports/overview")).json.paused).toBe(true);
    expect((await api("POST", "/v1/queues/reports/reserve", { worker: "w" })).json.jobs).toEqual([]);
    await shoot(page, "queue-paused");
    await page.getByRole("button", { name: "Resume queue" }).click();
    await textBecomes(page.getByTestId("queue-state"), "running");
    expect((await api("GET", "/v1/queues/reports/overview")).json.paused).toBe(false);
    await context.close();
  }, 60_000);

  it("shows a read-only token no action buttons anywhere", async () => {
    const { context, page } = await signIn(TOKENS.VIEWER);
    await textBecomes(page.getByTestId("who"), "viewer · read");
    await page.goto(`${base}/dashboard/queues/thumbnails`);
    await textBecomes(page.getByTestId("count-waiting"), /^\d+$/);
    const waitingJob = (await api("GET", "/v1/queues/thumbnails/jobs?state=waiting&limit=1")).json.jobs[0];
    await page.goto(`${base}/dashboard/queues/thumbnails/jobs/${waitingJob.id}`);
    await textBecomes(page.getByTestId("job-state"), "waiting");
    for (const [url, loaded] of [
      [`${base}/dashboard/queues/thumbnails`, "count-waiting"],
      [`${base}/dashboard/queues/thumbnails/jobs/${waitingJob.id}`, "job-state"],
    ] as const) {
      await page.goto(url);
      // Loaded: what an admin would see by now includes the buttons.
      await textBecomes(page.getByTestId(loaded), /^(\d+|waiting)$/);
      expect(await page.locator(".actions").count(), url).toBe(0);
      for (const name of ["Retry", "Promote", "Set", "Cancel job…", "Pause queue", "Resume queue", "Drain…"])
        expect(await page.getByRole("button", { name }).count(), `${name} on ${url}`).toBe(0);
    }
    await shoot(page, "read-only-job");
    await context.close();
  }, 60_000);

  it("is usable from the keyboard and fits a phone-sized window", async () => {
    const { context, page } = await signIn(TOKENS.OPS, { width: 375, height: 740 });
    await textBecomes(cell(page, "thumbnails", "completed"), /^\d+$/);
    // `/` focuses the filter; typing narrows the list.
    await page.locator("body").press("/");
    expect(await page.evaluate('document.activeElement?.getAttribute("type")')).toBe("search");
    await page.keyboard.type("rep");
    await textBecomes(page.locator("tbody tr").first().locator("th a"), "reports");
    expect(await page.locator("tbody tr").count()).toBe(1);
    // Enter on a focused link opens the queue page, and focus moves to its heading.
    await page.getByRole("link", { name: "reports" }).focus();
    await page.keyboard.press("Enter");
    await page.getByRole("heading", { name: "reports" }).waitFor();
    expect(await page.evaluate("document.activeElement?.tagName")).toBe("H1");
    expect(await page.evaluate("document.documentElement.scrollWidth")).toBeLessThanOrEqual(375);
    await shoot(page, "phone-queue");
    await page.goto(`${base}/dashboard`);
    await textBecomes(cell(page, "reports", "completed"), /^\d+$/);
    expect(await page.evaluate("document.documentElement.scrollWidth")).toBeLessThanOrEqual(375);
    await shoot(page, "phone-overview");
    await context.close();
  }, 60_000);
  it("shows the progress of a migration the gateway runs", async () => {
    for (let n = 0; n < 5; n++) expect((await api("POST", "/v1/queues/exports/jobs", { name: "export", data: { n } })).status).toBe(201);
    const started = await api("POST", "/v1/migrations", { kind: "migrate", from: "sqlite", to: "qless", queue: "exports" });
    expect(started.status).toBe(202);
    const { context, page } = await signIn(TOKENS.OPS);
    const panel = page.getByRole("region", { name: "Migrations and bridges" });
    await textBecomes(panel.locator(".run-head strong").first(), "Migration");
    await textBecomes(panel.locator(".run-queues li").first().locator(".num"), "5 of 5", 15_000);
    expect((await api("GET", `/v1/migrations/${started.json.run.id}`)).json.run.state).toBe("finished");
    await shoot(page, "migrations");
    await context.close();
  }, 60_000);

  it("asks a store slow to count one read at a time while events keep coming, and shows the count it answers", async () => {
    const queue = "slow-counts";
    expect((await api("POST", `/v1/queues/${queue}/jobs`, { name: "first" })).status).toBe(201);
    const { context, page } = await signIn(TOKENS.OPS);
    await textBecomes(cell(page, queue, "waiting"), "1");
    await textBecomes(page.getByTestId("live-status"), "live");
    // Each read of the queue's counts takes 1.5 s, as a count of a million SQL rows can.
    let inFlight = 0;
    let mostInFlight = 0;
    let reads = 0;
    await page.route(`**/v1/queues/${queue}/overview`, async (route) => {
      reads++;
      mostInFlight = Math.max(mostInFlight, ++inFlight);
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      await route.fulfill({ response: await route.fetch() });
      inFlight--;
    });
    // An event every 400 ms: each asks for the queue's counts 300 ms later.
    for (let n = 0; n < 6; n++) {
      expect((await api("POST", `/v1/queues/${queue}/jobs`, { name: "more" })).status).toBe(201);
      await new Promise((resolve) => setTimeout(resolve, 400));
    }
    await textBecomes(cell(page, queue, "waiting"), "7", 10_000);
    expect(mostInFlight).toBe(1);
    expect(reads).toBeGreaterThanOrEqual(2);
    expect(reads).toBeLessThanOrEqual(4); // one per event (6) before
    await context.close();
  }, 60_000);
});
