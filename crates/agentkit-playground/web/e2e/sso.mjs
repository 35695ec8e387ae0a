// OIDC sign-in to the playground in headless Chromium (Debian's
// /usr/bin/chromium, driven by playwright-core), against a real
// `agentkit serve --oidc-issuer …` and the provider stand-in of the Rust
// test bins/agentkit-cli/tests/suite/sso.rs, which starts both and runs:
//
//   node e2e/sso.mjs --url http://127.0.0.1:PORT --slug weather-agent --principal oidc:alice
//
// The browser says it comes through a proxy (X-Forwarded-For), so the host
// treats it as a remote browser, not the loopback developer: the playground
// sends it to /login, the provider redirects back, the page loads signed
// in; a message and an approval (state-changing calls, authenticated by the
// cookie, CSRF-checked by their Origin) complete a turn; logout ends it.
// Exits 0 when every step passed, 1 with the failing step otherwise.

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
const principal = opts.principal ?? "oidc:alice";
const executablePath = opts.chromium ?? process.env.CHROMIUM ?? "/usr/bin/chromium";
let step = "start";

function check(cond, message) {
  if (!cond) throw new Error(message);
}

async function main() {
  const browser = await chromium.launch({
    executablePath,
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-dev-shm-usage"],
  });
  try {
    const context = await browser.newContext({ extraHTTPHeaders: { "x-forwarded-for": "203.0.113.9" } });
    const page = await context.newPage();
    page.setDefaultTimeout(20_000);
    const playground = `${url}/${slug}/playground`;

    step = "the playground sends a browser without a session through the provider and back";
    const visited = [];
    page.on("request", (r) => {
      if (r.isNavigationRequest()) visited.push(new URL(r.url()).pathname);
    });
    await page.goto(playground);
    await page.waitForURL(playground);
    await page.waitForSelector("header .slug");
    check(visited.includes("/login") && visited.includes("/authorize") && visited.includes("/login/callback"),
      `the browser did not go through the sign-in: ${visited.join(" → ")}`);

    step = "the session cookie is HttpOnly and SameSite=Lax, the CSRF cookie readable";
    const cookies = await context.cookies(url);
    const session = cookies.find((c) => c.name === "agentkit_session");
    check(session && session.httpOnly && session.sameSite === "Lax", `session cookie: ${JSON.stringify(session)}`);
    check(!(await page.evaluate(() => document.cookie)).includes("agentkit_session"), "the page can read the session cookie");

    step = "a message and an approval from the page complete a turn as the signed-in person";
    await page.fill("textarea[name=message]", "What is the weather in Oslo?");
    await page.press("textarea[name=message]", "Enter");
    const parked = page.locator("[data-role=tool-call].parked").first();
    await parked.waitFor();
    await parked.locator("button.approve").click();
    await page.waitForSelector("[data-role=turn][data-status=completed]");
    const decision = await page.locator("[data-role=tool-call][data-tool=post_alert] [data-role=decision]").innerText();
    check(decision.includes(`approved by ${principal}`), `the decision: ${decision}`);

    step = "the API answers the cookie with the principal";
    const info = await page.evaluate(async (u) => (await fetch(u)).json(), `${url}/${slug}/v1/info`);
    check(info.caller.principalId === principal && info.caller.authenticator === "oidcSession",
      `caller: ${JSON.stringify(info.caller)}`);

    step = "logout ends the session: the playground asks to sign in again";
    await page.goto(`${url}/logout`);
    const after = await context.cookies(url);
    check(!after.some((c) => c.name === "agentkit_session" && c.value), "the session cookie survived logout");
    const res = await page.evaluate(async (u) => (await fetch(u)).status, `${url}/${slug}/v1/info`);
    check(res === 401, `after logout the API answered ${res}`);
  } finally {
    await browser.close();
  }
}

main().then(
  () => {
    console.log("sso: every step passed");
    process.exit(0);
  },
  (e) => {
    console.error(`sso: failed at "${step}": ${e.message}`);
    process.exit(1);
  },
);
