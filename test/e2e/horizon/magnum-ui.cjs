// Drives Horizon's magnum-ui in Debian's chromium (headless, through npm playwright-core) the way a
// tenant clicks through it. Run by test/e2e/horizon_test.go, one phase per run:
//
//   create   log in, create a cluster template and a cluster through the dialogs, wait for
//            CREATE_COMPLETE in the table, read the detail page, download the CA (Show Certificate)
//   alt      (another tenant) neither the cluster nor the template is listed; the cluster's URL fails
//   upgrade  Rolling Cluster Upgrade to another template, wait for UPDATE_COMPLETE on the detail page,
//            delete the cluster from the table and wait for its row to go
//
// Input: the JSON job in argv[2] (see horizon_test.go). Output, one per line on stdout:
//   STEP {"step": ..., "seconds": ...}   when a step is done (the Go test turns them into TIMING lines)
//   RESULT {...}                         what the phase saw, at the end
// A screenshot after every step, and of the failure, goes to job.shots. Exit status 1 on failure.
// Waits are for concrete elements: magnum-ui's pages poll, the network is never idle.
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');

const job = JSON.parse(process.argv[2]);
const { chromium } = require(path.join(job.playwright, 'node_modules', 'playwright-core'));

// Console errors Horizon 23 + magnum-ui 11 log on every page (AngularJS 1.8 dropped
// angular.lowercase; a rejected promise nobody handles in Horizon's own code). Anything else fails.
const knownConsoleErrors = [/angular\.lowercase is not a function/, /Possibly unhandled rejection/];
const consoleErrors = [];
let expectedHTTPErrors = null; // a RegExp while a step expects an HTTP error (the other tenant's URL)
// Console errors of 5xx answers while loadList loads a table: dropped when it loaded the table again
// (it retries Horizon's 500s, see there), failures like any other when it did not.
let listLoad = null;

let shot = 0;
let page;

function out(kind, obj) { process.stdout.write(kind + ' ' + JSON.stringify(obj) + '\n'); }

async function screenshot(name) {
  shot++;
  const file = path.join(job.shots, `${job.phase}-${String(shot).padStart(2, '0')}-${name}.png`);
  await page.screenshot({ path: file, fullPage: true }).catch((e) => console.error(`screenshot ${file}: ${e.message}`));
}

async function step(name, fn) {
  const t0 = Date.now();
  const res = await fn();
  out('STEP', { step: name, seconds: (Date.now() - t0) / 1000 });
  await screenshot(name.replace(/[^a-z0-9]+/gi, '-').toLowerCase());
  return res;
}

function sleep(ms) { return new Promise((r) => setTimeout(r, ms)); }

async function login() {
  await page.goto(`${job.base}/auth/login/?next=${encodeURIComponent(job.next)}`);
  await page.fill('#id_username', job.user);
  await page.fill('#id_password', job.password);
  await Promise.all([
    page.waitForURL((u) => !u.pathname.startsWith('/auth/login'), { timeout: 60000 }),
    page.click('#loginBtn'),
  ]);
}

// The open modal form (Horizon's ModalFormService: tabs on the left, Submit in the footer).
const modal = () => page.locator('.modal-dialog').last();
async function tab(title) {
  await modal().locator('.nav-pills a', { hasText: title }).click();
}
async function selectLabel(name, label) {
  await modal().locator(`select[name="${name}"]`).selectOption({ label }, { timeout: 60000 });
}
// submit clicks the form's primary button and returns the answer to the request it sends.
async function submit(method, urlPart) {
  const [resp] = await Promise.all([
    page.waitForResponse((r) => r.request().method() === method && r.url().includes(urlPart), { timeout: 120000 }),
    modal().locator('.modal-footer button.btn-primary').click(),
  ]);
  if (resp.status() >= 300) {
    throw new Error(`${method} ${resp.url()}: HTTP ${resp.status()}: ${(await resp.text()).slice(0, 500)}`);
  }
  return resp;
}

// row is the table row of the resource named name (its name cell links to the detail page).
const row = (name) => page.locator('table tbody tr', { has: page.locator(`td a:text-is("${name}")`) });

