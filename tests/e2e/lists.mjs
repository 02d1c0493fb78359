// The triage lists in real Chromium (playwright-core, Debian's Chromium): the nodes and findings lists, saved
// views, CSV downloads, bulk actions, forming conditions, a reclaimed spot node and the node page's header.
// Run by tests/e2e/test_lists.py once per language and width (E2E_LANG, E2E_WIDTH); E2E_NODES is a JSON map
// of role → {id, hostname} for the fleet that test builds. Screenshots go to E2E_ARTIFACTS.
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
const LANG = env("E2E_LANG", "en");
const WIDTH = Number(env("E2E_WIDTH", "1440"));
const NODES = JSON.parse(env("E2E_NODES"));
const CONTACT = env("E2E_CONTACT");
const EDIT_CONTACT = process.env.E2E_EDIT_CONTACT === "1";
const ARTIFACTS = resolve(root, env("E2E_ARTIFACTS", "test-artifacts/e2e/lists"));
const CHROMIUM = env("CHROMIUM_PATH", "/usr/bin/chromium");
const TAG = `${LANG}-${WIDTH}`;

// What the checks read, per language (the rest is read from data-* attributes).
const TEXT = {
  en: {
    nodes: "Nodes", findings: "Findings", hasFindings: "Open findings", viewName: "Save filters as", saveView: "Save view",
    savedViews: "Saved views", reason: "Reason", cordon: "Cordon selected", ack: "Acknowledge selected",
    search: "Search", provider: "Provider", forming: /forming, opens in \d+ min/, openFor: /open \d+ hr/,
    cordoned: /Cordon opened on 1 node|Not on/, updated: /finding(s)? updated/, support: "Support: ",
    editContact: "Edit support contact", save: "Save", contactInput: "Provider support", allPassed: /passed/i,
  },
  "zh-CN": {
    nodes: "节点", findings: "问题", hasFindings: "未解决问题", viewName: "将筛选保存为", saveView: "保存视图",
    savedViews: "已保存视图", reason: "原因", cordon: "隔离所选节点", ack: "确认所选",
    search: "搜索", provider: "供应商", forming: /正在形成，\d+\s?分钟后成立/, openFor: /已持续 \d+\s?小时/,
    cordoned: /已在 1 个节点上发起隔离|未执行/, updated: /已更新 \d+ 个问题/, support: "支持联系方式：",
    editContact: "编辑支持联系方式", save: "保存", contactInput: "供应商支持", allPassed: /通过/,
  },
}[LANG];

mkdirSync(ARTIFACTS, { recursive: true });
const log = (message) => console.log(`[e2e ${TAG}] ${message}`);
const check = (condition, message) => {
  if (!condition) throw new Error(`check failed: ${message}`);
  log(`ok: ${message}`);
};

const browser = await chromium.launch({
  executablePath: CHROMIUM, headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"],
});
const context = await browser.newContext({ viewport: { width: WIDTH, height: 900 }, locale: LANG === "en" ? "en-US" : LANG });
const page = await context.newPage();
page.setDefaultTimeout(15_000);
const pageErrors = [];
page.on("pageerror", (error) => pageErrors.push(String(error)));
const shot = async (name) => {
  await page.screenshot({ path: join(ARTIFACTS, `${name}-${TAG}.png`), fullPage: true });
  log(`screenshot ${name}-${TAG}.png`);
};
const rowsText = () => page.$$eval('[data-testid="node-row"]', (rows) => rows.map((r) => r.getAttribute("data-node")));
const noPageOverflow = async (what, { table = true } = {}) => {
  // At 390 px wide the page's content must fit: wide tables scroll inside their panel, filters wrap. (The top
  // navigation's own 390-px layout, a menu button, is the navigation's business and is not measured here.)
  const [right, inner, tableScrolls] = await page.evaluate(() => {
    const blocks = [...document.querySelectorAll(".page > *")];
    const wrap = document.querySelector(".table-wrap");
    return [Math.max(...blocks.map((el) => el.getBoundingClientRect().right)), window.innerWidth,
      wrap ? getComputedStyle(wrap).overflowX : "none"];
  });
  check(right <= inner + 1, `${what}: the content fits ${WIDTH} px (right edge ${Math.round(right)} ≤ ${inner})`);
  if (table) check(["auto", "scroll"].includes(tableScrolls), `${what}: the table scrolls inside its panel (${tableScrolls})`);
};

