// Drives the hookgate console in the distribution's headless Chromium through Playwright
// (`playwright-core`, no browser download). Started by crates/hookgate/tests/it/console.rs
// against a real `hookgate serve`; it prints one JSON line with what it saw, which that test
// checks (and the test reads the store to confirm). Exits non-zero when a step fails, with the
// step's name in the JSON's `error`.
//
// Input (environment):
//   CONSOLE_URL          the console's address (http://127.0.0.1:PORT/console)
//   CONSOLE_TOKEN        a token with read, decrypt and operate
//   CONSOLE_READ_TOKEN   a token with read only
//   CONSOLE_BAD_TOKEN    a token the gateway does not know
//   CONSOLE_ENDPOINT     the endpoint to filter on
//   CONSOLE_TARGET       the inbox id of an IGNORED event of that endpoint, to replay
//   CONSOLE_DESTINATION  the endpoint's destination, to re-deliver to
//   CONSOLE_JOB_ENDPOINT another endpoint, whose IGNORED events a bulk job replays
//   CONSOLE_FAILED_DELIVERY the inbox id of an event whose delivery FAILED (once)
//   CONSOLE_BULK_ENDPOINT an endpoint with many IGNORED events, for a slow job to pause
//   CONSOLE_SCREENSHOT   where to write the screenshot of the events list (PNG)
//   CHROMIUM             the browser (default /usr/bin/chromium)
'use strict';

const fs = require('fs');
const os = require('os');
const path = require('path');
const { chromium } = require('playwright-core');

const env = (name, fallback) => {
  const v = process.env[name] || fallback;
  if (!v) throw new Error('missing environment variable ' + name);
  return v;
};

// Generous: the suite runs other tests beside this one on two cores.
const STEP_TIMEOUT = 60000;

async function main(out) {
  const url = env('CONSOLE_URL');
  const token = env('CONSOLE_TOKEN');
  const readToken = env('CONSOLE_READ_TOKEN');
  const badToken = env('CONSOLE_BAD_TOKEN');
  const endpoint = env('CONSOLE_ENDPOINT');
  const target = env('CONSOLE_TARGET');
  const screenshot = env('CONSOLE_SCREENSHOT');
  const destination = env('CONSOLE_DESTINATION');
  const jobEndpoint = env('CONSOLE_JOB_ENDPOINT');
  const bulkEndpoint = env('CONSOLE_BULK_ENDPOINT');
  const failedDelivery = env('CONSOLE_FAILED_DELIVERY');
  const origin = new URL(url).origin;

  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'hookgate-console-chromium-'));
  out.step = 'launch';
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: env('CHROMIUM', '/usr/bin/chromium'),
    headless: true,
    args: [
      '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
    ],
    viewport: { width: 1360, height: 900 },
    timeout: STEP_TIMEOUT,
  });
  try {
    await drive(context, out, { url, token, readToken, badToken, endpoint, target, screenshot, destination, jobEndpoint, bulkEndpoint, failedDelivery, origin });
  } finally {
    await context.close();
    fs.rmSync(profile, { recursive: true, force: true });
  }
}

