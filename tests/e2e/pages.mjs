// End-to-end walk through the console's charts and the pages of every API capability, in English and
// Simplified Chinese, on a desktop (1440 px) and a phone (390 px). Run by tests/e2e/test_pages.py against a
// live server with the demo fleet; usable by hand too:
//
//   E2E_BASE_URL=http://127.0.0.1:8000 E2E_USERNAME=admin E2E_PASSWORD=… E2E_NODE=own-bm-xid79 \
//   node tests/e2e/pages.mjs
//
// E2E_USERNAME must be an admin (the users page). Screenshots go to E2E_ARTIFACTS. Exit code 0 = every check passed.
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
const NODE = env("E2E_NODE");
const ARTIFACTS = resolve(root, env("E2E_ARTIFACTS", "test-artifacts/e2e/pages"));
const CHROMIUM = env("CHROMIUM_PATH", "/usr/bin/chromium");
const TIMEOUT = 15_000;

mkdirSync(ARTIFACTS, { recursive: true });
const log = (message) => console.log(`[e2e] ${message}`);
const check = (condition, message) => {
  if (!condition) throw new Error(`check failed: ${message}`);
  log(`ok: ${message}`);
};

// What each language calls things (the same strings as frontend/src/shared/i18n/locales).
const TEXT = {
  en: { trends: "Fleet trends", billing: "Billing and cost", providers: "Providers and sites", baselines: "Baselines",
    overrides: "Overrides", audit: "Audit log", users: "Users and roles", charts: "Charts", menu: "Menu", nav: "Trends" },
  "zh-CN": { trends: "集群趋势", billing: "账单与成本", providers: "供应商与站点", baselines: "基线",
    overrides: "覆盖配置", audit: "审计日志", users: "用户与角色", charts: "图表", menu: "菜单", nav: "趋势" },
};
// Texts the server writes (fleet/locale/zh_Hans), asked for in the console's language.
const SERVER_TEXT = {
  en: { headline: /^Step \d — .+ — owner: /, next: "Next", action: /reboot the machine/,
    summary: /Xid 79 on GPU \d+: GPU has fallen off the bus \(\d+× since \d\d:\d\d:\d\d UTC\) — first action: reboot the machine/,
    rules: "Rules", ruleTitles: ["Xid error", "NVML unavailable", "GPU memory nearly full"] },
  "zh-CN": { headline: /^第 \d 步 — .+ — 责任方：/, next: "下一步", action: /^下一步: .*重启机器/,
    summary: /GPU \d+ 上出现 Xid 79：GPU 已掉出总线（自 \d\d:\d\d:\d\d UTC 起 \d+ 次）— 首要操作：重启机器/,
    rules: "规则", ruleTitles: ["Xid 错误", "NVML 不可用", "GPU 显存即将用满"] },
};
const PAGES = [
  ["trends", "/trends?range=7d", "trends-page"],
  ["billing", "/billing", "billing-page"],
  ["providers", "/providers", "providers-page"],
  ["baselines", "/baselines", "baselines-page"],
  ["overrides", "/overrides", "overrides-page"],
  ["audit", "/audit", "audit-page"],
  ["users", "/users", "users-page"],
];

const browser = await chromium.launch({
  executablePath: CHROMIUM,
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"],
});
const pageErrors = [];
let failed = false;
let page;

async function newPage(viewport, language) {
  const context = await browser.newContext({ viewport, locale: language === "zh-CN" ? "zh-CN" : "en-US" });
  await context.addInitScript((lang) => window.localStorage.setItem("fleet.console.language", lang), language);
  const p = await context.newPage();
  p.setDefaultTimeout(TIMEOUT);
  p.on("pageerror", (error) => pageErrors.push(String(error)));
  await p.goto(`${BASE}/login`);
  await p.locator('input[name="username"], input[autocomplete="username"]').first().fill(USERNAME);
  await p.locator('input[type="password"]').first().fill(PASSWORD);
  await p.locator('button[type="submit"]').first().click();
  await p.getByTestId("current-user").waitFor();
  return p;
}

const shot = async (name) => {
  await page.screenshot({ path: join(ARTIFACTS, `${name}.png`), fullPage: true });
  log(`screenshot ${name}.png`);
};

/** True when the page itself does not scroll sideways (wide tables scroll inside their panel); otherwise logs
 * the outermost elements that stick out, to say what to fix. */
