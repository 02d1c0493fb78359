// End-to-end check of the console's edit forms, in English and Simplified Chinese, at 1440 px and at 390 px:
// an admin edits a baseline, creates and deletes a boundary override and a per-pool rule override (each delete
// confirmed in place), edits a site's own support contact and changes a user's role; a viewer then finds no
// write control on those pages. Also an admin-issued password reset link, used by its user. Run by tests/e2e/test_forms.py; usable by hand too:
//
//   E2E_BASE_URL=http://127.0.0.1:8000 E2E_USERNAME=admin E2E_VIEWER_USERNAME=viewer E2E_PASSWORD=… \
//   E2E_BASELINE=h100 E2E_SITE=sh-1 E2E_PROVIDER="IDC One" E2E_TARGET_USER=bob E2E_NEW_PASSWORD=… node tests/e2e/forms.mjs
//
// One browser, one page per user; the language and the width change in place. Screenshots go to E2E_ARTIFACTS.
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
const ADMIN = env("E2E_USERNAME");
const VIEWER = env("E2E_VIEWER_USERNAME");
const PASSWORD = env("E2E_PASSWORD");
const BASELINE = env("E2E_BASELINE");
const SITE = env("E2E_SITE");
const PROVIDER = env("E2E_PROVIDER");
const TARGET = env("E2E_TARGET_USER");
const NEW_PASSWORD = env("E2E_NEW_PASSWORD");
const ARTIFACTS = resolve(root, env("E2E_ARTIFACTS", "test-artifacts/e2e/forms"));
const CHROMIUM = env("CHROMIUM_PATH", "/usr/bin/chromium");

mkdirSync(ARTIFACTS, { recursive: true });
const log = (message) => console.log(`[e2e] ${message}`);
const check = (condition, message) => {
  if (!condition) throw new Error(`check failed: ${message}`);
  log(`ok: ${message}`);
};

// The console's own strings (frontend/src/shared/i18n/locales), per language.
const TEXT = {
  en: {
    edit: "Edit", delete: "Delete", yes: "Yes, delete", save: "Save changes", add: "Add override", driver: /^Driver/,
    provider: /^Provider/, layer: /^Layer/, owner: /^Owner/, note: /^Note/, rule: /^Rule/, pool: /^Pool/, enabled: /^Enabled/,
    siteContact: /^Site's support contact/, roleOf: (name) => `Role of ${name}`, editSite: (name) => `Edit site ${name}`,
    editBaseline: (name) => `Edit baseline ${name}`,
  },
  "zh-CN": {
    edit: "编辑", delete: "删除", yes: "确认删除", save: "保存修改", add: "添加覆盖", driver: /^驱动/,
    provider: /^供应商/, layer: /^层/, owner: /^负责方/, note: /^备注/, rule: /^规则/, pool: /^资源池/, enabled: /^启用/,
    siteContact: /^站点支持联系方式/, roleOf: (name) => `${name} 的角色`, editSite: (name) => `编辑站点 ${name}`,
    editBaseline: (name) => `编辑基线 ${name}`,
  },
};
const SIZES = [["1440", { width: 1440, height: 900 }], ["390", { width: 390, height: 844 }]];

const browser = await chromium.launch({
  executablePath: CHROMIUM,
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"],
});
const pageErrors = [];
let failed = false;
let page;

async function signIn(username) {
  const context = await browser.newContext({ viewport: SIZES[0][1], locale: "en-US" });
  const p = await context.newPage();
  p.setDefaultTimeout(10_000);
  p.on("pageerror", (error) => pageErrors.push(String(error)));
  await p.goto(`${BASE}/login`);
  await p.locator('input[name="username"]').fill(username);
  await p.locator('input[type="password"]').fill(PASSWORD);
  await p.locator('button[type="submit"]').click();
  await p.getByTestId("current-user").waitFor();
  return p;
}

async function open(path, testId, language) {
  await page.evaluate((lang) => window.localStorage.setItem("fleet.console.language", lang), language);
  await page.goto(`${BASE}${path}`);
  await page.getByTestId(testId).waitFor();
}