async function drive(context, out, t) {
  const page = context.pages()[0] || (await context.newPage());
  page.setDefaultTimeout(STEP_TIMEOUT);
  out.browser_errors = [];
  page.on('pageerror', (e) => out.browser_errors.push('pageerror: ' + e.message));
  page.on('console', (m) => {
    // Chromium logs every non-2xx fetch; the refusals this script provokes (401, 403) are expected.
    const expected = /^Failed to load resource: the server responded with a status of 40[13]/;
    if (m.type() === 'error' && !expected.test(m.text())) out.browser_errors.push('console: ' + m.text());
  });
  // Every request the page makes: to this origin only; the API's with a Bearer header and no cookie.
  out.requests = { total: 0, other_origin: [], api_without_bearer: [], with_cookie: [], api_statuses: [] };
  page.on('request', (r) => {
    const u = new URL(r.url());
    out.requests.total += 1;
    if (u.origin !== t.origin) out.requests.other_origin.push(r.url());
    const h = r.headers();
    if (h.cookie) out.requests.with_cookie.push(u.pathname);
    if (u.pathname.startsWith('/api/') && !/^Bearer \S+$/.test(h.authorization || '')) {
      out.requests.api_without_bearer.push(u.pathname);
    }
  });
  page.on('response', (r) => {
    const u = new URL(r.url());
    if (u.pathname.startsWith('/api/')) out.requests.api_statuses.push(r.request().method() + ' ' + u.pathname + ' ' + r.status());
  });

  out.step = 'open the console';
  const first = await page.goto(t.url, { waitUntil: 'load' });
  out.page_status = first.status();
  out.page_csp = first.headers()['content-security-policy'] || null;
  await page.locator('#view-login').waitFor({ state: 'visible' });

  out.step = 'a wrong token is refused';
  await page.fill('#token', t.badToken);
  await page.click('#login-submit');
  await page.locator('#login-error').waitFor({ state: 'visible' });
  out.wrong_token_error = await page.textContent('#login-error');
  out.wrong_token_nav_hidden = await page.locator('#nav').isHidden();
  out.wrong_token_events_hidden = await page.locator('#view-events').isHidden();

  out.step = 'sign in with the read-only token; replay is refused';
  await signIn(page, t.readToken);
  await page.goto(t.url + '#/events/' + encodeURIComponent(t.target));
  await page.reload({ waitUntil: 'load' });
  // A new document: the token was in memory only, so it asks again.
  await page.locator('#view-login').waitFor({ state: 'visible' });
  out.token_forgotten_on_reload = true;
  await signIn(page, t.readToken);
  await page.locator('#view-event').waitFor({ state: 'visible' });
  await waitText(page, '#event-status', 'IGNORED');
  await page.click('#replay-event');
  await page.waitForFunction(() => /refused/.test(document.querySelector('#operation-result').textContent));
  out.read_only_replay = await page.textContent('#operation-result');
  await page.click('#show-payload');
  await page.waitForFunction(() => !/Decrypting/.test(document.querySelector('#payload').textContent));
  out.read_only_payload = await page.textContent('#payload');
  await page.click('#logout');
  await page.locator('#view-login').waitFor({ state: 'visible' });

  out.step = 'sign in with the operator token';
  await signIn(page, t.token);
  await page.locator('#view-events').waitFor({ state: 'visible' });
  await page.waitForFunction(() => /event/.test(document.querySelector('#events-summary').textContent));
  out.listed = await rows(page);
  out.injected_elements = await page.evaluate(() => document.querySelectorAll('#events-table img, #events-table b').length);

  out.step = 'the events list screenshot';
  await page.screenshot({ path: t.screenshot, fullPage: false });

  out.step = 'page through the list three at a time';
  await page.fill('#f-limit', '3');
  await page.click('#apply-filters');
  await page.waitForFunction(() => document.querySelectorAll('#events-table tbody tr').length === 3);
  out.pages = [await rows(page)];
  while (await page.locator('#next-page').isEnabled()) {
    const before = await page.textContent('#events-table tbody');
    await page.click('#next-page');
    await page.waitForFunction((b) => document.querySelector('#events-table tbody').textContent !== b, before);
    out.pages.push(await rows(page));
    if (out.pages.length > 10) throw new Error('more pages than events');
  }
  await page.fill('#f-limit', '50');

  out.step = 'filter: IGNORED events of one endpoint';
  await page.selectOption('#f-status', 'ignored');
  await page.fill('#f-endpoint_id', t.endpoint);
  const filtered = page.waitForResponse((r) => r.url().includes('/api/v1/events?') && r.url().includes('status=ignored'));
  await page.click('#apply-filters');
  await filtered;
  await page.waitForFunction(() => /matching the filter/.test(document.querySelector('#events-summary').textContent));
  out.filtered = await rows(page);

  out.step = 'open the target event';
  await page.click('#events-table a[href$="' + encodeURIComponent(t.target) + '"]');
  await page.locator('#view-event').waitFor({ state: 'visible' });
  await waitText(page, '#event-status', 'IGNORED');
  out.detail_id = await page.textContent('#event-id');
  out.status_before = await page.textContent('#event-status');
  out.metadata = await page.$$eval('#event-meta tr', (trs) => Object.fromEntries(trs.map((tr) => [tr.cells[0].textContent, tr.cells[1].textContent])));

  out.step = 'decrypt the payload';
  await page.click('#show-payload');
  await page.waitForFunction(() => !/Decrypting/.test(document.querySelector('#payload').textContent));
  out.payload = await page.textContent('#payload');

  out.step = 'replay it and see its status change';
  await page.click('#replay-event');
  await waitText(page, '#event-status', 'PROCESSED');
  out.status_after = await page.textContent('#event-status');
  await page.waitForFunction(() => /Status changed/.test(document.querySelector('#operation-result').textContent));
  out.operation_result = await page.textContent('#operation-result');

  out.step = 'its delivery, then a re-delivery with a fresh key';
  await page.waitForFunction(() => /Status changed/.test(document.querySelector('#operation-result').textContent));
  out.deliveries_after_replay = await deliveries(page);
  await page.selectOption('#redeliver-destination', t.destination);
  await page.check('#redeliver-fresh-key');
  await page.click('#redeliver-event');
  await page.waitForFunction(
    ([id]) => [...document.querySelectorAll('#event-deliveries tbody tr')].some((tr) => {
      const text = tr.textContent;
      return text.includes('DELIVERED') && !text.includes(id);
    }) && /Status stays PROCESSED/.test(document.querySelector('#operation-result').textContent),
    [t.target],
  );
  out.deliveries_after_redeliver = await deliveries(page);

  out.step = 'retry a FAILED delivery';
  await page.goto(t.url + '#/events/' + encodeURIComponent(t.failedDelivery));
  await page.locator('#view-event').waitFor({ state: 'visible' });
  await waitText(page, '#event-id', t.failedDelivery);
  await page.waitForFunction(() => document.querySelector('#event-deliveries tbody').textContent.includes('FAILED'));
  out.retry_before = await deliveries(page);
  out.retry_enabled = await page.isEnabled('#retry-event');
  await page.click('#retry-event');
  await page.waitForFunction(() => document.querySelector('#event-deliveries tbody').textContent.includes('DELIVERED')
    && /Status stays PROCESSED/.test(document.querySelector('#operation-result').textContent));
  out.retry_after = await deliveries(page);
  await page.goto(t.url + '#/events/' + encodeURIComponent(t.target));
  await page.locator('#view-event').waitFor({ state: 'visible' });
  await waitText(page, '#event-id', t.target);

  out.step = 'the list shows it processed';
  await page.click('#back-to-events');
  await page.locator('#view-events').waitFor({ state: 'visible' });
  await page.selectOption('#f-status', 'processed');
  const processed = page.waitForResponse((r) => r.url().includes('status=processed'));
  await page.click('#apply-filters');
  await processed;
  await page.waitForFunction(() => /matching the filter/.test(document.querySelector('#events-summary').textContent));
  out.processed_after = await rows(page);

  out.step = 'a bulk replay job for the IGNORED events of the other endpoint';
  await page.selectOption('#f-status', 'ignored');
  await page.fill('#f-endpoint_id', t.jobEndpoint);
  const jobList = page.waitForResponse((r) => r.url().includes('endpoint_id=' + t.jobEndpoint));
  await page.click('#apply-filters');
  await jobList;
  await page.waitForFunction(() => /matching the filter/.test(document.querySelector('#events-summary').textContent));
  out.job_filtered = await rows(page);
  await page.click('#job-from-filter');
  await page.locator('#view-jobs').waitFor({ state: 'visible' });
  out.job_filter_shown = await page.textContent('#job-filter');
  await page.selectOption('#job-action', 'replay');
  const created = page.waitForResponse((r) => r.url().endsWith('/api/v1/jobs') && r.request().method() === 'POST');
  await page.click('#job-create');
  const createdAnswer = await created;
  out.job_created_status = createdAnswer.status();
  const jobId = (await createdAnswer.json()).id;
  out.job_id = jobId;
  await page.waitForFunction((id) => {
    const tr = document.querySelector('#jobs-table tr[data-job="' + id + '"]');
    return tr && tr.querySelector('.job-state').textContent === 'done';
  }, jobId);
  out.job_row = await page.$eval('#jobs-table tr[data-job="' + jobId + '"]', (tr) => ({
    action: tr.cells[1].textContent,
    state: tr.querySelector('.job-state').textContent,
    counts: tr.querySelector('.job-counts').textContent,
    progress_value: tr.querySelector('progress').value,
    progress_max: tr.querySelector('progress').max,
  }));

  out.step = 'a slow bulk job: pause it, resume it, see it done';
  await page.click('#nav a[data-view="events"]');
  await page.locator('#view-events').waitFor({ state: 'visible' });
  await page.selectOption('#f-status', 'ignored');
  await page.fill('#f-endpoint_id', t.bulkEndpoint);
  const bulkList = page.waitForResponse((r) => r.url().includes('endpoint_id=' + t.bulkEndpoint));
  await page.click('#apply-filters');
  await bulkList;
  await page.waitForFunction(() => /matching the filter/.test(document.querySelector('#events-summary').textContent));
  out.bulk_filtered = await rows(page);
  await page.click('#job-from-filter');
  await page.locator('#view-jobs').waitFor({ state: 'visible' });
  await page.selectOption('#job-action', 'replay');
  const bulkCreated = page.waitForResponse((r) => r.url().endsWith('/api/v1/jobs') && r.request().method() === 'POST');
  await page.click('#job-create');
  const bulkId = (await (await bulkCreated).json()).id;
  const control = (op) => '#jobs-table tr[data-job="' + bulkId + '"] button[data-op="' + op + '"]';
  const jobState = (want) => page.waitForFunction(([id, w]) => {
    const tr = document.querySelector('#jobs-table tr[data-job="' + id + '"]');
    return tr && tr.querySelector('.job-state').textContent === w;
  }, [bulkId, want]);
  const jobRow = () => page.$eval('#jobs-table tr[data-job="' + bulkId + '"]', (tr) => ({
    state: tr.querySelector('.job-state').textContent,
    counts: tr.querySelector('.job-counts').textContent,
  }));
  await page.click(control('pause'));
  await jobState('paused');
  out.bulk_paused = await jobRow();
  await page.click(control('resume'));
  await jobState('done');
  out.bulk_done = await jobRow();

  out.step = 'the rejection log';
  await page.click('#nav a[data-view="rejections"]');
  await page.locator('#view-rejections').waitFor({ state: 'visible' });
  await page.fill('#r-endpoint', t.endpoint);
  await page.click('#refresh-rejections');
  await page.waitForFunction((ep) => [...document.querySelectorAll('#rejections-table tbody tr')]
    .some((tr) => tr.textContent.includes(ep)), t.endpoint);
  out.rejections = await page.$$eval('#rejections-table', ([table]) => {
    const names = [...table.tHead.querySelectorAll('th')].map((th) => th.textContent);
    return [...table.tBodies[0].rows].map((tr) => Object.fromEntries(names.map((n, i) => [n, tr.cells[i].textContent])));
  });
  out.rejection_counts = await page.$$eval('#rejection-counts tbody tr', (trs) => trs.map((tr) => [...tr.cells].map((c) => c.textContent)));

  out.step = 'live rates and acknowledgement latency';
  await page.click('#nav a[data-view="live"]');
  await page.locator('#view-live').waitFor({ state: 'visible' });
  // Rates need two scrapes (2 s apart); the totals and latency are there after the first.
  await page.waitForFunction(() => /^\d/.test(document.querySelector('#rate-accepted').textContent));
  out.live = await page.evaluate(() => ({
    rate_accepted: document.querySelector('#rate-accepted').textContent,
    ack_p50: document.querySelector('#ack-p50').textContent,
    ack_p99: document.querySelector('#ack-p99').textContent,
    outcomes: Object.fromEntries([...document.querySelectorAll('#outcomes-table tbody tr')]
      .map((tr) => [tr.cells[0].textContent, tr.cells[1].textContent])),
  }));

  out.step = 'the audit log';
  await page.click('#nav a[data-view="audit"]');
  await page.locator('#view-audit').waitFor({ state: 'visible' });
  await page.waitForFunction(() => document.querySelectorAll('#audit-table tbody tr').length > 1);
  out.audit = await page.$$eval('#audit-table', ([table]) => {
    const names = [...table.tHead.querySelectorAll('th')].map((th) => th.textContent);
    return [...table.tBodies[0].rows].map((tr) => Object.fromEntries(names.map((n, i) => [n, tr.cells[i].textContent])));
  });

  out.step = 'storage and cookies';
  out.cookies = (await context.cookies()).length;
  out.storage = await page.evaluate(() => localStorage.length + sessionStorage.length);
  out.step = 'done';
}

