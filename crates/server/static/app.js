// Vantage web UI: the few things a server-rendered page cannot do alone. Changes go to the
// admin API (/v1) with fetch(); the session cookie counts there only with X-Vantage-UI: 1.
(() => {
  'use strict';

  const UI_HEADER = { 'X-Vantage-UI': '1' };

  function loginAgain() {
    location.href = '/ui/login?next=' + encodeURIComponent(location.pathname + location.search);
  }

  // Calls the API; resolves to the JSON answer, rejects with "field: reason".
  async function api(method, url, body) {
    const init = { method, headers: { ...UI_HEADER }, credentials: 'same-origin' };
    if (body !== undefined) {
      init.headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    const resp = await fetch(url, init);
    const text = await resp.text();
    let data = null;
    try { data = text ? JSON.parse(text) : null; } catch (_) { data = null; }
    if (resp.status === 401) {
      loginAgain();
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
  // (split at commas and spaces), empty optional fields left out.
  function formBody(form) {
    const out = {};
    const typed = (el, v) => el.dataset.type === 'number' ? Number(v) : v;
    for (const el of form.elements) {
      if (!el.name || el.disabled) continue;
      if (el.type === 'checkbox') { out[el.name] = el.checked; continue; }
      if (el.multiple) { out[el.name] = Array.from(el.selectedOptions, (o) => typed(el, o.value)); continue; }
      if (el.value === '' && el.dataset.optional !== undefined) continue;
      // A local date and time as the browser's zone reads it; empty: left out (now).
      if (el.dataset.type === 'datetime') { if (el.value) out[el.name] = new Date(el.value).toISOString(); continue; }
      // `443/https 80/http`: a cluster's listeners.
      if (el.dataset.type === 'listeners') {
        out[el.name] = el.value.split(/[\s,]+/).filter(Boolean).map((t) => {
          // Each listener names its protocol: one left out is the API's to refuse.
          const [port, protocol] = t.split('/');
          return { port: Number(port), protocol: protocol || '' };
        });
        continue;
      }
      if (el.dataset.type === 'list') { out[el.name] = el.value.split(/[\s,]+/).filter(Boolean); continue; }
      if (el.dataset.type === 'address-rows') { out[el.name] = addressRows(el); continue; }
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
      // A route that takes one field's value as the whole body (a list) names it.
      const data = await api(form.dataset.method || 'POST', form.dataset.api,
                             form.dataset.send ? body[form.dataset.send] : body);
      const dialog = form.closest('dialog');
      if (dialog) dialog.close();
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
      if (main.querySelector('.field-error') || [...main.querySelectorAll('input, textarea')].some(
        (el) => (el.type === 'checkbox' ? el.checked !== el.defaultChecked : el.value !== el.defaultValue))) return;
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