let failed = false;
try {
  // Sign in (the form's field names do not depend on the language).
  await page.goto(`${BASE}/login?next=/nodes`);
  await page.locator('input[name="username"]').fill(USERNAME);
  await page.locator('input[name="password"]').fill(PASSWORD);
  await page.locator('button[type="submit"]').click();
  await page.getByRole("heading", { level: 1, name: TEXT.nodes }).waitFor();

  // 1. Nodes: the default order is severity first (critical, warning, …, healthy last), with the triage columns.
  await page.getByTestId("node-row").first().waitFor();
  const order = await rowsText();
  check(order[0] === NODES.critical.hostname, `the critical node leads the list (${order.join(", ")})`);
  check(order.indexOf(NODES.warning.hostname) < order.indexOf(NODES.healthy.hostname), "warning before healthy");
  const critical = page.locator(`[data-node="${NODES.critical.hostname}"]`);
  check((await critical.locator('[data-col="open"]').innerText()).trim() === "1", "open findings count");
  check((await critical.locator('[data-col="gpus"]').innerText()).trim() === "7 / 8", "GPUs seen / expected");
  check((await critical.locator('[data-col="severity"] .badge--bad').count()) === 1, "worst severity badge is red");
  check((await critical.locator('[data-col="party"]').innerText()).trim().length > 1, "who acts on the headline");
  const silent = page.locator(`[data-node="${NODES.silent.hostname}"] [data-col="last-report"] [data-silent="true"]`);
  check(await silent.evaluate((el) => el.classList.contains("text-bad")), "a silent node's last report is red");
  await shot("01-nodes");
  if (WIDTH < 500) await noPageOverflow("nodes list");

  // 2. "Has findings" filter, then save it as a view and apply the view again from a clean list.
  await page.getByLabel(new RegExp(`^${TEXT.hasFindings}`)).selectOption("true");
  await page.waitForURL(/has_findings=true/);
  await page.waitForFunction((healthy) => {
    const rows = [...document.querySelectorAll('[data-testid="node-row"]')];
    return rows.length > 0 && rows.every((r) => r.getAttribute("data-node") !== healthy);
  }, NODES.healthy.hostname);
  check(!(await rowsText()).includes(NODES.healthy.hostname), "has-findings hides the healthy node");
  const viewName = `sick ${TAG}`;
  await page.getByLabel(TEXT.viewName).fill(viewName);
  await page.getByRole("button", { name: TEXT.saveView, exact: true }).click();
  await page.getByLabel(TEXT.savedViews).locator("option", { hasText: viewName }).waitFor({ state: "attached" });
  await page.goto(`${BASE}/nodes`);
  await page.getByTestId("node-row").first().waitFor();
  await page.getByLabel(TEXT.savedViews).selectOption({ label: viewName });
  await page.waitForURL(/has_findings=true/);
  check(true, "a saved view brings its filters back");
  await shot("02-nodes-saved-view");

  // 3. CSV download of the filtered list: the same rows, formula-safe.
  const href = await page.getByTestId("nodes-export").getAttribute("href");
  check(href.includes("has_findings=true"), `the CSV link carries the filters (${href})`);
  const csv = await page.request.get(`${BASE}${href}`);
  const body = await csv.text();
  check(csv.status() === 200 && csv.headers()["content-type"].startsWith("text/csv"), "the nodes CSV downloads");
  check(body.split("\n")[0].includes("worst_severity") && body.includes(NODES.critical.hostname)
    && !body.includes(NODES.healthy.hostname), "the CSV has the triage columns and only the filtered nodes");

  // 4. Bulk: select the warning node and cordon it (a second pass finds its cordon already open: refused).
  await page.goto(`${BASE}/nodes?search=${encodeURIComponent(NODES.warning.hostname)}`);
  await page.locator(`[data-node="${NODES.warning.hostname}"] input[type="checkbox"]`).check();
  await page.getByTestId("nodes-bulk").getByLabel(TEXT.reason).fill(`bad rack (${TAG})`);
  await page.getByRole("button", { name: TEXT.cordon, exact: true }).click();
  const result = page.getByTestId("nodes-bulk-result");
  await result.waitFor();
  check(TEXT.cordoned.test(await result.innerText()), `bulk cordon answered (${(await result.innerText()).trim()})`);
  await shot("03-nodes-bulk-cordon");

  // 5. The node page header: state and the open (cordon) incident.
  await page.goto(`${BASE}/nodes/${NODES.warning.id}`);
  await page.getByTestId("node-header").waitFor();
  await page.getByTestId("node-incident").getByRole("link").waitFor();
  check(/inc-/.test(await page.getByTestId("node-incident").innerText()), "the header links the open incident");
  check((await page.getByTestId("node-state").getAttribute("data-state")).length > 0, "the header shows the node's state");
  await shot("04-node-header");

  // 6. The provider's support contact on the node page, editable by an operator.
  await page.goto(`${BASE}/nodes/${NODES.critical.id}`);
  await page.getByTestId("support-contact-text").waitFor();
  if (EDIT_CONTACT) {
    await page.getByRole("button", { name: TEXT.editContact, exact: true }).click();
    await page.getByLabel(TEXT.contactInput, { exact: true }).fill(CONTACT);
    await page.getByTestId("node-header").getByRole("button", { name: TEXT.save, exact: true }).click();
    await page.getByTestId("support-contact-text").filter({ hasText: CONTACT }).waitFor();
  }
  check((await page.getByTestId("support-contact-text").innerText()).includes(CONTACT), "the support contact is shown");
  await shot("05-node-support-contact");
  if (WIDTH < 500) await noPageOverflow("node page", { table: false });

  // 7. A condition inside its hold time: amber "forming", never "passed".
  await page.goto(`${BASE}/nodes/${NODES.forming.id}`);
  const headline = page.getByTestId("triage-headline");
  await headline.waitFor();
  await page.locator('[data-step="capacity"][data-status="pending"]').waitFor();
  check((await headline.getAttribute("data-tone")) === "warn", "the headline is amber");
  check(TEXT.forming.test(await headline.innerText()), `the headline says forming (${await headline.innerText()})`);
  check(!TEXT.allPassed.test(await headline.innerText()), "the headline does not say passed");
  check(await page.locator('[data-step="capacity"]').evaluate((el) => el.classList.contains("checklist__step--warn")),
    "the forming step is amber");
  await shot("06-forming");

  // 8. A reclaimed spot node: preempted in the header, its deadline finding resolved, the preemption recorded.
  await page.goto(`${BASE}/nodes/${NODES.reclaimed.id}`);
  await page.locator('[data-testid="node-state"][data-state="preempted"]').waitFor();
  await page.goto(`${BASE}/findings?node=${NODES.reclaimed.id}&state=any`);
  await page.getByTestId("finding-row").first().waitFor();
  const reclaimedRows = await page.getByTestId("finding-row").count();
  await page.goto(`${BASE}/findings?node=${NODES.reclaimed.id}`);
  await page.getByTestId("findings-table").or(page.locator(".state--empty")).first().waitFor();
  check(reclaimedRows >= 1 && (await page.getByTestId("finding-row").count()) === 0,
    "the reclaimed node's deadline finding is resolved (listed under all states, not under open)");
  await shot("07-reclaimed-spot");

  // 9. Findings: severity order (critical first), opened time and age, provider with its support contact.
  await page.goto(`${BASE}/findings`);
  await page.getByRole("heading", { level: 1, name: TEXT.findings }).waitFor();
  await page.getByTestId("finding-row").first().waitFor();
  const severities = await page.$$eval('[data-testid="finding-row"]', (rows) => rows.map((r) => r.getAttribute("data-severity")));
  const rank = { critical: 0, warning: 1, info: 2 };
  check(severities.every((s, i) => i === 0 || rank[severities[i - 1]] <= rank[s]), `critical first (${severities.join(",")})`);
  const first = page.getByTestId("finding-row").first();
  check(TEXT.openFor.test(await first.locator('[data-col="opened"]').innerText()), "opened time with its age");
  check((await first.getByTestId("support-contact").innerText()).includes(TEXT.support), "the provider's support contact");
  await shot("08-findings");
  if (WIDTH < 500) await noPageOverflow("findings list");

  // 10. Search and the provider filter.
  await page.getByLabel(new RegExp(`^${TEXT.search}`)).fill(NODES.warning.hostname);
  await page.waitForURL(/search=/);
  await page.waitForFunction((name) => {
    const rows = [...document.querySelectorAll('[data-testid="finding-row"]')];
    return rows.length > 0 && rows.every((r) => r.textContent.includes(name));
  }, NODES.warning.hostname);
  check(true, "search narrows to the warning node's findings");
  await page.goto(`${BASE}/findings`);
  await page.getByLabel(new RegExp(`^${TEXT.provider}`)).selectOption({ label: NODES.critical.provider });
  await page.waitForURL(/provider=\d+/);
  await page.waitForFunction((name) => {
    const rows = [...document.querySelectorAll('[data-testid="finding-row"]')];
    return rows.length > 0 && rows.every((r) => r.textContent.includes(name));
  }, NODES.critical.hostname);
  check(true, "the provider filter keeps that provider's findings");
  const findingsCsv = await page.request.get(`${BASE}${await page.getByTestId("findings-export").getAttribute("href")}`);
  check(findingsCsv.status() === 200 && (await findingsCsv.text()).includes("provider_support_contact"), "the findings CSV downloads");

  // 11. Bulk acknowledge.
  await page.getByTestId("finding-row").first().locator('input[type="checkbox"]').check();
  await page.getByTestId("findings-bulk").getByLabel(TEXT.reason).fill(`provider on it (${TAG})`);
  await page.getByRole("button", { name: TEXT.ack, exact: true }).click();
  const ack = page.getByTestId("findings-bulk-result");
  await ack.waitFor();
  check(TEXT.updated.test(await ack.innerText()), "bulk acknowledge answered");
  await shot("09-findings-bulk-ack");

  check(pageErrors.length === 0, `no uncaught page errors (${pageErrors.join("; ")})`);
} catch (error) {
  failed = true;
  console.error(`[e2e ${TAG}] FAILED: ${error.stack ?? error}`);
  await page.screenshot({ path: join(ARTIFACTS, `failure-${TAG}.png`), fullPage: true }).catch(() => undefined);
} finally {
  await browser.close();
}
process.exit(failed ? 1 : 0);
