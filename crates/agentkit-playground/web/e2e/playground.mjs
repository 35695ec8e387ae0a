// End-to-end check of the playground and /docs in headless Chromium
// (Debian's /usr/bin/chromium, driven by playwright-core), against a real
// `agentkit serve --dev` serving fixtures/agents/weather-agent with the
// offline `test` model. The Rust test bins/agentkit-cli/tests/suite/playground.rs
// starts the servers and runs this script:
//
//   node e2e/playground.mjs --url http://127.0.0.1:PORT --slug weather-agent \
//     [--bearer-url http://127.0.0.1:PORT2 --token T] [--shots DIR]
//     [--keeper-url http://127.0.0.1:PORT3 --kept N]
//
// --keeper-url serves the `keeper` project, whose scripted model tags N
// artifacts, remembers N notes and writes N files in one turn: the
// Artifacts, Memory and Files views are checked against it, page by page.
//
// It exits 0 when every step passed, 1 with the failing step otherwise.
// Screenshots of the main views go to --shots (test artifacts, not committed).

import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { chromium } from "playwright-core";

function args() {
  const out = {};
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i += 2) out[argv[i].replace(/^--/, "")] = argv[i + 1];
  return out;
}

const opts = args();
const url = opts.url;
const slug = opts.slug ?? "weather-agent";
const shots = opts.shots;
const executablePath = opts.chromium ?? process.env.CHROMIUM ?? "/usr/bin/chromium";
if (!url) {
  console.error("usage: node e2e/playground.mjs --url URL [--slug SLUG] [--bearer-url URL --token T] [--shots DIR]");
  process.exit(2);
}
if (shots) mkdirSync(shots, { recursive: true });

const TIMEOUT = 20_000;
let step = "start";
const consoleErrors = [];

async function shot(page, name) {
  if (shots) await page.screenshot({ path: join(shots, `${name}.png`), fullPage: false });
}

function check(cond, message) {
  if (!cond) throw new Error(message);
}

async function newPage(browser) {
  const context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
  const page = await context.newPage();
  page.setDefaultTimeout(TIMEOUT);
  page.on("console", (m) => {
    if (m.type() === "error") consoleErrors.push(`${step}: ${m.text()}`);
  });
  page.on("pageerror", (e) => consoleErrors.push(`${step}: ${e.message}`));
  return page;
}

async function send(page, text) {
  await page.fill("textarea[name=message]", text);
  await page.press("textarea[name=message]", "Enter");
}

// A 2×2 red PNG.
const PNG = Buffer.from(
  "iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAIAAAD91JpzAAAAEElEQVR4nGP4z8AARAwQCgAf7gP9i18U1AAAAABJRU5ErkJggg==",
  "base64",
);

/** Drops the console errors of `step` that are the expected failed answer `status`. */
function expectFailed(status) {
  for (let i = consoleErrors.length - 1; i >= 0; i--) {
    if (consoleErrors[i].startsWith(step) && consoleErrors[i].includes(`${status}`)) consoleErrors.splice(i, 1);
  }
}