async function signIn(page, token) {
  await page.locator('#view-login').waitFor({ state: 'visible' });
  await page.fill('#token', token);
  await page.click('#login-submit');
  await page.waitForFunction(() => document.body.dataset.signedIn === 'yes');
}

async function waitText(page, selector, text) {
  await page.waitForFunction(
    ([s, want]) => document.querySelector(s).textContent.trim() === want,
    [selector, text],
  );
}

async function deliveries(page) {
  return page.$$eval('#event-deliveries', ([table]) => {
    const names = [...table.tHead.querySelectorAll('th')].map((th) => th.textContent);
    return [...table.tBodies[0].rows].map((tr) => Object.fromEntries(names.map((n, i) => [n, tr.cells[i] ? tr.cells[i].textContent : null])));
  });
}

async function rows(page) {
  return page.$$eval('#events-table tbody tr', (trs) => trs.map((tr) => ({
    id: tr.dataset.id,
    status: tr.querySelector('.event-status').textContent,
    endpoint: tr.cells[3].textContent,
    event_type: tr.querySelector('.event-type').textContent,
  })));
}

const out = { ok: false };
main(out)
  .then(() => {
    out.ok = true;
  })
  .catch((e) => {
    out.error = out.step + ': ' + (e && e.stack ? e.stack : String(e));
    process.exitCode = 1;
  })
  .finally(() => {
    process.stdout.write(JSON.stringify(out) + '\n');
  });