async function noPageOverflow() {
  const offenders = await page.evaluate(() => {
    if (document.documentElement.scrollWidth <= window.innerWidth + 1) return [];
    const clipped = (el) => {
      for (let a = el.parentElement; a; a = a.parentElement) {
        const o = getComputedStyle(a).overflowX;
        if (o === "auto" || o === "scroll" || o === "hidden" || o === "clip") return true;
      }
      return false;
    };
    const out = [];
    for (const el of document.querySelectorAll("body *")) {
      const box = el.getBoundingClientRect();
      if (box.right <= window.innerWidth + 1 || clipped(el)) continue;
      const parent = el.parentElement;
      if (parent && parent !== document.body && parent.getBoundingClientRect().right > window.innerWidth + 1 && !clipped(parent)) continue;
      out.push(`${el.tagName.toLowerCase()}.${[...el.classList].join(".")} [${el.closest("[data-testid]")?.getAttribute("data-testid") ?? ""}] right=${Math.round(box.right)} w=${Math.round(box.width)}`);
    }
    return out.length ? out.slice(0, 8) : [`page scrollWidth ${document.documentElement.scrollWidth}`];
  });
  if (offenders.length) log(`too wide: ${offenders.join(" | ")}`);
  return offenders.length === 0;
}

async function chartDrawn(testId) {
  const chart = page.getByTestId(testId);
  await chart.waitFor();
  await chart.locator("canvas").first().waitFor();
  return Number(await chart.getAttribute("data-points"));
}

async function nodeId(hostname) {
  const answer = await page.request.get(`${BASE}/api/v1/nodes/?search=${encodeURIComponent(hostname)}`);
  const body = await answer.json();
  return body.results.find((n) => n.hostname === hostname).id;
}