async function keeper(browser, keeperUrl, kept) {
  const page = await newPage(browser);
  const playground = `${keeperUrl}/keeper/playground`;
  step = "the keeper's turn tags artifacts, remembers notes and writes files";
  await page.goto(playground);
  // The artifacts tab, open while the turn runs, follows the session's tags.
  await page.click("button[data-tab=artifacts]");
  await send(page, "Keep what you find");
  await page.waitForSelector("[data-role=turn][data-status=completed]", { timeout: 60000 });
  await page.waitForFunction(() => document.querySelectorAll("[data-role=artifacts] [data-role=artifact]").length === 50);
  const sessionId = new URL(page.url()).hash.slice(1);
  check(/^ses_/.test(sessionId), `no session id in the URL: ${page.url()}`);

  step = "the turn's cost, each step's and the session's total are shown";
  const turnCost = await page.locator("[data-role=turn][data-status=completed] [data-role=cost]").innerText();
  check(/^\$\d+\.\d+$/.test(turnCost), `no turn cost: ${turnCost}`);
  const session = await (await page.request.get(`${keeperUrl}/keeper/v1/session/${sessionId}`)).json();
  check(typeof session.costUsd === "number" && session.costUsd > 0, `the session's cost is ${session.costUsd}`);
  const sessionCost = await page.locator("[data-role=session-cost]").innerText();
  check(sessionCost === turnCost, `the session total ${sessionCost} is not the one turn's ${turnCost}`);
  await page.locator(`button.session[data-session="${sessionId}"]`).filter({ hasText: turnCost }).waitFor();
  await page.click("button[data-tab=trace]");
  await page.waitForSelector("[data-role=step-cost][data-step='4']");
  const stepCosts = await page.locator("[data-role=step-cost]").allInnerTexts();
  check(stepCosts.length === 4 && stepCosts.every((c) => /^\$\d/.test(c.trim())), `step costs: ${stepCosts}`);
  await shot(page, "costs");

  step = "the session's Artifacts tab lists them page by page";
  await page.click("button[data-tab=artifacts]");
  const artifacts = page.locator("[data-role=artifacts] [data-role=artifact]");
  await page.waitForFunction(() => document.querySelectorAll("[data-role=artifact]").length === 50);
  await page.click("[data-role=artifacts] [data-role=more]");
  await page.waitForFunction((n) => document.querySelectorAll("[data-role=artifact]").length === n, kept);
  check((await page.locator("[data-role=artifacts] [data-role=more]").count()) === 0, "a more control after the last page");
  // Newest first: the first tagged is last.
  const first = artifacts.last();
  check((await first.getAttribute("data-kind")) === "finding", "the artifact's kind is not shown");
  check((await first.locator("[data-role=artifact-key]").innerText()) === "src/f00.rs", "the artifact's key is not shown");
  const data = await first.locator("[data-role=artifact-data]").innerText();
  check(data.includes('"severity": "high"') && data.includes("\n"), `the data is not pretty JSON: ${data}`);
  check((await first.innerText()).includes("created "), "no times on the artifact");
  await shot(page, "artifacts");

  step = "the Files tab lists the workspace page by page, uploads an image and shows it";
  await page.click("button[data-tab=files]");
  await page.waitForSelector("[data-role=files] [data-role=file]");
  while ((await page.locator("[data-role=files] [data-role=more]").count()) > 0) {
    const before = await page.locator("[data-role=files] [data-role=file]").count();
    await page.click("[data-role=files] [data-role=more]");
    await page.waitForFunction((n) => document.querySelectorAll("[data-role=files] [data-role=file]").length > n, before);
  }
  await page.waitForSelector(`[data-role=file][data-path="notes/n${String(kept - 1).padStart(2, "0")}.txt"]`);
  const note = page.locator('[data-role=file][data-path="notes/n03.txt"] [data-role=file-download]');
  const href = await note.getAttribute("href");
  check(href.endsWith(`/v1/session/${sessionId}/files/notes/n03.txt`), `the download link is ${href}`);
  const downloaded = await page.evaluate(async (h) => (await fetch(h)).text(), href);
  check(downloaded === "note 3", `the download answered ${downloaded}`);
  await page.setInputFiles("[data-role=upload] input[type=file]", { name: "dot.png", mimeType: "image/png", buffer: PNG });
  await page.fill("[data-role=upload] input[name=folder]", "shots");
  await page.click("[data-role=upload] button[type=submit]");
  await page.locator("[data-role=upload-note]").filter({ hasText: "uploaded shots/dot.png" }).waitFor();
  const preview = page.locator('[data-role=file][data-path="shots/dot.png"] img[data-role=file-preview]');
  await preview.waitFor();
  await preview.scrollIntoViewIfNeeded(); // previews load lazily
  await page.waitForFunction(
    () => document.querySelector('[data-path="shots/dot.png"] img[data-role=file-preview]')?.naturalWidth === 2,
  );
  // A path out of the workspace is refused before anything is sent.
  await page.setInputFiles("[data-role=upload] input[type=file]", { name: "x.txt", mimeType: "text/plain", buffer: Buffer.from("x") });
  await page.fill("[data-role=upload] input[name=folder]", "..");
  await page.click("[data-role=upload] button[type=submit]");
  let refusal = await page.locator("[data-role=upload-note].error").innerText();
  check(/inside the workspace/.test(refusal), `no refusal shown: ${refusal}`);
  // A file over the server's 8 MiB cap is refused by the server, and the refusal shown.
  await page.fill("[data-role=upload] input[name=folder]", "");
  await page.setInputFiles("[data-role=upload] input[type=file]", {
    name: "big.bin",
    mimeType: "application/octet-stream",
    buffer: Buffer.alloc(8 * 1024 * 1024 + 1),
  });
  await page.click("[data-role=upload] button[type=submit]");
  await page.locator("[data-role=upload-note].error").filter({ hasText: "payload_too_large" }).waitFor();
  expectFailed(413);
  await shot(page, "files");

  step = "the agent's Artifacts view links each to its session";
  await page.click("button[data-view=artifacts]");
  await page.waitForFunction(() => document.querySelectorAll("[data-role=artifact]").length === 50);
  await page.locator("[data-role=artifact-session]").first().click();
  await page.waitForSelector("button[data-tab=events]");
  check(new URL(page.url()).hash.slice(1) === sessionId, "the artifact's session did not open");

  step = "the Memory view lists, edits and deletes memories";
  await page.click("button[data-view=memory]");
  const memories = page.locator("[data-role=memories] [data-role=memory]");
  await page.waitForFunction(() => document.querySelectorAll("[data-role=memory]").length === 50);
  await page.click("[data-role=memories] [data-role=more]");
  await page.waitForFunction((n) => document.querySelectorAll("[data-role=memory]").length === n, kept);
  const agentWide = page.locator("[data-role=memory][data-scope=agent]");
  check((await agentWide.count()) === 1, "the agent-wide memory is not marked");
  check((await agentWide.innerText()).includes("kept by local"), `no provenance: ${await agentWide.innerText()}`);
  const mem = memories.first();
  const memId = await mem.getAttribute("data-memory");
  await mem.locator("[data-role=memory-edit]").click();
  await mem.locator("textarea").fill("prefers answers in Norwegian");
  await mem.locator("[data-role=memory-save]").click();
  await mem.locator("[data-role=memory-text]").filter({ hasText: "prefers answers in Norwegian" }).waitFor();
  const stored = await page.evaluate(
    async (id) => (await (await fetch(`/keeper/v1/memory/${id}`)).json()).memory.text,
    memId,
  );
  check(stored === "prefers answers in Norwegian", `the edit is not stored: ${stored}`);
  // A blank text is refused by the API, and the page says why.
  await mem.locator("[data-role=memory-edit]").click();
  await mem.locator("textarea").fill("   ");
  await mem.locator("[data-role=memory-save]").click();
  await mem.locator("[data-role=memory-error]").waitFor();
  expectFailed(400);
  await mem.locator("button", { hasText: "cancel" }).click();
  page.once("dialog", (d) => d.accept());
  await mem.locator("[data-role=memory-delete]").click();
  await page.waitForFunction((n) => document.querySelectorAll("[data-role=memory]").length === n, kept - 1);
  const gone = await page.evaluate(async (id) => (await fetch(`/keeper/v1/memory/${id}`)).status, memId);
  check(gone === 404, `the deleted memory answers ${gone}`);
  expectFailed(404);
  await shot(page, "memory");
  await memories.first().locator("[data-role=memory-session]").click();
  await page.waitForSelector("button[data-tab=events]");
  check(new URL(page.url()).hash.slice(1) === sessionId, "the memory's session did not open");

  step = "an image attached to a message and one a tool returned show in the chat";
  await page.setInputFiles("input[name=attach]", { name: "dot.png", mimeType: "image/png", buffer: PNG });
  await page.locator("[data-role=attached] [data-file='dot.png']").waitFor();
  await send(page, "What does this show?");
  await page.waitForFunction(() => document.querySelectorAll("[data-role=turn][data-status=completed]").length === 2);
  check((await page.locator("[data-role=attached]").count()) === 0, "the attachment stays after sending");
  const received = await (await page.request.get(`${keeperUrl}/keeper/v1/session/${sessionId}/events`)).text();
  const withImage = received
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l))
    .find((ev) => ev.type === "message.received" && ev.data.images?.some((i) => i.path === "dot.png"));
  check(withImage, "the image is not on the message");
  for (const role of ["message-image", "tool-image"]) {
    const img = page.locator(`img[data-role=${role}]`).last();
    await img.waitFor();
    await img.scrollIntoViewIfNeeded();
    await page.waitForFunction((r) => [...document.querySelectorAll(`img[data-role=${r}]`)].some((i) => i.naturalWidth === 2), role);
  }
  check(
    (await page.locator("img[data-role=tool-image]").last().getAttribute("data-path")).startsWith(".agentkit/images/"),
    "the tool's image is not shown from the workspace",
  );
  await shot(page, "images");

  step = "the session is saved as an eval case of the project";
  await page.click("button[data-tab=events]");
  page.once("dialog", (d) => d.accept("from-playground"));
  await page.click("[data-role=save-eval]");
  const saved = await page.locator("[data-role=saved-eval]").innerText();
  check(/from-playground\.eval\.toml/.test(saved) && /recording/.test(saved), `not saved: ${saved}`);
  await page.close();
}