// loadList loads (or reloads) a table page and returns the names of the items the list API gave
// it, once the table shows them all ("No items to display" is also shown while the list loads).
async function loadList(url) {
  const api = url.includes('cluster_templates') ? '/api/container_infra/cluster_templates/' : '/api/container_infra/clusters/';
  listLoad = { serverErrors: [], retried: false };
  try {
    for (let attempt = 1; ; attempt++) {
      // Only a request the new page made counts, and its body is read as it arrives: a response of
      // the page being left can match too, and its body is gone once the navigation commits.
      const navStart = Date.now();
      let body = '';
      const listed = page.waitForResponse(async (r) => {
        if (r.request().method() !== 'GET' || new URL(r.url()).pathname !== api) return false;
        if (r.request().timing().startTime < navStart) return false;
        try { body = await r.text(); } catch { return false; }
        return true;
      }, { timeout: 60000 });
      const nav = await (page.url() === url ? page.reload() : page.goto(url));
      // Horizon answered 500 once in CI, under load, while a table was reloaded. A tenant would
      // reload; the Go test prints what Horizon and magnum-api logged, and three in a row fail.
      let failed = nav && nav.status() >= 500 ? `the page: HTTP ${nav.status()}` : '';
      let resp = null;
      if (!failed) {
        // Under CI load magnum-api has taken over a minute to answer a list; a tenant would
        // reload, so no answer in time counts as a failed load like a 5xx.
        resp = await listed.catch((e) => { if (e.name === 'TimeoutError') return null; throw e; });
        if (!resp) failed = `GET ${api}: no answer ${Math.round((Date.now() - navStart) / 1000)}s after the page was asked for`;
        else if (resp.status() >= 500) failed = `GET ${api}: HTTP ${resp.status()}: ${body.slice(0, 500)}`;
      } else {
        listed.catch(() => {});
      }
      if (failed && attempt < 3) {
        out('NOTE', { note: `${url}, attempt ${attempt}: ${failed}; loading it again` });
        listLoad.retried = true;
        await sleep(5000);
        continue;
      }
      if (failed) throw new Error(`${url}: ${failed} (attempt ${attempt})`);
      if (resp.status() !== 200) throw new Error(`GET ${api}: HTTP ${resp.status()}: ${body.slice(0, 500)}`);
      const names = (JSON.parse(body).items || []).map((i) => i.name);
      // Under load the table has once rendered a list other than the one seen here within 30 s;
      // a tenant would reload, so a table that does not settle is a failed load too.
      const settled = await page.locator('table tfoot', { hasText: new RegExp(`Displaying ${names.length} items?\\b`) })
        .waitFor({ timeout: 30000 }).then(() => true, (e) => { if (e.name === 'TimeoutError') return false; throw e; });
      if (settled) return names;
      const footer = (await page.locator('table tfoot').first().innerText().catch(() => '(no footer)')).replace(/\s+/g, ' ');
      failed = `the list API gave ${names.length} item(s) (${names}), the table says "${footer}" after 30s`;
      if (attempt >= 3) throw new Error(`${url}: ${failed} (attempt ${attempt})`);
      out('NOTE', { note: `${url}, attempt ${attempt}: ${failed}; loading it again` });
      listLoad.retried = true;
      await sleep(5000);
    }
  } finally {
    if (!listLoad.retried) consoleErrors.push(...listLoad.serverErrors);
    listLoad = null;
  }
}

