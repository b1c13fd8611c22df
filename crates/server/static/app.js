// Vantage web UI: the few things a server-rendered page cannot do alone. Changes go to the
// admin API (/v1) with fetch(); the session cookie counts there only with X-Vantage-UI: 1.
(() => {
  'use strict';

  const UI_HEADER = { 'X-Vantage-UI': '1' };

  function loginAgain() {
    location.href = '/ui/login?next=' + encodeURIComponent(location.pathname + location.search);
  }

  // Calls the API; resolves to the JSON answer, rejects with "field: reason". `opts.headers`
  // adds headers; `opts.quiet` keeps the page when the session has ended (a background read
  // must not take the reader away from what they typed).
  async function api(method, url, body, opts = {}) {
    const init = { method, headers: { ...UI_HEADER, ...(opts.headers || {}) }, credentials: 'same-origin' };
    if (body !== undefined) {
      init.headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    const resp = await fetch(url, init);
    const text = await resp.text();
    let data = null;
    try { data = text ? JSON.parse(text) : null; } catch (_) { data = null; }
    if (resp.status === 401) {
      if (!opts.quiet) loginAgain();
      throw new Error('The session has ended; log in again.');
    }
    if (!resp.ok) {
      const e = data && data.error;
      const err = new Error(e ? (e.field ? e.field + ': ' : '') + e.reason : resp.status + ' ' + resp.statusText);
      err.status = resp.status;
      err.field = e && e.field;
      err.reason = e && e.reason;
      throw err;
    }
    return data;
  }

  function flash(message, tone) {
    const el = document.getElementById('flash');
    if (!el) return;
    el.textContent = message;
    el.className = tone || '';
    el.hidden = false;
  }

  // A form's fields as a JSON object: data-type="number" fields as numbers, checkboxes as
  // booleans, multiple selects as lists in their order, data-type="list" fields as lists
  // (split at commas and spaces; "numbers": of numbers), empty optional fields left out and
  // empty data-null fields sent as null (an edit's merge patch clears them so).
  function formBody(form) {
    const out = {};
    const typed = (el, v) => el.dataset.type === 'number' ? Number(v) : v;
    for (const el of form.elements) {
      if (!el.name || el.disabled) continue;
      if (el.type === 'checkbox') { out[el.name] = el.checked; continue; }
      if (el.multiple) { out[el.name] = picked(el).map((v) => typed(el, v)); continue; }
      if (el.value === '' && el.dataset.null !== undefined) { out[el.name] = null; continue; }
      if (el.value === '' && el.dataset.optional !== undefined) continue;
      // A local date and time as the browser's zone reads it; empty: left out (now).
      if (el.dataset.type === 'datetime') { if (el.value) out[el.name] = new Date(el.value).toISOString(); continue; }
      // `443/https 80/http/proxy`: a cluster's listeners (`/proxy`: behind the PROXY protocol).
      if (el.dataset.type === 'listeners') {
        out[el.name] = el.value.split(/[\s,]+/).filter(Boolean).map((t) => {
          // Each listener names its protocol: one left out is the API's to refuse.
          const [port, protocol, proxy] = t.split('/');
          const l = { port: Number(port), protocol: protocol || '' };
          if (proxy !== undefined) l.proxy_protocol = proxy === 'proxy' ? true : proxy;
          return l;
        });
        continue;
      }
      if (el.dataset.type === 'publishers') { out[el.name] = publisherRows(el); continue; }
      if (el.dataset.type === 'list') { out[el.name] = el.value.split(/[\s,]+/).filter(Boolean); continue; }
      if (el.dataset.type === 'numbers') { out[el.name] = el.value.split(/[\s,]+/).filter(Boolean).map(Number); continue; }
      if (el.dataset.type === 'address-rows') { out[el.name] = addressRows(el); continue; }
      if (el.dataset.type === 'conditions') { out[el.name] = conditionRows(el); continue; }
      if (el.dataset.type === 'monitor-regions') { out[el.name] = monitorRegions(el); continue; }
      out[el.name] = typed(el, el.value.trim());
    }
    return out;
  }

  // An address editor's rows: `IP [LEVEL | @LINE] [trusted]` a line, a line named by its id
  // through the editor's data-lines (an unknown name is sent as written, for the API to refuse).
  function addressRows(el) {
    const lines = JSON.parse(el.dataset.lines || '{}');
    return el.value.split('\n').map((l) => l.trim()).filter(Boolean).map((l) => {
      const [ip, ...rest] = l.split(/\s+/);
      const row = { ip };
      for (const word of rest) {
        if (word === 'trusted') row.trusted = true;
        else if (word.startsWith('@')) row.line = word.slice(1) in lines ? lines[word.slice(1)] : word.slice(1);
        else row.level = word;
      }
      return row;
    });
  }

  // A multiple select's values in the order they were picked (a line's backup groups are
  // tried in that order): those it held first in their order, then the ones picked since.
  function picked(el) {
    const order = JSON.parse(el.dataset.order || '[]');
    const chosen = Array.from(el.selectedOptions, (o) => o.value);
    return [...order.filter((v) => chosen.includes(v)), ...chosen.filter((v) => !order.includes(v))];
  }

  // A select shows the value it is given even when it offers no such choice (a check named
  // in another case, a tenant gone from the file): it is added, so that saving keeps it.
  function choose(el, values) {
    const wanted = values.map(String);
    for (const v of wanted) {
      const match = [...el.options].find((o) => o.value.toLowerCase() === v.toLowerCase());
      if (!match) el.add(new Option(v + ' (not found)', v));
    }
    for (const o of el.options) o.selected = wanted.some((v) => v.toLowerCase() === o.value.toLowerCase());
  }

  const rowsOf = (el) => el.value.split('\n').map((l) => l.trim()).filter(Boolean);

  // A rule's conditions, one a line: `METRIC OP THRESHOLD [for SECONDS] [avg|max|min]
  // [in REGION]`, the region by its code through data-regions (an unknown code is sent as
  // written, for the API to refuse by field).
  function conditionRows(el) {
    const regions = JSON.parse(el.dataset.regions || '{}');
    return rowsOf(el).map((l) => {
      const [metric, comparison, threshold, ...rest] = l.split(/\s+/);
      const row = { metric, comparison, threshold: Number(threshold) };
      for (let i = 0; i < rest.length; i++) {
        const w = rest[i];
        if (w === 'for') row.for_s = Number(String(rest[++i]).replace(/s$/, ''));
        else if (w === 'in') {
          const r = String(rest[++i]);
          row.region = Object.hasOwn(regions, r.toLowerCase()) ? regions[r.toLowerCase()] : r;
        }
        else row.aggregate = w;
      }
      return row;
    });
  }

  function conditionText(c, regions) {
    const code = Object.keys(regions).find((k) => regions[k] === c.region);
    let t = c.metric + ' ' + c.comparison + ' ' + c.threshold + ' for ' + c.for_s;
    if (c.metric.startsWith('probe_')) t += ' ' + (c.aggregate || 'avg') + (code ? ' in ' + code : '');
    return t;
  }

  // A cluster's publishers, one a line: `NAME SERVER KEY_NAME [hmac-…] [zone=ZONE]
  // [secret=BASE64]`; a publisher without a secret keeps the one it has (the API's rule).
  function publisherRows(el) {
    return rowsOf(el).map((l) => {
      const [name, server, key_name, ...rest] = l.split(/\s+/);
      const row = { name, server, key_name };
      for (const w of rest) {
        if (w.startsWith('zone=')) row.zone = w.slice(5);
        else if (w.startsWith('secret=')) row.key_secret = w.slice(7);
        else row.key_algorithm = w;
      }
      return row;
    });
  }

  // A monitor's regions, one a line: `REGION WEIGHT URL… [pathway=NAME] [max_age=SECONDS]`.
  function monitorRegions(el) {
    return rowsOf(el).map((l) => {
      const [region, weight, ...rest] = l.split(/\s+/);
      const row = { region, weight: Number(weight), endpoints: [] };
      for (const w of rest) {
        if (w.startsWith('pathway=')) row.pathway = w.slice(8);
        else if (w.startsWith('max_age=')) row.max_segment_age_s = Number(w.slice(8));
        else row.endpoints.push(w);
      }
      return row;
    });
  }

  function monitorRegionText(r) {
    return [r.region, r.weight, ...r.endpoints].join(' ') + (r.pathway ? ' pathway=' + r.pathway : '') +
      (r.max_segment_age_s != null ? ' max_age=' + r.max_segment_age_s : '');
  }

  // Fills a form with an object's fields as its API document holds them (the inverse of
  // formBody); a field the document leaves out is emptied. Hidden fields and write-only
  // ones (secrets, data-write-only) keep what they hold.
  function fillForm(form, values) {
    for (const el of form.elements) {
      if (!el.name || el.type === 'hidden') continue;
      // A secret is never shown, nor carried from one object's edit to another's.
      if (el.dataset.writeOnly !== undefined) { el.value = ''; continue; }
      const v = values[el.name];
      const type = el.dataset.type;
      if (el.type === 'checkbox') el.checked = Boolean(v);
      else if (el.multiple) { choose(el, v || []); el.dataset.order = JSON.stringify((v || []).map(String)); }
      else if (el.tagName === 'SELECT') choose(el, v == null ? [''] : [v]);
      else if (type === 'list' || type === 'numbers') el.value = (v || []).join(', ');
      else if (type === 'listeners') el.value = (v || []).map((l) => l.port + '/' + l.protocol + (l.proxy_protocol ? '/proxy' : '')).join(' ');
      else if (type === 'conditions') el.value = (v || []).map((c) => conditionText(c, JSON.parse(el.dataset.regions || '{}'))).join('\n');
      else if (type === 'monitor-regions') el.value = (v || []).map(monitorRegionText).join('\n');
      else el.value = v == null ? '' : String(v);
    }
  }

  // "Edit" on an object's row: its form, filled with the object, saves it (PATCH, or the
  // method the button names) until "Cancel edit" turns it back into the form for a new one.
  function editWith(button) {
    const form = document.getElementById(button.dataset.edit);
    const submit = form.querySelector('[type=submit]');
    if (form.dataset.newApi === undefined) {
      Object.assign(form.dataset, { newApi: form.dataset.api, newMethod: form.dataset.method || 'POST',
                                    newPreview: form.dataset.preview || '', newLabel: submit.textContent });
    }
    clearErrors(form);
    form.dataset.editing = button.dataset.target;
    fillForm(form, JSON.parse(button.dataset.values));
    form.dataset.api = button.dataset.target;
    form.dataset.method = button.dataset.method || 'PATCH';
    if (button.dataset.preview) form.dataset.preview = button.dataset.preview;
    submit.textContent = button.dataset.label || 'Save';
    const title = form.querySelector('[data-title]');
    if (title) title.textContent = 'Editing ' + (button.dataset.name || '');
    const cancel = form.querySelector('[data-reset]');
    if (cancel) cancel.hidden = false;
    const details = form.closest('details');
    if (details) details.open = true;
    form.scrollIntoView({ block: 'center' });
    const first = form.querySelector('input:not([type=hidden]), select, textarea');
    if (first) first.focus();
    if (form.dataset.preview) schedulePreview(form);
  }

  function endEdit(form) {
    form.reset();
    clearErrors(form);
    for (const el of form.querySelectorAll('select[multiple]')) delete el.dataset.order;
    // A preview asked for the edit must not paint the form for a new one.
    clearTimeout(form.previewTimer);
    form.previewSeq = (form.previewSeq || 0) + 1;
    delete form.dataset.editing;
    if (form.dataset.newApi === undefined) return;
    form.dataset.api = form.dataset.newApi;
    form.dataset.method = form.dataset.newMethod;
    form.dataset.preview = form.dataset.newPreview;
    form.querySelector('[type=submit]').textContent = form.dataset.newLabel;
    const title = form.querySelector('[data-title]');
    if (title) title.textContent = '';
    const cancel = form.querySelector('[data-reset]');
    if (cancel) cancel.hidden = true;
    const out = form.dataset.previewOut && document.getElementById(form.dataset.previewOut);
    if (out) showPreview(out, null, '');
  }

  // A rule's live preview: what the rule as drafted would do on each node now, as if it
  // were on; asked 300 ms after the last keystroke, the latest answer only shown.
  function schedulePreview(form) {
    clearTimeout(form.previewTimer);
    form.previewTimer = setTimeout(() => runPreview(form), 300);
  }

  async function runPreview(form) {
    const out = document.getElementById(form.dataset.previewOut);
    if (!out) return;
    const seq = (form.previewSeq = (form.previewSeq || 0) + 1);
    const body = formBody(form);
    // Nothing to preview before what it looks at is written.
    const needs = form.dataset.previewNeeds;
    if (needs && !(body[needs] || []).length) { showPreview(out, null, ''); return; }
    // The preview is of what the rule does; a name is for saving it.
    if (!body.name) body.name = '(preview of a draft)';
    try {
      const data = await api('POST', form.dataset.preview, body, { quiet: true });
      if (seq === form.previewSeq) showPreview(out, data.items, '');
    } catch (e) {
      if (seq === form.previewSeq) showPreview(out, null, 'Not previewed: ' + e.message);
    }
  }

  function showPreview(out, items, note) {
    const table = out.querySelector('table');
    const body = table.querySelector('tbody');
    const status = out.querySelector('[data-preview-note]');
    body.replaceChildren();
    table.hidden = !items || items.length === 0;
    if (items && items.length === 0) note = 'No node for it to look at: no enabled node in its scope.';
    if (note) status.textContent = note;
    else if (!items) status.textContent = status.dataset.idle || '';
    else status.textContent = 'As if it were on, now; nothing is saved until you save the rule.';
    for (const it of items || []) {
      const tr = document.createElement('tr');
      tr.dataset.node = it.node_name;
      const conditions = it.conditions.map((c) => c.metric + ': ' + (c.value == null ? 'No data' : c.value) +
        ' (needs ' + c.comparison + ' ' + c.threshold + '; held ' + c.held_s + ' of ' + c.required_s + ' s)');
      for (const text of [it.node_name, it.status.replace(/_/g, ' '), conditions.join('; '), it.outcome_text]) {
        const td = document.createElement('td');
        td.textContent = text;
        tr.append(td);
      }
      body.append(tr);
    }
  }

  // Picks in an ordered select are remembered in their order.
  document.addEventListener('change', (ev) => {
    if (ev.target.matches && ev.target.matches('select[multiple][data-ordered]')) {
      ev.target.dataset.order = JSON.stringify(picked(ev.target));
    }
  });

  for (const kind of ['input', 'change']) {
    document.addEventListener(kind, (ev) => {
      const form = ev.target.closest && ev.target.closest('form[data-preview]');
      if (form && form.dataset.preview) schedulePreview(form);
    });
  }

  // The confirmation dialog; resolves true when confirmed.
  function confirmAction(text, note, label) {
    const dialog = document.getElementById('confirm-dialog');
    if (!dialog) return Promise.resolve(window.confirm(text));
    document.getElementById('confirm-text').textContent = text;
    document.getElementById('confirm-note').textContent = note || '';
    document.getElementById('confirm-ok').textContent = label || 'Delete';
    dialog.returnValue = '';
    return new Promise((resolve) => {
      dialog.addEventListener('close', () => resolve(dialog.returnValue === 'ok'), { once: true });
      dialog.showModal();
    });
  }

  function showToken(t) {
    for (const [id, value] of [['token-value', t.token], ['token-command', t.command],
                               ['token-ca', t.ca_sha256], ['token-server', t.server],
                               ['token-expires', new Date(t.expires_at).toLocaleString()]]) {
      const el = document.getElementById(id);
      if (el) el.textContent = value || '';
    }
    const dialog = document.getElementById('token-dialog');
    dialog.addEventListener('close', () => location.reload(), { once: true });
    dialog.showModal();
  }

  function after(then, data) {
    if (then === 'token') { showToken(data); return; }
    // A check run changes nothing on the page until the probers report, so it says what started.
    if (then === 'check-run') {
      flash('Check run started: ' + data.probers + ' prober(s) check ' + data.mirrors +
            ' mirror(s) at their next request for work.', 'good');
      return;
    }
    // A test notice changes nothing on the page: it says how the delivery went.
    if (then === 'test-notice') {
      if (data.delivered) flash('Delivered: the channel took the test notice.', 'good');
      else flash('Not delivered: ' + data.error);
      return;
    }
    // A page of something deleted has nothing left to show: go where the button says.
    if (then && then.startsWith('/ui/')) { location.href = then; return; }
    location.reload();
  }

  // A form's refusals go before it is tried again or opened anew.
  function clearErrors(form) {
    const error = form.querySelector('.form-error');
    if (error) error.textContent = '';
    for (const old of form.querySelectorAll('.field-error')) old.remove();
    for (const old of form.querySelectorAll('[aria-invalid]')) {
      old.removeAttribute('aria-invalid');
      old.removeAttribute('aria-describedby');
    }
  }

  document.addEventListener('submit', async (ev) => {
    const form = ev.target.closest('form[data-api]');
    if (!form) return;
    ev.preventDefault();
    const error = form.querySelector('.form-error');
    clearErrors(form);
    const submit = form.querySelector('[type=submit]');
    if (submit) submit.disabled = true;
    try {
      const body = formBody(form);
      // A route named by a field (`/v1/tenants/{name}`) takes that field's value.
      const url = form.dataset.api.replace(/\{(\w+)\}/g, (_, k) => encodeURIComponent(body[k] == null ? '' : body[k]));
      // A route that takes one field's value as the whole body (a list) names it.
      // A form that makes a new object through a route that also replaces one (PUT) asks for
      // a new one only: an existing one is refused, not overwritten.
      const creating = form.dataset.createOnly !== undefined && form.dataset.editing === undefined;
      const data = await api(form.dataset.method || 'POST', url,
                             form.dataset.send ? body[form.dataset.send] : body,
                             creating ? { headers: { 'If-None-Match': '*' } } : {});
      const dialog = form.closest('dialog');
      if (dialog) dialog.close();
      // A form that was editing an object is a form for a new one again (a page that stays,
      // as a reload keeps what the fields held).
      if (form.dataset.editing !== undefined) endEdit(form);
      after(form.dataset.then, data);
    } catch (e) {
      if (error) error.textContent = e.message; else flash(e.message);
      // The field the API names (`listeners[0].port` is the listeners field), marked, with
      // the reason beside it.
      const name = e.field && e.field.split(/[.[]/)[0];
      const input = name && form.querySelector('[name="' + CSS.escape(name) + '"]:not([type=hidden])');
      if (input) {
        input.setAttribute('aria-invalid', 'true');
        const note = document.createElement('span');
        note.className = 'field-error';
        note.id = 'error-' + (form.id || 'form') + '-' + name;
        note.textContent = e.reason;
        input.setAttribute('aria-describedby', note.id);
        (input.closest('label') || input).insertAdjacentElement(input.closest('label') ? 'beforeend' : 'afterend', note);
        input.focus();
      }
    } finally {
      if (submit) submit.disabled = false;
    }
  });

  document.addEventListener('click', async (ev) => {
    const opener = ev.target.closest('[data-open]');
    if (opener) {
      const dialog = document.getElementById(opener.dataset.open);
      if (!dialog) return;
      const form = dialog.querySelector('form[data-api]');
      if (form && opener.dataset.target) form.dataset.api = opener.dataset.target;
      const fill = dialog.querySelector('[data-fill]');
      if (fill && opener.dataset.value !== undefined) fill.value = opener.dataset.value;
      const name = dialog.querySelector('[data-name]');
      if (name) name.textContent = opener.dataset.name || '';
      if (form) clearErrors(form);
      dialog.showModal();
      return;
    }
    const edit = ev.target.closest('[data-edit]');
    if (edit) { editWith(edit); return; }
    const reset = ev.target.closest('[data-reset]');
    if (reset) { endEdit(reset.closest('form')); return; }
    const closer = ev.target.closest('[data-close]');
    if (closer) { closer.closest('dialog').close(); return; }
    const copy = ev.target.closest('[data-copy]');
    if (copy) {
      const text = document.getElementById(copy.dataset.copy).textContent;
      try { await navigator.clipboard.writeText(text); copy.textContent = 'Copied'; } catch (_) {
        const range = document.createRange();
        range.selectNodeContents(document.getElementById(copy.dataset.copy));
        getSelection().removeAllRanges();
        getSelection().addRange(range);
      }
      return;
    }
    // "Silence…" on an alert: the silence form, filled with what holds that alert.
    const silence = ev.target.closest('button[data-silence]');
    if (silence) {
      const form = document.getElementById('silence-form');
      form.querySelector('[name=matchers]').value = silence.dataset.silence;
      form.scrollIntoView({ block: 'center' });
      form.querySelector('[name=comment]').focus();
      return;
    }
    const action = ev.target.closest('button[data-api]');
    if (action) {
      if (action.dataset.confirm &&
          !(await confirmAction(action.dataset.confirm, action.dataset.confirmNote, action.dataset.confirmLabel))) return;
      action.disabled = true;
      try {
        const body = action.dataset.body ? JSON.parse(action.dataset.body) : undefined;
        const method = action.dataset.method || 'POST';
        let data;
        try {
          data = await api(method, action.dataset.api, body);
        } catch (e) {
          // A refusal that the operator's word can overrule: say why, and ask again — a delete
          // with ?force=true (data-force), anything else with the body data-overrule gives.
          const force = action.dataset.force !== undefined;
          const overrule = action.dataset.overrule;
          if (e.status !== 409 || (!force && overrule === undefined)) throw e;
          const label = force ? 'Delete anyway' : (action.dataset.overruleLabel || 'Go ahead');
          if (!(await confirmAction(e.message, 'Only with your word: it takes effect in the next revision.', label))) throw e;
          data = force ? await api(method, action.dataset.api + '?force=true', body)
            : await api(method, action.dataset.api, JSON.parse(overrule));
        }
        after(action.dataset.then, data);
      } catch (e) {
        flash(e.message);
      } finally {
        action.disabled = false;
      }
    }
  });

  // Relative times stay current; the absolute time is the title.
  function relative(iso) {
    const s = Math.round((Date.now() - Date.parse(iso)) / 1000);
    const n = Math.abs(s);
    if (s >= 0 && n < 5) return 'just now';
    const amount = n < 60 ? n + ' s' : n < 3600 ? Math.floor(n / 60) + ' min'
      : n < 86400 ? Math.floor(n / 3600) + ' h' : Math.floor(n / 86400) + ' d';
    return s < 0 ? 'in ' + amount : amount + ' ago';
  }
  function refreshTimes(root) {
    for (const t of root.querySelectorAll('time[datetime]')) t.textContent = relative(t.getAttribute('datetime'));
  }
  setInterval(() => refreshTimes(document), 5000);

  // Live pages re-read themselves while nobody is typing or looking at a dialog.
  const main = document.querySelector('main[data-refresh]');
  if (main) {
    const every = Math.max(5, Number(main.dataset.refresh)) * 1000;
    setInterval(async () => {
      if (document.hidden || document.querySelector('dialog[open]')) return;
      const active = document.activeElement;
      if (active && active.closest('main') && active.matches('input, select, textarea')) return;
      // Nor while a form holds what the reader typed, or a refusal to read.
      if (main.querySelector('.field-error') || main.querySelector('[data-reset]:not([hidden])') ||
        [...main.querySelectorAll('input, textarea')].some(
          (el) => (el.type === 'checkbox' ? el.checked !== el.defaultChecked : el.value !== el.defaultValue)) ||
        [...main.querySelectorAll('select')].some((el) => [...el.options].some((o) => o.selected !== o.defaultSelected))) return;
      try {
        const resp = await fetch(location.href, { headers: UI_HEADER, credentials: 'same-origin' });
        if (resp.redirected && new URL(resp.url).pathname === '/ui/login') { loginAgain(); return; }
        if (!resp.ok) return;
        const doc = new DOMParser().parseFromString(await resp.text(), 'text/html');
        const fresh = doc.querySelector('main');
        if (fresh) {
          // What the reader unfolded stays unfolded.
          const open = [...main.querySelectorAll('details[id][open]')].map(d => d.id);
          main.innerHTML = fresh.innerHTML;
          for (const id of open) { const d = document.getElementById(id); if (d) d.open = true; }
          refreshTimes(main);
        }
      } catch (_) { /* the next round tries again */ }
    }, every);
  }
})();