async function main() {
  const browser = await chromium.launch({
    executablePath,
    headless: true,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--disable-dev-shm-usage",
    ],
  });
  try {
    const page = await newPage(browser);
    const playground = `${url}/${slug}/playground`;

    step = "index links the playground";
    await page.goto(`${url}/`);
    await page.click(`a[href="/${slug}/playground"]`);
    await page.waitForURL(playground);
    await page.waitForSelector("header .slug");

    step = "a message streams its reply, with tool calls inline";
    await send(page, "What is the weather in **Paris**?");
    await page.waitForSelector('[data-role=user]:has-text("What is the weather")');
    await page.waitForSelector('[data-role=tool-call][data-tool=get_weather] .badge.done, [data-role=tool-call][data-tool=get_weather] .badge.ok');
    step = "a parked call is approved from the page and the turn completes";
    const parked = page.locator("[data-role=tool-call].parked").first();
    await parked.waitFor();
    const parkedTool = await parked.getAttribute("data-tool");
    check(parkedTool === "post_alert", `the parked call is ${parkedTool}, not post_alert`);
    await shot(page, "chat-parked");
    await parked.locator("button.approve").click();
    await page.waitForSelector("[data-role=turn][data-status=completed]");
    const reply = page.locator("[data-role=assistant]").last();
    await page.waitForSelector('[data-role=assistant][data-done=true]');
    const replyText = await reply.innerText();
    check(replyText.includes("What is the weather"), `the reply does not quote the message: ${replyText}`);
    check(
      (await page.locator("[data-role=tool-call][data-tool=post_alert] [data-role=decision]").innerText()).includes("approved by local"),
      "the decision is not shown",
    );
    const usage = await page.locator("[data-role=turn][data-status=completed] [data-role=usage]").first().innerText();
    check(/in \d+ · out \d+ · cache read \d+ · cache write \d+/.test(usage), `no usage footer: ${usage}`);
    // The offline test model has no price: its cost is unknown, never $0.
    check(usage.includes("cost unknown"), `no unknown cost in the footer: ${usage}`);
    await shot(page, "chat-completed");

    step = "the raw pane shows the NDJSON wire events";
    await page.click("button[data-tab=raw]");
    const raw = await page.locator("[data-role=raw]").innerText();
    const lines = raw.split("\n").filter(Boolean);
    check(lines.length > 5, `raw pane has ${lines.length} lines`);
    for (const l of lines) JSON.parse(l);
    check(raw.includes('"type":"turn.completed"'), "raw pane lacks turn.completed");
    step = "the logs tab reads the host's recent lines about the session";
    await page.click("button[data-tab=logs]");
    await page.waitForSelector("[data-role=logs] pre, [data-role=logs] p.muted");
    check(
      (await page.locator("[data-role=logs] .error").count()) === 0,
      `the logs tab shows an error: ${await page.locator("[data-role=logs]").innerText()}`,
    );
    await page.click("button[data-tab=trace]");
    await page.waitForSelector(".trace-turn");
    await shot(page, "trace");

    step = "the trace view shows what the model saw at each step";
    await page.locator("[data-role=open-context][data-step='1']").first().click();
    const context = page.locator("[data-role=step-context][data-step='1']").first();
    await context.waitFor();
    const size = await context.locator("[data-role=context-size]").innerText();
    check(/\d+ messages? · [\d.k]+ chars · ~[\d.k]+ tokens/.test(size), `no context size: ${size}`);
    check(
      (await context.locator("[data-role=context-conversation]").innerText()).includes("What is the weather"),
      "the step's conversation lacks the user message",
    );
    check((await context.locator("[data-role=context-tools] li[data-tool=get_weather]").count()) === 1, "get_weather is not offered");
    await context.locator("[data-role=context-system] summary").click();
    check((await context.locator("[data-role=context-system] pre").innerText()).length > 20, "no system prompt");
    // The second step saw the first one's tool calls and their results.
    await page.locator("[data-role=open-context][data-step='2']").first().click();
    const stepTwo = page.locator("[data-role=step-context][data-step='2']").first();
    await stepTwo.waitFor();
    check(
      (await stepTwo.locator("[data-role=context-conversation]").innerText()).includes("tool get_weather"),
      "step 2's conversation lacks the get_weather result",
    );
    await shot(page, "step-context");

    step = "the step view shows a step's request: tokens by part and the diff to the step before";
    await page.locator("[data-role=open-request][data-step='2']").first().click();
    const request = page.locator("[data-role=step-request][data-step='2']").first();
    await request.waitFor();
    check((await request.locator("[data-role=token-bars] .token-bar").count()) === 5, "no token bars");
    const toolResults = await request.locator(".token-bar[data-part=toolResults]").innerText();
    check(!/\b0$/.test(toolResults.trim()), `step 2 has no tool results: ${toolResults}`);
    const diff = await request.locator("[data-role=diff]").innerText();
    check(/added/.test(diff), `step 2's diff shows nothing added: ${diff}`);
    await request.locator("[data-role=request-body] summary").click();
    check(
      (await request.locator("[data-role=request-body]").innerText()).includes("offline model"),
      "the test model's request body is not explained",
    );
    await page.locator("[data-role=open-request][data-step='1']").first().click();
    await page.locator("[data-role=step-request][data-step='1'] [data-role=diff]").filter({ hasText: "first step" }).waitFor();
    await shot(page, "step-request");
    await page.click("button[data-tab=events]");

    step = "a follow-up rotates the token; a deny records the reason";
    await send(page, "And tomorrow?");
    const second = page.locator("[data-role=turn]").nth(1);
    await second.locator("[data-role=tool-call].parked").waitFor();
    await second.locator("input.reason").fill("not today");
    await second.locator("button.deny").click();
    await second.locator("[data-role=decision]").filter({ hasText: "denied by local: not today" }).waitFor();
    await page.waitForFunction(() => document.querySelectorAll("[data-role=turn][data-status=completed]").length === 2);
    const sessionId = new URL(page.url()).hash.slice(1);
    check(/^ses_/.test(sessionId), `no session id in the URL: ${page.url()}`);

    step = "sessions are listed after a reload and one is replayed";
    await page.goto(playground);
    await page.waitForSelector(`button.session[data-session="${sessionId}"]`);
    await page.click(`button.session[data-session="${sessionId}"]`);
    await page.waitForFunction(() => document.querySelectorAll("[data-role=user]").length === 2);
    await page.waitForFunction(() => document.querySelectorAll("[data-role=turn][data-status=completed]").length === 2);
    await shot(page, "replayed");

    step = "the event inspector forks the session: edit and resend the second message";
    await page.click("button[data-tab=events]");
    const received = page.locator("li[data-type='message.received']");
    await page.waitForFunction(() => document.querySelectorAll("li[data-type='message.received']").length === 2);
    await received.nth(1).locator("button.event-row").click();
    page.once("dialog", (d) => d.accept("And on Sunday?"));
    await received.nth(1).locator("[data-role=edit-resend]").click();
    await page.waitForFunction((old) => location.hash.slice(1) !== old && /^#ses_/.test(location.hash), sessionId);
    const forkId = new URL(page.url()).hash.slice(1);
    await page.waitForSelector('[data-role=user]:has-text("And on Sunday?")');
    await page.waitForSelector("li[data-type='session.forked']");
    check(
      (await page.locator('[data-role=user]:has-text("And tomorrow?")').count()) === 0,
      "the fork still shows the message it replaced",
    );
    await page.waitForSelector(`button.session[data-session="${forkId}"]`);
    step = "a fork inside a turn is refused with the nearest boundaries";
    const started = page.locator("li[data-type='turn.started']").first();
    await started.locator("button.event-row").click();
    await started.locator("[data-role=fork]").click();
    const refused = await page.locator("[data-role=fork-error]").first().innerText();
    check(/turn boundary/.test(refused), `no refusal shown: ${refused}`);
    // The browser logs the expected 409 as a failed resource: not an error here.
    for (let i = consoleErrors.length - 1; i >= 0; i--) {
      if (consoleErrors[i].startsWith(step) && consoleErrors[i].includes("409")) consoleErrors.splice(i, 1);
    }
    await shot(page, "forked");
    // The fork's turn parked its alert, as the original's did: deny it, so
    // the inbox below starts empty.
    const forkParked = page.locator("[data-role=tool-call].parked").first();
    await forkParked.waitFor();
    await forkParked.locator("button.deny").click();
    await page.waitForFunction(() => document.querySelectorAll("[data-role=tool-call].parked").length === 0);

    step = "an operator opens, replays and resolves a channel principal's session";
    // Monitoring reports through the alerts channel with its own token, so
    // the session belongs to `monitoring`; the loopback caller under --dev
    // is the operator and sees it.
    const alert = await fetch(`${url}/${slug}/v1/channels/alerts/alert/Bergen`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        authorization: `Bearer ${opts["channel-token"] ?? "test-token"}`,
        "x-forwarded-for": "203.0.113.7",
      },
      body: JSON.stringify({ condition: "storm surge", severity: "warning" }),
    });
    check(alert.status === 202, `the alert answered ${alert.status}`);
    const alertSession = (await alert.json()).sessionId;
    await page.goto(playground);
    await page.waitForSelector("[data-role=caller][data-operator=true]");
    const listed = page.locator(`button.session[data-session="${alertSession}"]`);
    await listed.waitFor();
    check((await listed.innerText()).includes("monitoring"), `the owner is not shown: ${await listed.innerText()}`);
    await listed.click();
    await page.waitForSelector('[data-role=user]:has-text("Monitoring reports warning")');
    const alertCall = page.locator("[data-role=tool-call].parked").first();
    await alertCall.waitFor();
    await shot(page, "operator-session");
    await alertCall.locator("button.approve").click();
    await page.waitForSelector("[data-role=turn][data-status=completed]");
    await page
      .locator("[data-role=tool-call][data-tool=post_alert] [data-role=decision]")
      .filter({ hasText: "approved by operator:local" })
      .waitFor();
    // A follow-up from the operator, who holds no token for it.
    await page.waitForSelector("[data-role=token-note]:has-text('As an operator')");
    await send(page, "Any update from Bergen?");
    const followed = page.locator("[data-role=turn]").nth(1);
    await followed.locator("[data-role=tool-call].parked").waitFor();
    await followed.locator("[data-role=tool-call].parked button.approve").click();
    await page.waitForFunction(() => document.querySelectorAll("[data-role=turn][data-status=completed]").length === 2);

    step = "the inbox lists a parked call of another session and approves it";
    await page.click("button.new");
    await send(page, "Post an alert for Oslo");
    await page.locator("[data-role=tool-call].parked").first().waitFor();
    await page.click("button[data-view=inbox]");
    const item = page.locator("[data-role=inbox-item]").first();
    await item.waitFor();
    await shot(page, "inbox");
    await item.locator("button.approve").click();
    await page.waitForSelector("text=Nothing waits for approval.");

    step = "a tool is called from the agent surface and a schedule dispatched";
    await page.click("button[data-view=agent]");
    const tool = page.locator("details.surface-item[data-tool=get_weather]");
    await tool.locator("summary").click();
    await tool.locator("textarea").fill('{"city": "Oslo"}');
    await tool.locator("button").click();
    await tool.locator("pre.json").filter({ hasText: '"toolName": "get_weather"' }).waitFor();
    const schedule = page.locator("[data-schedule]").first();
    if ((await schedule.count()) > 0) {
      await schedule.locator("button").click();
      await schedule.locator("pre.json").filter({ hasText: '"ok": true' }).waitFor();
    }
    const channel = page.locator("details.surface-item[data-channel=alerts]");
    await channel.locator("summary").click();
    const route = channel.locator('[data-route="GET /weather-agent/v1/channels/alerts/weather"]');
    await route.locator("textarea[name=query]").fill('{"city": "Oslo"}');
    await route.locator("input[name=authorization]").fill(`Bearer ${opts["channel-token"] ?? "test-token"}`);
    check((await route.locator("[data-role=curl]").innerText()).includes("/alerts/weather?city=Oslo"), "no curl for the route");
    await route.locator("button.try").click();
    await route.locator("[data-role=try-output]").filter({ hasText: /^200 / }).waitFor();
    await page.click("button[data-role=run-evals]");
    const run = page.locator("[data-run][data-status=completed]").first();
    await run.waitFor({ timeout: 60000 });
    await run.locator("button").click();
    await page.locator("[data-role=eval-report] tr[data-case]").first().waitFor();
    check(
      (await page.locator("[data-role=eval-report] tr[data-outcome=passed]").count()) > 0,
      "no eval case passed in the playground's run",
    );
    await shot(page, "agent");

    step = "the API view renders the OpenAPI document: operations by tag, parameters, schemas";
    await page.click("button[data-view=api]");
    const apiView = page.locator("[data-role=openapi]");
    await apiView.locator("section.api-group[data-tag=sessions]").waitFor();
    check((await apiView.locator("section.api-group[data-tag='channel:alerts']").count()) === 1, "no group of the channel's routes");
    const start = apiView.locator('details.api-op[data-op="POST /v1/session"]');
    await start.locator("summary").click();
    // Its JSON body and its multipart form both have a `message`.
    await start.locator("[data-media='application/json'] [data-role=op-body] tr[data-field=message]").waitFor();
    await start.locator("[data-media='multipart/form-data'] [data-role=op-body] tr[data-field=message]").waitFor();
    check(
      (await start.locator("[data-role=op-answer][data-status='200'] [data-role=op-answer-schema] tr[data-field=sessionId]").count()) === 1,
      "the answer's schema has no sessionId field",
    );
    const events = apiView.locator('details.api-op[data-op="GET /v1/session/{sessionId}/events"]');
    await events.locator("summary").click();
    await events.locator("[data-role=op-params] tr[data-param=sessionId]").waitFor();
    await page.fill("input[name=api-filter]", "client-calls");
    await page.waitForFunction(() => document.querySelectorAll("details.api-op").length === 2);
    check(
      (await apiView.locator("details.api-op").evaluateAll((ops) => ops.map((o) => o.dataset.op))).join(",") ===
        "GET /v1/session/{sessionId}/client-calls,POST /v1/session/{sessionId}/client-calls",
      "the filter does not keep the client-calls operations",
    );
    const answer = apiView.locator('details.api-op[data-op="POST /v1/session/{sessionId}/client-calls"]');
    await answer.locator("summary").click();
    await answer.locator("[data-role=op-body] tr[data-field=callId]").waitFor();
    await shot(page, "api");

    step = "slash commands complete and call a channel route";
    await page.click("button[data-view=chat]");
    await page.fill("textarea[name=message]", "/al");
    await page.locator("[data-role=completions]").filter({ hasText: "/alerts/weather" }).waitFor();
    await send(page, "/help");
    await page.locator("[data-role=note]").filter({ hasText: "/alerts/alert/:city" }).waitFor();
    // The route's Authorization was remembered from its Try form.
    await send(page, '/alerts/weather {"city": "Oslo"}');
    await page.locator("[data-role=note]").filter({ hasText: "/alerts/weather?city=Oslo → 200" }).waitFor();
    await shot(page, "commands");

    step = "/docs renders a page with navigation and working links";
    await page.goto(`${url}/docs`);
    await page.waitForSelector("article.md h1");
    await page.click('nav.docs-nav a[href="/docs/reference/http-api"]');
    await page.waitForURL(`${url}/docs/reference/http-api`);
    check((await page.locator("article h1").innerText()) === "HTTP API", "the HTTP API page has no title");
    await page.waitForSelector("h2#approvals");
    await page.waitForSelector("nav.toc a[href='#approvals']");
    await page.waitForSelector("article pre code.hljs");
    await shot(page, "docs");
    await page.close();

    if (opts["bearer-url"]) {
      step = "the bearer field makes a --bearer-token host usable";
      const p2 = await newPage(browser);
      // A 401 is expected (and logged by Chromium) before the token is set.
      const before = consoleErrors.length;
      await p2.goto(`${opts["bearer-url"]}/${slug}/playground`);
      await p2.waitForSelector("text=401 unauthorized");
      await p2.fill("input[name=bearer]", opts.token);
      await p2.click(".token button");
      await p2.waitForFunction(() => !document.body.innerText.includes("401 unauthorized"));
      // The page's first requests answer 401 in parallel, and Chromium may
      // log some of them after the 401 notice shows: drop only 401s logged
      // before the token was set; anything else, and anything after, counts.
      const early = consoleErrors.splice(before);
      consoleErrors.push(...early.filter((e) => !e.includes("status of 401")));
      const errorsBefore = consoleErrors.length;
      await send(p2, "Hello with a token");
      await p2.locator("[data-role=tool-call].parked").first().waitFor();
      await p2.locator("[data-role=tool-call].parked button.approve").first().click();
      await p2.waitForSelector("[data-role=turn][data-status=completed]");
      check(!p2.url().includes(opts.token), "the token is in the URL");

      step = "with a token, files upload, previews and downloads carry it";
      await p2.click("button[data-tab=files]");
      await p2.waitForSelector("[data-role=files] [data-role=file]");
      await p2.setInputFiles("[data-role=upload] input[type=file]", { name: "dot.png", mimeType: "image/png", buffer: PNG });
      await p2.click("[data-role=upload] button[type=submit]");
      await p2.locator("[data-role=upload-note]").filter({ hasText: "uploaded dot.png" }).waitFor();
      const tokenPreview = p2.locator('[data-role=file][data-path="dot.png"] img[data-role=file-preview]');
      await tokenPreview.waitFor();
      await tokenPreview.scrollIntoViewIfNeeded();
      check((await tokenPreview.getAttribute("src")).startsWith("data:image/png"), "the preview is not fetched with the token");
      await p2.waitForFunction(
        () => document.querySelector('[data-path="dot.png"] img[data-role=file-preview]')?.naturalWidth === 2,
      );
      const [download] = await Promise.all([
        p2.waitForEvent("download"),
        p2.locator('[data-role=file][data-path="dot.png"] [data-role=file-download]').click(),
      ]);
      const saved = await download.createReadStream();
      const chunks = [];
      for await (const c of saved) chunks.push(c);
      check(Buffer.concat(chunks).equals(PNG), "the download is not the uploaded file");
      check(consoleErrors.length === errorsBefore, "errors after the token was set");
      await shot(p2, "bearer");
      await p2.close();
    }

    if (opts["keeper-url"]) await keeper(browser, opts["keeper-url"], Number(opts.kept ?? 55));

    step = "no console error";
    check(consoleErrors.length === 0, `console errors:\n${consoleErrors.join("\n")}`);
  } finally {
    await browser.close();
  }
}

try {
  await main();
  console.log("playground e2e: ok");
} catch (e) {
  console.error(`playground e2e failed at "${step}": ${e.message}`);
  if (consoleErrors.length) console.error(`console errors:\n${consoleErrors.join("\n")}`);
  process.exit(1);
}