// waitRow reloads the table at url until the row of name satisfies done(rowText), or is gone when
// gone is set. hz-resource-table does not refresh on its own.
async function waitRow(url, name, { done, gone, timeoutSec, what }) {
  const deadline = Date.now() + timeoutSec * 1000;
  let last = '';
  for (;;) {
    const names = await loadList(url);
    const n = await row(name).count();
    if (n !== (names.includes(name) ? 1 : 0)) throw new Error(`${what}: the list API has ${names}, the table ${n} row(s) of ${name}`);
    if (gone && n === 0) return '';
    if (!gone && n > 0) {
      last = (await row(name).first().innerText()).replace(/\s+/g, ' ');
      if (/_FAILED/.test(last)) throw new Error(`${what}: the row says ${last}`);
      if (done(last)) return last;
    }
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutSec}s; last row: ${last || '(none)'}`);
    await sleep(5000);
  }
}

// details reads the detail page's definition lists: {"Status": ["CREATE_COMPLETE"], ...}.
async function details() {
  await page.locator('dt', { hasText: 'Health Status' }).first().waitFor({ timeout: 60000 });
  // The overview is filled in once the cluster's GET has answered.
  await page.waitForFunction(() => {
    const dt = [...document.querySelectorAll('dt')].find((e) => e.textContent.trim() === 'Status');
    return dt && dt.nextElementSibling && dt.nextElementSibling.textContent.trim() !== '';
  }, null, { timeout: 60000 });
  return page.evaluate(() => {
    const res = {};
    for (const dt of document.querySelectorAll('dl dt')) {
      const vals = [];
      for (let dd = dt.nextElementSibling; dd && dd.tagName === 'DD'; dd = dd.nextElementSibling) {
        vals.push(dd.textContent.trim());
      }
      res[dt.textContent.trim()] = vals;
    }
    return res;
  });
}

async function detailPage(id) {
  await page.goto(`${job.base}/ngdetails/OS::Magnum::Cluster/${id}`);
  return details();
}

// rowAction opens the actions of a row or of the detail page (a split button: the first action, and
// the others behind the caret) and clicks the one named text.
async function action(scope, text) {
  const first = scope.locator('button.split-button', { hasText: text });
  if (await first.count()) {
    await first.first().click();
    return;
  }
  await scope.locator('button.split-caret').first().click();
  await scope.locator('a[role="menuitem"]', { hasText: text }).first().click();
}

async function phaseCreate() {
  const res = {};
  await step('login', login);
  await step('template create (dialog)', async () => {
    await page.locator('button', { hasText: /^\s*Create Cluster Template\s*$/ }).click();
    await modal().locator('#name').fill(job.template);
    await selectLabel('coe', 'Kubernetes');
    await tab('Node Spec');
    await selectLabel('image_id', job.image);
    await selectLabel('keypair_id', 'default');
    await selectLabel('flavor_id', 'm1.small');
    await selectLabel('master_flavor_id', 'm1.medium');
    await tab('Network');
    await selectLabel('external_network_id', 'public');
    await tab('Labels');
    await modal().locator('#labels').fill(job.labels);
    await submit('POST', '/api/container_infra/cluster_templates/');
    await waitRow(`${job.base}/project/cluster_templates/`, job.template, { done: () => true, timeoutSec: 60, what: 'the new template\'s row' });
  });

  await page.goto(`${job.base}/project/clusters/`);
  let submitted;
  await step('cluster create dialog → 201', async () => {
    await page.locator('button', { hasText: /^\s*Create Cluster\s*$/ }).click();
    await modal().locator('#name').fill(job.cluster);
    await selectLabel('cluster_template_id', job.template);
    // The dialog then loads the template and takes its flavors and master count from it.
    await modal().getByText('Cluster Template Detail').waitFor({ timeout: 60000 });
    await selectLabel('availability_zone', 'nova');
    await selectLabel('keypair', 'default');
    await tab('Size');
    // The template has no load balancer, so the dialog fixes 1 master (read-only).
    const masters = modal().locator('#master_count');
    if (!(await masters.isDisabled())) await masters.fill('1');
    await selectLabel('master_flavor_id', 'm1.medium');
    await modal().locator('#node_count').fill('1');
    await selectLabel('flavor_id', 'm1.small');
    const resp = await submit('POST', '/api/container_infra/clusters/');
    submitted = Date.now();
    res.clusterId = (await resp.json()).uuid;
    if (!res.clusterId) throw new Error('the create answer has no uuid');
  });
  await step('cluster CREATE_COMPLETE in the table', async () => {
    res.row = await waitRow(`${job.base}/project/clusters/`, job.cluster, { done: (t) => /CREATE_COMPLETE/.test(t), timeoutSec: job.createTimeout, what: 'CREATE_COMPLETE' });
    res.createSeconds = (Date.now() - submitted) / 1000;
  });
  await step('detail page', async () => {
    await row(job.cluster).first().locator(`td a:text-is("${job.cluster}")`).click();
    res.details = await details();
  });
  await step('Show Certificate → CA downloaded', async () => {
    const [download] = await Promise.all([
      page.waitForEvent('download', { timeout: 60000 }),
      action(page.locator('.details-item-actions'), 'Show Certificate'),
    ]);
    res.caFile = path.join(job.downloads, download.suggestedFilename());
    await download.saveAs(res.caFile);
  });
  return res;
}

async function phaseAlt() {
  const res = {};
  await step('login', login);
  await step('clusters table without the other tenant\'s cluster', async () => {
    await waitRow(`${job.base}/project/clusters/`, job.cluster, { gone: true, timeoutSec: 0, what: 'the other tenant\'s cluster is listed' });
    res.clusterRows = await page.locator('table tbody tr td a').allInnerTexts();
  });
  await step('templates table without the other tenant\'s template', async () => {
    await waitRow(`${job.base}/project/cluster_templates/`, job.template, { gone: true, timeoutSec: 0, what: 'the other tenant\'s template is listed' });
    res.templateRows = await page.locator('table tbody tr td a').allInnerTexts();
  });
  await step('the other tenant\'s cluster URL', async () => {
    // The one HTTP error this step is about: Horizon's REST answer for a cluster of another project.
    expectedHTTPErrors = /Failed to load resource: the server responded with a status of (400|403|404|500)/;
    const api = `/api/container_infra/clusters/${job.clusterId}`;
    const [resp] = await Promise.all([
      page.waitForResponse((r) => r.request().method() === 'GET' && new URL(r.url()).pathname === api, { timeout: 60000 }),
      page.goto(`${job.base}/ngdetails/OS::Magnum::Cluster/${job.clusterId}`),
    ]);
    res.urlStatus = resp.status();
    res.urlBody = (await resp.text()).slice(0, 500);
    const toast = page.locator('.alert', { hasText: 'Unable to retrieve the cluster' }).first();
    await toast.waitFor({ timeout: 60000 });
    res.urlMessage = (await toast.innerText()).trim();
    if (await page.locator('dd', { hasText: job.clusterId }).count()) {
      throw new Error('the detail page shows the other tenant\'s cluster');
    }
  });
  expectedHTTPErrors = null;
  return res;
}

async function phaseUpgrade() {
  const res = {};
  await step('login', login);
  let clicked;
  await step('Rolling Cluster Upgrade dialog → 202', async () => {
    await detailPage(job.clusterId);
    await action(page.locator('.details-item-actions'), 'Rolling Cluster Upgrade');
    await selectLabel('cluster_template_id', job.upgradeTo);
    await submit('POST', `/api/container_infra/clusters/${job.clusterId}/upgrade`);
    clicked = Date.now();
  });
  await step('cluster UPDATE_COMPLETE on the detail page', async () => {
    const deadline = Date.now() + job.upgradeTimeout * 1000;
    for (;;) {
      await sleep(5000);
      res.details = await detailPage(job.clusterId);
      const status = (res.details['Status'] || [])[0];
      if (status === 'UPDATE_COMPLETE') break;
      if (/_FAILED/.test(status)) throw new Error(`upgrade: ${status}: ${(res.details['Status Reason'] || [])[0]}`);
      if (Date.now() > deadline) throw new Error(`upgrade: not UPDATE_COMPLETE within ${job.upgradeTimeout}s: ${status}`);
    }
    res.upgradeSeconds = (Date.now() - clicked) / 1000;
  });
  await step('delete from the table → row gone', async () => {
    await waitRow(`${job.base}/project/clusters/`, job.cluster, { done: () => true, timeoutSec: 0, what: 'the cluster\'s row before the delete' });
    await action(row(job.cluster).first(), 'Delete Cluster');
    const [resp] = await Promise.all([
      page.waitForResponse((r) => r.request().method() === 'DELETE' && r.url().includes('/api/container_infra/clusters/'), { timeout: 60000 }),
      page.locator('.modal-footer button', { hasText: 'Delete Cluster' }).click(),
    ]);
    if (resp.status() >= 300) throw new Error(`delete: HTTP ${resp.status()}`);
    await waitRow(`${job.base}/project/clusters/`, job.cluster, { gone: true, timeoutSec: job.deleteTimeout, what: 'the deleted cluster\'s row' });
  });
  return res;
}

(async () => {
  fs.mkdirSync(job.shots, { recursive: true });
  fs.mkdirSync(job.downloads, { recursive: true });
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'horizon-e2e-'));
  const ctx = await chromium.launchPersistentContext(profile, {
    executablePath: job.chromium,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
    acceptDownloads: true,
    downloadsPath: job.downloads,
    viewport: { width: 1400, height: 1000 },
  });
  ctx.setDefaultTimeout(60000);
  page = ctx.pages()[0] || (await ctx.newPage());
  page.on('console', (m) => {
    if (m.type() !== 'error') return;
    const text = m.text();
    if (knownConsoleErrors.some((re) => re.test(text))) return;
    if (expectedHTTPErrors && expectedHTTPErrors.test(text)) return;
    if (listLoad && /status of 5\d\d/.test(text)) { listLoad.serverErrors.push(`${page.url()}: ${text}`); return; }
    consoleErrors.push(`${page.url()}: ${text}`);
  });
  page.on('pageerror', (e) => {
    if (knownConsoleErrors.some((re) => re.test(e.message))) return;
    consoleErrors.push(`${page.url()}: uncaught: ${e.message}`);
  });
  let code = 0;
  try {
    const phases = { create: phaseCreate, alt: phaseAlt, upgrade: phaseUpgrade };
    const res = await phases[job.phase]();
    if (consoleErrors.length) throw new Error(`console errors:\n  ${consoleErrors.join('\n  ')}`);
    out('RESULT', res);
  } catch (e) {
    code = 1;
    console.error(`${job.phase}: ${e.stack || e}`);
    if (consoleErrors.length) console.error(`console errors:\n  ${consoleErrors.join('\n  ')}`);
    await screenshot('FAILED');
  } finally {
    await ctx.close().catch(() => {});
    fs.rmSync(profile, { recursive: true, force: true });
  }
  process.exit(code);
})();