try {
  // E2E_SKIP_TOUR=1 goes straight to the writes (for working on them by hand).
  for (const language of process.env.E2E_SKIP_TOUR === "1" ? [] : ["en", "zh-CN"]) {
    for (const [label, viewport] of [["desktop", { width: 1440, height: 900 }], ["390", { width: 390, height: 844 }]]) {
      const text = TEXT[language];
      page = await newPage(viewport, language);
      const tag = `${language}-${label}`;
      for (const [key, path, testId] of PAGES) {
        await page.goto(`${BASE}${path}`);
        await page.getByTestId(testId).waitFor();
        await page.getByRole("heading", { level: 1, name: text[key] }).waitFor();
        if (key === "trends") {
          for (const id of ["chart-utilisation", "chart-healthy", "chart-findings", "chart-cost"]) {
            const points = await chartDrawn(id);
            check(points > 0, `${tag}: ${id} is drawn (${points} points)`);
          }
          check((await chartDrawn("chart-findings")) === 168, `${tag}: 7 d of findings at 1 h steps`);
          await page.getByTestId("scorecard-row").first().waitFor();
          check(await page.getByTestId("chart-xid").count() === 1, `${tag}: Xid events per day are charted`);
          check(await page.getByTestId("chart-preemption").or(page.getByTestId("trend-preemption").locator(".state")).count() > 0,
            `${tag}: preemption rate per spot pool and day has its panel`);
        }
        if (key === "billing") await page.getByTestId("cost-row").first().waitFor();
        if (key === "providers") await page.getByTestId("provider-row").first().waitFor();
        if (key === "audit") await page.getByTestId("audit-row").first().waitFor();
        if (key === "users") await page.getByTestId("user-row").first().waitFor();
        check(await noPageOverflow(), `${tag}: ${path} fits the screen width (tables scroll in their panel)`);
        await shot(`${tag}-${key}`);
      }

      // The node page: the charts with the range picker, a GPU's limits, and the boundary matrix.
      const id = await nodeId(NODE);
      await page.goto(`${BASE}/nodes/${id}`);
      await page.getByTestId("node-charts").waitFor();
      await page.getByTestId("node-chart-range").getByRole("button", { name: language === "en" ? "1 h" : "1 小时" }).click();
      const nodePoints = await chartDrawn("chart-node");
      check(nodePoints > 0, `${tag}: the node chart shows the last hour (${nodePoints} points)`);
      await page.getByTestId("chart-gpu-select").selectOption({ index: 1 });
      await page.getByTestId("gpu-charts").waitFor();
      for (const chart of ["chart-gpu-util", "chart-gpu-memory", "chart-gpu-temperature", "chart-gpu-power"]) await chartDrawn(chart);
      const marks = await page.getByTestId("chart-gpu-util-marks").count();
      check(marks === 1, `${tag}: the GPU's Xid event is marked on the time axis`);
      check(await page.getByTestId("pcie-link").count() === 1, `${tag}: the PCIe link is shown`);
      check(await page.getByTestId("boundary-matrix").isVisible(), `${tag}: the boundary matrix is on the node page`);
      if (label === "390") {
        const sticky = await page.locator('[data-testid="boundary-matrix"] tbody th').first()
          .evaluate((el) => getComputedStyle(el).position);
        check(sticky === "sticky", `${tag}: the matrix keeps its layer column in view while it scrolls`);
      }
      check(await noPageOverflow(), `${tag}: the node page fits the screen width`);
      await shot(`${tag}-node-charts`);

      // Server-written texts in the console's language (the API client sends Accept-Language): the triage
      // headline and the next action on the node page, a finding's summary, the rule catalogue's titles.
      const server = SERVER_TEXT[language];
      const headline = (await page.getByTestId("triage-headline").innerText()).trim();
      check(server.headline.test(headline), `${tag}: the triage headline is the server's, in ${language} (${headline})`);
      const nextAction = page.locator(".checklist__findings .small").filter({ hasText: server.next }).first();
      await nextAction.waitFor();
      const action = (await nextAction.innerText()).trim();
      check(server.action.test(action), `${tag}: the recommended action is in ${language} (${action})`);
      await page.goto(`${BASE}/findings?node=${id}`);
      await page.getByTestId("finding-row").first().waitFor();
      const rows = await page.$$eval('[data-testid="finding-row"]', (all) => all.map((r) => r.textContent.replace(/\s+/g, " ")));
      check(rows.some((row) => server.summary.test(row)), `${tag}: the Xid finding's summary is in ${language}`);
      check(await noPageOverflow(), `${tag}: the findings page fits the screen width`);
      await shot(`${tag}-findings`);
      await page.goto(`${BASE}/rules`);
      await page.getByRole("heading", { level: 1, name: server.rules }).waitFor();
      for (const title of server.ruleTitles) {
        await page.locator("strong", { hasText: title }).first().waitFor();
      }
      check(true, `${tag}: the rule catalogue's titles are in ${language} (${server.ruleTitles.join(", ")})`);
      check(await noPageOverflow(), `${tag}: the rules page fits the screen width`);
      await shot(`${tag}-rules`);

      if (label === "390") {
        // The navigation folds behind the menu button and opens on demand.
        const menu = page.getByTestId("menu-button");
        check(await menu.isVisible(), `${tag}: a menu button is shown`);
        const navLink = page.locator("#main-nav").getByRole("link", { name: text.nav, exact: true });
        check(!(await navLink.isVisible()), `${tag}: the navigation is folded away`);
        await menu.click();
        await navLink.waitFor({ state: "visible" });
        await shot(`${tag}-menu-open`);
        await navLink.click();
        await page.getByTestId("trends-page").waitFor();
        check(!(await navLink.isVisible()), `${tag}: following a link folds the menu again`);
      }
      await page.context().close();
    }
  }

  // Writes (English, desktop, an admin): errors next to the field, then the change in the list and the audit log.
  page = await newPage({ width: 1440, height: 900 }, "en");
  await page.goto(`${BASE}/providers`);
  const form = page.getByTestId("provider-form");
  await form.getByRole("textbox", { name: /^Name/ }).fill("Lambda Cloud");
  await form.getByRole("textbox", { name: /^Slug/ }).fill("aws");  // taken by the demo's AWS provider
  await form.getByRole("textbox", { name: /^Support contact/ }).fill("https://support.lambdalabs.com");
  await form.getByRole("button", { name: "Add provider" }).click();
  const slugError = form.locator("label", { hasText: "Slug" }).locator(".field__error");
  await slugError.waitFor();
  check((await slugError.innerText()).length > 0, "a taken slug is named next to the slug field");
  await form.getByRole("textbox", { name: /^Slug/ }).fill("lambda");
  await form.getByRole("button", { name: "Add provider" }).click();
  const row = page.getByTestId("provider-row").filter({ hasText: "Lambda Cloud" });
  await row.waitFor();
  check((await row.getByTestId("support-contact").innerText()).includes("support.lambdalabs.com"), "the new provider shows its support contact");
  await row.getByRole("button", { name: "Edit the support contact of Lambda Cloud" }).click();
  await row.getByRole("textbox").fill("+1 866 000 0000");
  await row.getByRole("button", { name: "Save" }).click();
  await row.getByText("+1 866 000 0000").waitFor();
  check(true, "the support contact is edited in place");
  await shot("writes-providers");

  await page.goto(`${BASE}/overrides`);
  const boundaryForm = page.getByTestId("boundary-override-form");
  await boundaryForm.getByRole("combobox", { name: /^Provider/ }).selectOption({ label: "Lambda Cloud" });
  await boundaryForm.getByRole("combobox", { name: /^Layer/ }).selectOption("hardware");
  await boundaryForm.getByRole("combobox", { name: /^Owner/ }).selectOption("us");
  await boundaryForm.getByRole("textbox", { name: /^Note/ }).fill("contract §4: we replace parts");
  await boundaryForm.getByRole("button", { name: "Add override" }).click();
  await page.getByTestId("boundary-override-row").filter({ hasText: "Lambda Cloud" }).waitFor();
  check(true, "a boundary override is added for a provider");
  const ruleForm = page.getByTestId("rule-override-form");
  await ruleForm.getByRole("combobox", { name: /^Rule/ }).selectOption({ index: 1 });
  await ruleForm.getByRole("combobox", { name: /^Pool/ }).selectOption({ index: 1 });
  await ruleForm.getByTestId("rule-override-params").fill('{"no_such_param": 1}');
  const overridesBefore = await page.getByTestId("rule-override-row").count();  // the demo pools' short holds
  await ruleForm.getByRole("button", { name: "Add override" }).click();
  const paramsError = ruleForm.locator("label", { hasText: "Parameters (JSON)" }).locator(".field__error");
  await paramsError.waitFor();
  check((await paramsError.innerText()).length > 0, `an unknown rule parameter is named next to the parameters (${await paramsError.innerText()})`);
  check(await page.getByTestId("rule-override-row").count() === overridesBefore, "the refused rule override changed nothing");
  await ruleForm.getByTestId("rule-override-params").fill("");
  await ruleForm.getByRole("combobox", { name: /^Enabled/ }).selectOption("false");
  await ruleForm.getByRole("button", { name: "Add override" }).click();
  await page.waitForFunction((before) => document.querySelectorAll('[data-testid="rule-override-row"]').length === before + 1,
    overridesBefore);
  check(true, "a per-pool rule override is added");
  await shot("writes-overrides");

  await page.goto(`${BASE}/users`);
  const userForm = page.getByTestId("user-form");
  await userForm.getByRole("textbox", { name: /^Username/ }).fill("e2e-new-viewer");
  await userForm.getByLabel(/^Initial password/).fill("a-long-enough-password-42");
  await userForm.getByRole("button", { name: "Add user" }).click();
  await page.getByTestId("user-row").filter({ hasText: "e2e-new-viewer" }).waitFor();
  await page.getByRole("combobox", { name: "Role of e2e-new-viewer" }).selectOption("operator");
  await page.waitForFunction(async () => {
    const r = await fetch("/api/v1/users/?search=e2e-new-viewer");
    return (await r.json()).results[0]?.role === "operator";
  });
  check(true, "an admin adds a user and changes their role");

  await page.goto(`${BASE}/audit?action=create`);
  await page.getByTestId("audit-row").filter({ hasText: "inventory.provider" }).filter({ hasText: "Lambda Cloud" }).first().waitFor();
  check(true, "the audit log, filtered to creations, lists the new provider");
  await shot("writes-audit");

  const csv = await page.request.get(`${BASE}/api/v1/cost-report.csv?period_days=30`);
  check(csv.status() === 200 && (csv.headers()["content-type"] ?? "").includes("text/csv"), "the cost report downloads as CSV");
  await page.goto(`${BASE}/billing`);
  await page.getByTestId("what-if-pool").selectOption({ index: 1 });
  await page.getByTestId("scenario").first().waitFor();
  check(await page.getByTestId("scenario").count() >= 3, "a pool's what-if scenarios stand side by side");
  await page.getByRole("textbox", { name: /^Spot preemptions per node-day/ }).fill("-1");
  await page.getByRole("button", { name: "Compare" }).click();
  await page.getByTestId("what-if").locator(".field__error").first().waitFor();
  check(true, "a bad what-if input is named next to its field");
  await shot("writes-billing");

  check(pageErrors.length === 0, `no uncaught errors in the page${pageErrors.length ? `: ${pageErrors.join(" | ")}` : ""}`);
} catch (error) {
  failed = true;
  console.error(`[e2e] FAILED: ${error?.stack ?? error}`);
  if (pageErrors.length) console.error(`[e2e] page errors: ${pageErrors.join(" | ")}`);
  await page?.screenshot({ path: join(ARTIFACTS, "failure.png"), fullPage: true }).catch(() => undefined);
} finally {
  await browser.close();
}
process.exit(failed ? 1 : 0);