const shot = async (name) => {
  await page.screenshot({ path: join(ARTIFACTS, `${name}.png`), fullPage: true });
  log(`screenshot ${name}.png`);
};

/** At 390 px: the page does not scroll sideways and the form takes one column. */
async function fitsPhone(tag, formTestId) {
  const fits = await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth + 1);
  check(fits, `${tag}: the page fits 390 px (tables scroll in their panel)`);
  const columns = await page.getByTestId(formTestId).evaluate((el) => getComputedStyle(el).gridTemplateColumns.split(" ").length);
  check(columns === 1, `${tag}: the ${formTestId} stacks into one column`);
}

/** Click a row's delete button, check nothing is gone yet, then confirm. */
async function confirmDelete(row, text) {
  await row.locator("button", { hasText: text.delete }).click();
  const group = row.getByRole("group");
  await group.waitFor();
  check(await row.count() === 1, "a delete asks first (the row is still there)");
  await group.locator("button", { hasText: text.yes }).click();
}

try {
  page = await signIn(ADMIN);
  let round = 0;
  for (const language of ["en", "zh-CN"]) {
    const text = TEXT[language];
    for (const [size, viewport] of SIZES) {
      round += 1;
      const tag = `${language}-${size}`;
      await page.setViewportSize(viewport);

      // A baseline: edit its driver.
      await open("/baselines", "baselines-page", language);
      await page.getByRole("button", { name: text.editBaseline(BASELINE) }).click();
      const baselineForm = page.getByTestId("baseline-form");
      const driver = `560.35.0${round}`;
      await baselineForm.getByRole("textbox", { name: text.driver }).fill(driver);
      if (size === "390") await fitsPhone(tag, "baseline-form");
      await shot(`${tag}-baseline-edit`);
      await baselineForm.locator("button", { hasText: text.save }).click();
      await page.getByTestId("baseline-row").filter({ hasText: BASELINE }).filter({ hasText: driver }).waitFor();
      check(true, `${tag}: the baseline's driver is now ${driver}`);

      // A boundary override and a rule override: create, then delete after confirming.
      await open("/overrides", "overrides-page", language);
      const boundaryForm = page.getByTestId("boundary-override-form");
      await boundaryForm.getByRole("combobox", { name: text.provider }).selectOption({ label: PROVIDER });
      await boundaryForm.getByRole("combobox", { name: text.layer }).selectOption("facility");
      await boundaryForm.getByRole("combobox", { name: text.owner }).selectOption("us");
      await boundaryForm.getByRole("textbox", { name: text.note }).fill(`e2e ${tag}`);
      await boundaryForm.locator("button", { hasText: text.add }).click();
      const boundaryRow = page.getByTestId("boundary-override-row").filter({ hasText: `e2e ${tag}` });
      await boundaryRow.waitFor();
      check(true, `${tag}: a boundary override is created`);

      const ruleForm = page.getByTestId("rule-override-form");
      await ruleForm.getByRole("combobox", { name: text.rule }).selectOption({ index: 1 });
      await ruleForm.getByRole("combobox", { name: text.pool }).selectOption({ index: 1 });
      await ruleForm.getByRole("combobox", { name: text.enabled }).selectOption("false");
      await ruleForm.getByRole("textbox", { name: text.note }).fill(`e2e ${tag}`);
      await ruleForm.locator("button", { hasText: text.add }).click();
      const ruleRow = page.getByTestId("rule-override-row").filter({ hasText: `e2e ${tag}` });
      await ruleRow.waitFor();
      check(true, `${tag}: a rule override is created`);
      if (size === "390") await fitsPhone(tag, "rule-override-form");
      await shot(`${tag}-overrides`);
      await confirmDelete(boundaryRow, text);
      await boundaryRow.waitFor({ state: "detached" });
      check(true, `${tag}: the boundary override is deleted after confirmation`);
      await confirmDelete(ruleRow, text);
      await ruleRow.waitFor({ state: "detached" });
      check(true, `${tag}: the rule override is deleted after confirmation`);

      // A site's own support contact.
      await open("/providers", "providers-page", language);
      await page.getByRole("button", { name: text.editSite(SITE) }).click();
      const siteForm = page.getByTestId("site-form");
      const contact = `remote hands ${tag}`;
      await siteForm.getByRole("textbox", { name: text.siteContact }).fill(contact);
      if (size === "390") await fitsPhone(tag, "site-form");
      await siteForm.locator("button", { hasText: text.save }).click();
      await page.getByTestId("site-row").filter({ hasText: SITE }).getByTestId("site-contact").filter({ hasText: contact }).waitFor();
      check(true, `${tag}: the site's support contact is edited`);
      await shot(`${tag}-providers`);

      // A user's role.
      await open("/users", "users-page", language);
      const role = round % 2 ? "operator" : "viewer";
      await page.getByRole("combobox", { name: text.roleOf(TARGET) }).selectOption(role);
      await page.waitForFunction(async ([name, want]) => {
        const r = await fetch(`/api/v1/users/?search=${name}`);
        return (await r.json()).results.find((u) => u.username === name)?.role === want;
      }, [TARGET, role]);
      check(true, `${tag}: ${TARGET}'s role is now ${role}`);
      if (size === "390") {
        const fits = await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth + 1);
        check(fits, `${tag}: the users page fits 390 px`);
      }
      await shot(`${tag}-users`);
    }
  }

  // A password reset: the admin gets a single-use link (shown once), the user opens it without a session, sets a
  // password and signs in with it.
  await page.setViewportSize(SIZES[0][1]);
  await open("/users", "users-page", "en");
  await page.getByRole("button", { name: `Reset the password of ${TARGET}` }).click();
  const linkBox = page.getByTestId("reset-link");
  const link = await linkBox.getByRole("textbox").inputValue();
  check(link.startsWith(`${BASE}/reset-password#uid=`), "the admin gets a reset link, never a password");
  await shot("en-1440-reset-link");
  await linkBox.locator("button", { hasText: "I have copied it" }).click();
  check(await page.getByTestId("reset-link").count() === 0, "the link is gone from the page once dismissed");
  await page.context().close();

  const anonymous = await browser.newContext({ viewport: SIZES[1][1], locale: "en-US" });
  page = await anonymous.newPage();
  page.setDefaultTimeout(10_000);
  page.on("pageerror", (error) => pageErrors.push(String(error)));
  await page.goto(link);
  await page.getByTestId("reset-password-form").waitFor();
  check(await page.evaluate(() => window.location.hash) === "", "the reset page drops the token from the address bar");
  await page.getByLabel(/^New password(?! again)/).fill(NEW_PASSWORD);
  await page.getByLabel(/^New password again/).fill(NEW_PASSWORD);
  await page.getByRole("button", { name: "Set password" }).click();
  await page.getByText("Your password is set.").waitFor();
  await shot("en-390-reset-done");
  await page.goto(`${BASE}/login`);
  await page.locator('input[name="username"]').fill(TARGET);
  await page.locator('input[type="password"]').fill(NEW_PASSWORD);
  await page.locator('button[type="submit"]').click();
  await page.getByTestId("current-user").waitFor();
  check(true, `${TARGET} signs in with the password they set from the link`);
  await anonymous.close();

  // A viewer: the same pages, no write control at all (not disabled ones).
  page = await signIn(VIEWER);
  for (const [size, viewport] of SIZES) {
    await page.setViewportSize(viewport);
    for (const [path, testId] of [["/baselines", "baselines-page"], ["/overrides", "overrides-page"], ["/providers", "providers-page"],
      ["/users", "users-page"]]) {
      await open(path, testId, "en");
      // Loaded: every panel shows its table or its empty state (or the page says it is for admins only).
      await page.waitForFunction((id) => {
        const el = document.querySelector(`[data-testid="${id}"]`);
        return el && !el.querySelector(".state--loading") && el.querySelector("table, .state--empty, [role=note]");
      }, testId);
      const controls = await page.getByTestId(testId).locator("button, input, select, textarea").count();
      check(controls === 0, `viewer-${size}: ${path} has no write controls (${controls} found)`);
    }
    await shot(`viewer-${size}-providers`);
  }

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
