// Opens an HTML report in headless Chromium, measures what it rendered and
// saves a screenshot. No dependencies: Node's standard library drives
// Chromium over the DevTools protocol on a pipe (--remote-debugging-pipe:
// Chromium reads commands on fd 3 and writes replies and events on fd 4,
// each a JSON message ended by a NUL byte).
//
//   node tests/report/check.mjs REPORT.html SCREENSHOT.png [CHROMIUM]
//
// Prints one JSON object: every <svg> with its rendered size and number of
// shapes, the console errors and uncaught exceptions, the requests other
// than the page itself, the <script> elements, and the screenshot's size.
// Exits 2 when Chromium cannot be driven (the caller says why).

import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";

const [report, screenshot, chromium = "/usr/bin/chromium"] = process.argv.slice(2);
if (!report || !screenshot) {
  console.error("usage: node check.mjs REPORT.html SCREENSHOT.png [CHROMIUM]");
  process.exit(2);
}
const WIDTH = 1200;
const SHOT_HEIGHT = 3300;
const profile = mkdtempSync(join(tmpdir(), "kanon-chromium-"));
const browser = spawn(
  chromium,
  [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--hide-scrollbars",
    "--remote-debugging-pipe",
    `--user-data-dir=${profile}`,
    `--window-size=${WIDTH},900`,
  ],
  { stdio: ["ignore", "ignore", "pipe", "pipe", "pipe"] },
);
let chromeLog = "";
browser.stderr.on("data", (d) => (chromeLog += d));
const fail = (why) => {
  console.error(`${why}\n--- chromium stderr\n${chromeLog.slice(-4000)}`);
  browser.kill("SIGKILL");
  rmSync(profile, { recursive: true, force: true });
  process.exit(2);
};
browser.on("error", (e) => fail(`cannot start ${chromium}: ${e.message}`));
const timer = setTimeout(() => fail("timed out after 60 s"), 60_000);

const toChrome = browser.stdio[3];
const fromChrome = browser.stdio[4];
let nextId = 1;
const pending = new Map();
const listeners = [];
let buffered = "";
fromChrome.on("data", (chunk) => {
  buffered += chunk.toString("utf8");
  let end;
  while ((end = buffered.indexOf("\0")) >= 0) {
    const msg = JSON.parse(buffered.slice(0, end));
    buffered = buffered.slice(end + 1);
    if (msg.id && pending.has(msg.id)) {
      const { ok, ko, method } = pending.get(msg.id);
      pending.delete(msg.id);
      if (msg.error) ko(new Error(`${method}: ${msg.error.message}`));
      else ok(msg.result);
    } else if (msg.method) {
      for (const l of listeners) l(msg);
    }
  }
});
const send = (method, params = {}, sessionId) =>
  new Promise((ok, ko) => {
    const id = nextId++;
    pending.set(id, { ok, ko, method });
    toChrome.write(JSON.stringify({ id, method, params, sessionId }) + "\0");
  });
const once = (method) =>
  new Promise((ok) => {
    const l = (msg) => {
      if (msg.method === method) {
        listeners.splice(listeners.indexOf(l), 1);
        ok(msg.params);
      }
    };
    listeners.push(l);
  });

const errors = [];
const requests = [];
listeners.push((msg) => {
  const p = msg.params;
  if (msg.method === "Runtime.consoleAPICalled" && ["error", "warning", "assert"].includes(p.type)) {
    errors.push(`console.${p.type}: ${p.args.map((a) => a.value ?? a.description).join(" ")}`);
  } else if (msg.method === "Runtime.exceptionThrown") {
    errors.push(`exception: ${p.exceptionDetails.text} ${p.exceptionDetails.exception?.description ?? ""}`);
  } else if (msg.method === "Log.entryAdded" && ["error", "warning"].includes(p.entry.level)) {
    errors.push(`log ${p.entry.level} (${p.entry.source}): ${p.entry.text}`);
  } else if (msg.method === "Network.requestWillBeSent") {
    requests.push(p.request.url);
  }
});

try {
  const { targetId } = await send("Target.createTarget", { url: "about:blank" });
  const { sessionId } = await send("Target.attachToTarget", { targetId, flatten: true });
  const s = (method, params) => send(method, params, sessionId);
  await s("Runtime.enable");
  await s("Log.enable");
  await s("Network.enable");
  await s("Page.enable");
  const url = pathToFileURL(resolve(report)).href;
  const loaded = once("Page.loadEventFired");
  await s("Page.navigate", { url });
  await loaded;
  const measure = `JSON.stringify({
    height: Math.ceil(document.documentElement.scrollHeight),
    scripts: document.querySelectorAll("script").length,
    external: [...document.querySelectorAll("[src],link[href]")].map(e => e.getAttribute("src") || e.getAttribute("href")),
    svgs: [...document.querySelectorAll("svg")].map(svg => {
      const r = svg.getBoundingClientRect();
      const shapes = [...svg.querySelectorAll("rect,line,path,circle,polygon,polyline")];
      const drawn = shapes.filter(e => { const b = e.getBBox(); return b.width > 0 || b.height > 0; });
      return { label: svg.getAttribute("aria-label"), width: r.width, height: r.height,
               shapes: shapes.length, drawn: drawn.length, texts: svg.querySelectorAll("text").length };
    }),
  })`;
  const { result } = await s("Runtime.evaluate", { expression: measure, returnByValue: true });
  const page = JSON.parse(result.value);
  await s("Emulation.setDeviceMetricsOverride", {
    width: WIDTH,
    height: page.height,
    deviceScaleFactor: 1,
    mobile: false,
  });
  // The top of the page (job, achievements, risk, the first attributes):
  // a whole Adult report would make a PNG of about 1 MB.
  const shot = await s("Page.captureScreenshot", {
    format: "png",
    captureBeyondViewport: true,
    clip: { x: 0, y: 0, width: WIDTH, height: Math.min(page.height, SHOT_HEIGHT), scale: 1 },
  });
  const png = Buffer.from(shot.data, "base64");
  writeFileSync(screenshot, png);
  // Events still in flight (a late console message) arrive before closing.
  await new Promise((ok) => setTimeout(ok, 200));
  const pageUrl = url;
  console.log(
    JSON.stringify({
      ...page,
      errors,
      requests: requests.filter((u) => u !== pageUrl),
      screenshot_bytes: png.length,
    }),
  );
  const exited = new Promise((ok) => browser.once("exit", ok));
  await send("Browser.close").catch(() => {});
  await Promise.race([exited, new Promise((ok) => setTimeout(ok, 5000))]);
} catch (e) {
  fail(`driving chromium failed: ${e.message}`);
}
clearTimeout(timer);
browser.kill("SIGKILL");
rmSync(profile, { recursive: true, force: true, maxRetries: 5, retryDelay: 100 });
process.exit(0);
