// End-to-end walk through the console in real Chromium (Debian's, driven by playwright-core; no browser
// download). Run by tests/e2e/test_console.py against a live server; usable by hand too:
//
//   E2E_BASE_URL=http://127.0.0.1:8000 E2E_USERNAME=admin E2E_PASSWORD=… \
//   E2E_CLOUD_NODE=aws-spot-xid79 E2E_METAL_NODE=own-bm-xid79 E2E_CLOUD_PROVIDER=AWS \
//   node tests/e2e/console.mjs
//
// E2E_EXPECT_FINDING=1 also requires an active "Xid 79" finding on both nodes' hardware layer;
// E2E_VIEWER_USERNAME (same password) also checks that a viewer sees no write controls.
// Screenshots go to E2E_ARTIFACTS (default test-artifacts/e2e). Exit code 0 = every check passed.
import { mkdirSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");
const require = createRequire(join(root, "frontend", "package.json"));
const { chromium } = require("playwright-core");

const env = (name, fallback) => {
  const value = process.env[name] ?? fallback;
  if (value === undefined) throw new Error(`${name} is not set`);
  return value;
};
const BASE = env("E2E_BASE_URL").replace(/\/$/, "");
const USERNAME = env("E2E_USERNAME");
const PASSWORD = env("E2E_PASSWORD");
const CLOUD_NODE = env("E2E_CLOUD_NODE");
const METAL_NODE = env("E2E_METAL_NODE");
const CLOUD_PROVIDER = env("E2E_CLOUD_PROVIDER");
const EXPECT_FINDING = process.env.E2E_EXPECT_FINDING === "1";
const VIEWER_USERNAME = process.env.E2E_VIEWER_USERNAME ?? "";
const ARTIFACTS = resolve(root, env("E2E_ARTIFACTS", "test-artifacts/e2e"));
const CHROMIUM = env("CHROMIUM_PATH", "/usr/bin/chromium");
const TIMEOUT = 15_000;

mkdirSync(ARTIFACTS, { recursive: true });
const log = (message) => console.log(`[e2e] ${message}`);
const check = (condition, message) => {
  if (!condition) throw new Error(`check failed: ${message}`);
  log(`ok: ${message}`);
};

const browser = await chromium.launch({
  executablePath: CHROMIUM,
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"],
});
const context = await browser.newContext({ viewport: { width: 1440, height: 900 }, locale: "en-US" });
const page = await context.newPage();
page.setDefaultTimeout(TIMEOUT);
const pageErrors = [];
page.on("pageerror", (error) => pageErrors.push(String(error)));
const shot = async (name) => {
  await page.screenshot({ path: join(ARTIFACTS, `${name}.png`), fullPage: true });
  log(`screenshot ${name}.png`);
};

async function openNode(hostname) {
  await page.goto(`${BASE}/nodes`);
  await page.getByLabel("Search").fill(hostname);
  const link = page.getByTestId("nodes-table").getByRole("link", { name: hostname, exact: true });
  await link.waitFor();
  await page.waitForFunction(
    (name) => [...document.querySelectorAll('[data-testid="node-row"]')].every((row) => row.textContent.includes(name)),
    hostname,
  );
  await link.click();
  await page.getByRole("heading", { level: 1, name: new RegExp(hostname) }).waitFor();
  await page.getByTestId("boundary-matrix").waitFor();
}

/** What the hardware row of the boundary matrix says: its owner, and where the findings sit. */
async function hardwareRow() {
  const row = page.locator('[data-testid="boundary-matrix"] tr[data-layer="hardware"]');
  const owner = await row.locator("td.matrix__cell--owner").getAttribute("data-owner");
  const responsible = row.locator('td[data-responsible="true"]');
  const responsibleCount = await responsible.count();
  return {
    owner,
    responsibleParty: responsibleCount ? await responsible.first().getAttribute("data-owner") : null,
    responsibleText: responsibleCount ? await responsible.first().innerText() : "",
    header: await page.locator(`[data-testid="boundary-matrix"] thead th[data-owner="${owner}"]`).innerText(),
  };
}

let failed = false;
try {
  // 1. Log in: an unauthenticated visit lands on the login page and comes back after signing in.
  await page.goto(`${BASE}/nodes`);
  await page.waitForURL(/\/login\?next=/);
  await page.getByLabel("Username").fill(USERNAME);
  await page.getByLabel("Password").fill(PASSWORD);
  await shot("01-login");
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("heading", { level: 1, name: "Nodes" }).waitFor();
  check(new URL(page.url()).pathname === "/nodes", "back on /nodes after login");
  check((await page.getByTestId("current-user").innerText()).includes(USERNAME), "the header names the user");

  // 2. Filter the nodes table: provider + billing mode, then search.
  await page.getByTestId("node-row").first().waitFor();
  await page.getByLabel("Provider").selectOption({ label: CLOUD_PROVIDER });
  await page.waitForURL(/provider=\d+/);
  await page.waitForFunction(
    (provider) => {
      const rows = [...document.querySelectorAll('[data-testid="node-row"]')];
      return rows.length > 0 && rows.every((row) => row.querySelector('[data-col="provider"]')?.textContent === provider);
    },
    CLOUD_PROVIDER,
  );
  const providerRows = await page.getByTestId("node-row").count();
  await page.getByLabel("Search").fill(CLOUD_NODE);
  await page.waitForFunction(
    (name) => {
      const rows = [...document.querySelectorAll('[data-testid="node-row"]')];
      return rows.length === 1 && rows[0].textContent.includes(name);
    },
    CLOUD_NODE,
  );
  check(providerRows >= 1, `filtering by provider ${CLOUD_PROVIDER} leaves ${providerRows} node(s), then search leaves ${CLOUD_NODE}`);
  await shot("02-nodes-filtered");

  // 3. The cloud node: the provider owns the hardware layer.
  await page.getByRole("link", { name: CLOUD_NODE, exact: true }).click();
  await page.getByTestId("boundary-matrix").waitFor();
  if (EXPECT_FINDING) {
    await page.locator('tr[data-layer="hardware"] td[data-responsible="true"]').waitFor();
  }
  const cloud = await hardwareRow();
  check(cloud.owner === "provider", `cloud node: hardware is owned by the provider (${cloud.header})`);
  if (EXPECT_FINDING) {
    check(/Xid 79/.test(cloud.responsibleText), "cloud node: the Xid 79 finding sits on the hardware layer");
    check(cloud.responsibleParty === "provider", `cloud node: responsible party highlighted is the provider`);
    const whom = page.getByTestId("whom-to-call").filter({ hasText: "Xid 79" });
    check((await whom.getAttribute("data-party")) === "provider", "cloud node: 'whom to call' names the provider");
  }
  await page.getByTestId("triage-headline").waitFor();
  // Live metrics: the latest readings and the last hour drawn as sparklines (uPlot on a canvas).
  const gpuTable = page.getByTestId("gpu-table");
  await gpuTable.locator('[role="img"] canvas').first().waitFor();
  const sparkLabel = await gpuTable.locator('[role="img"]').first().getAttribute("aria-label");
  check(/over the last hour/.test(sparkLabel ?? ""), `GPU sparklines are drawn (${sparkLabel})`);
  check(/\d+ %/.test(await gpuTable.locator("tbody tr").nth(1).innerText()), "GPU 1 shows its live utilisation");
  check((await page.getByTestId("events-panel").innerText()).includes("Xid 79"), "the Xid 79 event is listed");
  await shot("03-cloud-node");

  // 4. The owned bare-metal node: us + the hardware vendor own the hardware layer.
  await openNode(METAL_NODE);
  if (EXPECT_FINDING) {
    await page.locator('tr[data-layer="hardware"] td[data-responsible="true"]').waitFor();
  }
  const metal = await hardwareRow();
  check(metal.owner === "hardware_vendor", `owned bare metal: hardware is ours with the vendor (${metal.header})`);
  check(metal.owner !== cloud.owner, "the same layer has a different owner on the two nodes");
  if (EXPECT_FINDING) {
    check(/Xid 79/.test(metal.responsibleText), "owned bare metal: the Xid 79 finding sits on the hardware layer");
    check(metal.responsibleParty === "hardware_vendor", "owned bare metal: responsible party highlighted is us + vendor");
  }
  check(/Not applicable/.test(await page.locator('tr[data-layer="virtualization"]').innerText()),
    "owned bare metal: virtualization is not applicable");
  await page.getByTestId("triage-headline").waitFor();
  if (EXPECT_FINDING) {
    const incidentLink = page.getByTestId("node-remediation").getByRole("link", { name: /^inc-/ }).first();
    await incidentLink.waitFor();
    check(true, "owned bare metal: the node page lists its remediation incident");
    await page.getByTestId("node-remediation").getByRole("button", { name: "Reboot" }).waitFor();
  }
  await shot("04-metal-node");

  // 5. Simplified Chinese, remembered across a reload.
  await page.getByRole("combobox", { name: "Language" }).first().selectOption("zh-CN");
  await page.getByRole("heading", { name: "责任边界" }).waitFor();
  await page.reload();
  await page.getByRole("heading", { name: "责任边界" }).waitFor();
  await page.getByTestId("triage-headline").waitFor();
  check((await page.locator("html").getAttribute("lang")) === "zh-CN", "the language choice survives a reload");
  await shot("05-metal-node-zh");
  await page.getByRole("combobox", { name: "语言" }).first().selectOption("en");

  // 6. The other pages render without crashing, whatever this server has built so far.
  if (EXPECT_FINDING) {
    await page.goto(`${BASE}/incidents?cause=xid`);
    await page.getByRole("heading", { level: 1, name: "Incidents" }).waitFor();
    await page.getByRole("link", { name: /^inc-/ }).first().waitFor();
    const links = page.getByRole("row", { name: /owned-reboot/ }).getByRole("link", { name: /^inc-/ });
    await links.first().click();
    const boundary = page.getByTestId("incident-boundary");
    await boundary.waitFor();
    const text = await boundary.innerText();
    check(/Us \+ hardware vendor/.test(text) && /Hardware/.test(text),
      "the incident shows the boundary row that chose owned-reboot");
    await page.getByTestId("incident-timeline").getByText(/opened by policy/).waitFor();
    await shot("13-incident");
  }
  for (const [path, heading, name] of [["/incidents", "Incidents", "12-incidents"], ["/findings", "Findings", "07-findings"], ["/rules", "Rules", "08-rules-operator"],
    ["/integrations", "Integrations", "08b-integrations"], ["/integrations/deliveries", "Delivery log", "08c-deliveries"],
    ["/ssh", "SSH hosts", "14-ssh-hosts"], ["/enroll", "Enrol nodes", "09-enroll"]]) {
    await page.goto(`${BASE}${path}`);
    await page.getByRole("heading", { level: 1, name: heading }).waitFor();
    await page.locator(".state--loading").first().waitFor({ state: "detached" }).catch(() => undefined);
    await shot(name);
  }
  // An operator creates an enrolment token and gets the one-line install command.
  await page.getByLabel("Name").fill("e2e token");
  await page.getByLabel("Provider").selectOption({ label: CLOUD_PROVIDER });
  await page.getByRole("button", { name: "Create token" }).click();
  const command = await page.getByTestId("created-token").getByRole("textbox").inputValue();
  check(/install\.sh .*--token \S+/.test(command), `the install command is shown once: ${command.replace(/--token \S+/, "--token …")}`);
  await page.getByRole("cell", { name: "e2e token", exact: true }).waitFor();
  await shot("09-enroll-created");

  // An API token: read-only and expiring unless asked otherwise, its key shown once; the key reads the API,
  // cannot write, and stops working once revoked.
  await page.goto(`${BASE}/tokens`);
  await page.getByRole("heading", { level: 1, name: "API tokens" }).waitFor();
  check(!(await page.getByRole("checkbox", { name: "Allow writes" }).isChecked()), "a new API token is read-only unless asked");
  check((await page.getByLabel("Expires in").inputValue()) === "90", "a new API token expires in 90 days unless asked");
  await page.getByLabel("Name").fill("e2e api token");
  await page.getByRole("button", { name: "Create token" }).click();
  const createdToken = page.getByTestId("created-api-token");
  const key = await createdToken.getByRole("textbox").inputValue();
  check(key.length >= 32, "the API token's key is shown once");
  const tokenRow = page.getByTestId("api-tokens").getByRole("row", { name: /e2e api token/ });
  await tokenRow.waitFor();
  check(/read-only/.test(await tokenRow.innerText()), "the token list shows it as read-only");
  await shot("11-tokens-created");
  const asToken = (path, init = {}) => fetch(`${BASE}${path}`, {
    ...init, headers: { Authorization: `Token ${key}`, "Content-Type": "application/json" },
  });
  const me = await asToken("/api/v1/me/");
  check(me.status === 200 && (await me.json()).username === USERNAME, "the new key reads the API as its user");
  const write = await asToken("/api/v1/tokens/", { method: "POST", body: JSON.stringify({ name: "from a read-only key" }) });
  check(write.status === 403, `the read-only key cannot write (${write.status})`);
  await createdToken.getByRole("button", { name: "I have copied it" }).click();
  await createdToken.waitFor({ state: "detached" });
  const keyStillShown = await page.evaluate((secret) => document.body.innerText.includes(secret)
    || [...document.querySelectorAll("input, textarea")].some((field) => field.value === secret), key);
  check(!keyStillShown, "the key is gone from the page once dismissed");
  await tokenRow.getByRole("button", { name: "Revoke token e2e api token" }).click();
  await tokenRow.getByRole("button", { name: "Yes, revoke" }).click();
  await tokenRow.getByText("revoked", { exact: true }).waitFor();
  const afterRevoke = await asToken("/api/v1/me/");
  check(afterRevoke.status === 401 || afterRevoke.status === 403, `the revoked key no longer works (${afterRevoke.status})`);
  await page.goto(`${BASE}/`);
  await page.getByTestId("fleet-stats").waitFor();
  await shot("06-overview");

  // 7. A viewer sees the same data and no write controls.
  if (VIEWER_USERNAME) {
    await page.getByRole("button", { name: "Log out" }).click();
    await page.waitForURL(/\/login/);
    await page.getByLabel("Username").fill(VIEWER_USERNAME);
    await page.getByLabel("Password").fill(PASSWORD);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByTestId("fleet-stats").waitFor();
    await page.goto(`${BASE}/rules`);
    await page.getByTestId("rule-row").first().waitFor();
    const controls = await page.locator("main").locator("input, select, textarea, button").count();
    check(controls === 0, `a viewer sees no write controls on the rules page (${controls} found)`);
    await shot("10-rules-viewer");
    await page.goto(`${BASE}/enroll`);
    await page.getByText(/created by operators/).waitFor();
    check(!(await page.getByRole("button", { name: "Create token" }).count()), "a viewer cannot create enrolment tokens");
    await page.getByRole("link", { name: "API tokens" }).click();
    await page.getByRole("heading", { level: 1, name: "API tokens" }).waitFor();
    check(await page.getByRole("button", { name: "Create token" }).isVisible(), "a viewer manages their own API tokens");
  }

  check(pageErrors.length === 0, `no uncaught errors in the page${pageErrors.length ? `: ${pageErrors.join(" | ")}` : ""}`);
} catch (error) {
  failed = true;
  console.error(`[e2e] FAILED: ${error?.stack ?? error}`);
  if (pageErrors.length) console.error(`[e2e] page errors: ${pageErrors.join(" | ")}`);
  await page.screenshot({ path: join(ARTIFACTS, "failure.png"), fullPage: true }).catch(() => undefined);
} finally {
  await browser.close();
}
process.exit(failed ? 1 : 0);
