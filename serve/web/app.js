// The approvals inbox of kernel serve. Plain JavaScript, no build step, no
// other origin. Everything the server sends — tool arguments, results,
// model text, messages — is untrusted text: it is only ever put into the
// page with textContent (el() below), never parsed as HTML, and no link is
// made from it.
'use strict';

const KEY = 'kernel-serve-key';
const $ = (id) => document.getElementById(id);
let key = sessionStorage.getItem(KEY) || '';
let viewAbort = null; // aborts the streams of the view on screen
let me = null; // GET /v1/whoami of the key: name and scopes

// el builds an element; strings among children become text nodes.
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = v;
    else e.setAttribute(k, v);
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    e.append(typeof c === 'string' ? document.createTextNode(c) : c);
  }
  return e;
}

async function api(method, path, body) {
  const opts = { method, headers: { Authorization: 'Bearer ' + key } };
  if (body !== undefined) {
    opts.headers['Content-Type'] = 'application/json';
    opts.body = JSON.stringify(body);
  }
  const res = await fetch(path, opts);
  const text = await res.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch (e) { data = null; }
  if (!res.ok) {
    const msg = data && data.error ? data.error.message : res.status + ' ' + res.statusText;
    const err = new Error(msg);
    err.status = res.status;
    throw err;
  }
  return data;
}

// sse reads a Server-Sent Events stream with the key in a header (which
// EventSource cannot send), calling onEvent for each message. It
// reconnects with Last-Event-ID until signal aborts or onEvent returns
// true.
async function sse(path, onEvent, signal) {
  let lastId = '';
  let delay = 500;
  while (!signal.aborted) {
    try {
      const headers = { Authorization: 'Bearer ' + key };
      if (lastId) headers['Last-Event-ID'] = lastId;
      const res = await fetch(path, { headers, signal });
      if (res.status === 401) { signOut('The key was refused; sign in again.'); return; }
      if (!res.ok) throw new Error('stream: ' + res.status);
      const reader = res.body.getReader();
      const dec = new TextDecoder();
      let buf = '';
      delay = 500;
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += dec.decode(value, { stream: true });
        let i;
        while ((i = buf.indexOf('\n\n')) >= 0) {
          const block = buf.slice(0, i);
          buf = buf.slice(i + 2);
          const ev = { id: '', event: 'message', data: '' };
          for (const line of block.split('\n')) {
            if (line.startsWith('id: ')) ev.id = line.slice(4);
            else if (line.startsWith('event: ')) ev.event = line.slice(7);
            else if (line.startsWith('data: ')) ev.data += line.slice(6);
          }
          if (!ev.data) continue;
          if (ev.id) lastId = ev.id;
          if (onEvent(ev)) return;
        }
      }
    } catch (e) {
      if (signal.aborted) return;
    }
    await new Promise((r) => setTimeout(r, delay));
    delay = Math.min(delay * 2, 10000);
  }
}

function show(id) {
  for (const v of ['signin-view', 'approvals-view', 'sessions-view', 'session-view']) $(v).hidden = v !== id;
  $('nav').hidden = id === 'signin-view';
}

function signOut(message) {
  key = '';
  me = null;
  sessionStorage.removeItem(KEY);
  $('signin-error').textContent = message || '';
  route();
}

// ---- approvals -------------------------------------------------------

const cards = new Map(); // approval id -> card element

function argValue(v) {
  return typeof v === 'string' ? v : JSON.stringify(v, null, 2);
}

// argsBlock renders a call's arguments as the inbox shows them: each
// argument's name, then its value (a string as its text, anything else as
// indented JSON). args is an object, or the raw JSON text of one. skip
// maps an argument's name to what to show instead of its value.
function argsBlock(args, skip) {
  if (typeof args === 'string') {
    try { args = JSON.parse(args); } catch (e) { /* shown as it is */ }
  }
  const wrap = el('div', { class: 'args' });
  if (args && typeof args === 'object' && !Array.isArray(args)) {
    for (const [name, v] of Object.entries(args)) {
      wrap.append(el('div', { class: 'arg-name' }, name));
      if (skip && skip[name]) wrap.append(el('p', { class: 'muted arg-skipped' }, skip[name]));
      else wrap.append(el('pre', { class: 'arg' }, argValue(v)));
    }
  } else {
    wrap.append(el('pre', { class: 'arg' }, argValue(args)));
  }
  return wrap;
}

// diffPre renders a unified diff, a line a row, coloured by kind.
function diffPre(path, unified) {
  const pre = el('pre', { class: 'diff', 'aria-label': 'diff of ' + path });
  for (const line of unified.replace(/\n$/, '').split('\n')) {
    let cls = '';
    if (line.startsWith('+') && !line.startsWith('+++')) cls = 'add';
    else if (line.startsWith('-') && !line.startsWith('---')) cls = 'del';
    else if (line.startsWith('@@')) cls = 'hunk';
    pre.append(el('span', cls ? { class: cls } : {}, line + '\n'));
  }
  return pre;
}

// previewBlock renders what the tool says the call would do.
function previewBlock(pv) {
  const wrap = el('div', { class: 'preview' });
  wrap.append(el('h4', {}, 'What it would do'));
  if (pv.refused) {
    wrap.append(el('p', { class: 'error refused' }, 'The tool would refuse this call: ' + pv.summary));
    return wrap;
  }
  wrap.append(el('p', { class: 'summary' }, pv.summary));
  for (const f of pv.files || []) {
    wrap.append(el('p', { class: 'muted' }, (f.created ? 'New file ' : 'Change to ') + f.path + (f.note ? ' — ' + f.note : '')));
    if (f.diff) wrap.append(diffPre(f.path, f.diff));
  }
  if (pv.request) {
    const q = pv.request;
    const lines = [q.method + ' ' + q.url];
    for (const [k, vs] of Object.entries(q.header || {}).sort()) for (const v of vs) lines.push(k + ': ' + v);
    wrap.append(el('pre', { class: 'request' }, lines.join('\n') + (q.body ? '\n\n' + q.body : '')));
    if (q.body_note) wrap.append(el('p', { class: 'muted' }, q.body_note));
  }
  return wrap;
}

// contextBlock says where the call was made: the prompt of the run that
// made it and the model's words with it, linking the transcript there.
function contextBlock(a) {
  const c = a.context;
  const wrap = el('div', { class: 'context' });
  if (c.prompt) wrap.append(el('div', { class: 'arg-name' }, 'Asked in the run for'), el('pre', { class: 'prompt' }, c.prompt));
  if (c.said) wrap.append(el('div', { class: 'arg-name' }, 'The model said'), el('pre', { class: 'said' }, c.said));
  wrap.append(el('a', { class: 'at-turn', href: '#/sessions/' + encodeURIComponent(a.session_id) + '/' + encodeURIComponent(String(c.seq)) }, 'See the transcript at this turn'));
  return wrap;
}

// cannotDecide is the reason the signed-in key cannot decide, or ''.
function cannotDecide() {
  if (me && !(me.scopes || []).some((s) => s === 'approve' || s === 'admin')) {
    return 'This key (' + me.name + ') lacks the approve scope: it can see approvals but not decide them.';
  }
  return '';
}

function approvalCard(a) {
  const card = el('article', { class: 'card approval', 'data-approval': a.id, 'aria-labelledby': 'h-' + a.id });
  card.append(el('h3', { id: 'h-' + a.id }, a.tool + ' — ' + (a.session_title || a.session_id)));
  card.append(el('p', { class: 'muted' }, 'session ' + a.session_id + ' · asked ' + new Date(a.created).toLocaleString()));
  if (a.context) card.append(contextBlock(a));
  if (a.rule_id || a.message) card.append(el('p', { class: 'rule' }, 'rule ' + (a.rule_id || '-') + ': ' + (a.message || '')));
  card.append(el('h4', {}, 'Arguments'));
  // A write_file's content is shown once: as the diff when there is one.
  const pv = a.preview;
  const shownAsDiff = a.tool === 'write_file' && pv && !pv.refused && (pv.files || []).some((f) => f.diff);
  const skip = shownAsDiff && a.args && typeof a.args.content === 'string'
    ? { content: a.args.content.length + ' bytes: shown as the diff below' } : null;
  card.append(argsBlock(a.args, skip));
  if (pv) card.append(previewBlock(pv));
  if (a.preview_error) card.append(el('p', { class: 'error' }, a.preview_error));
  const noteId = 'note-' + a.id;
  card.append(el('label', { for: noteId }, 'Note (recorded with your decision)'));
  const note = el('textarea', { id: noteId, rows: '2' });
  card.append(note);
  const approve = el('button', { type: 'button', class: 'approve' }, 'Approve');
  const reject = el('button', { type: 'button', class: 'reject' }, 'Reject');
  approve.setAttribute('aria-label', 'Approve ' + a.tool + ' in ' + (a.session_title || a.session_id));
  reject.setAttribute('aria-label', 'Reject ' + a.tool + ' in ' + (a.session_title || a.session_id));
  const status = el('p', { class: 'status', role: 'status' });
  card.append(approve, reject, status);
  const why = cannotDecide();
  if (why) {
    approve.disabled = reject.disabled = note.disabled = true;
    status.className = 'status no-scope';
    status.textContent = why;
    return card;
  }
  const decide = async (decision) => {
    approve.disabled = reject.disabled = true;
    status.textContent = decision === 'approve' ? 'Approving…' : 'Rejecting…';
    try {
      await api('POST', '/v1/sessions/' + encodeURIComponent(a.session_id) + '/approval', { decision, note: note.value, approval_id: a.id });
      status.textContent = decision === 'approve' ? 'Approved. The run continues below.' : 'Rejected.';
      follow(a, decision);
    } catch (e) {
      status.textContent = 'Failed: ' + e.message;
      approve.disabled = reject.disabled = false;
    }
  };
  approve.addEventListener('click', () => decide('approve'));
  reject.addEventListener('click', () => decide('reject'));
  return card;
}

function renderApprovals(list) {
  const box = $('approvals-list');
  const ids = new Set(list.approvals.map((a) => a.id));
  for (const [id, card] of cards) {
    if (!ids.has(id) && !card.contains(document.activeElement)) { card.remove(); cards.delete(id); }
  }
  for (const a of list.approvals) {
    if (!cards.has(a.id)) {
      const c = approvalCard(a);
      cards.set(a.id, c);
      box.append(c);
    }
  }
  $('approvals-status').textContent = list.approvals.length === 0 ? 'Nothing waits for you.' : list.approvals.length + ' waiting.';
}

// follow streams the run that continues after a decision onto the page.
function follow(a, decision) {
  $('activity-title').hidden = false;
  const box = el('article', { class: 'card activity', 'data-session': a.session_id, 'aria-live': 'polite' });
  box.append(el('h3', {}, (decision === 'approve' ? 'Approved ' : 'Rejected ') + a.tool + ' — ' + (a.session_title || a.session_id)));
  const log = el('ol', { class: 'transcript' });
  const state = el('p', { class: 'run-state', role: 'status' }, 'Running…');
  box.append(log, state);
  $('activity').prepend(box);
  let after = false; // events before this decision's approval.resolved are history
  const r = transcriptRenderer(log);
  sse('/v1/sessions/' + encodeURIComponent(a.session_id) + '/events', (ev) => {
    let e;
    try { e = JSON.parse(ev.data); } catch (x) { return false; }
    if (!after) {
      if (e.type === 'approval.resolved' && e.approval_id === a.id) after = true;
      else return false;
    }
    r(e);
    if (e.type === 'run.completed') {
      state.textContent = 'Run ' + (e.stop_reason === 'completed' ? 'completed' : 'ended: ' + e.stop_reason) + '.';
      state.className = 'run-state done';
      return true;
    }
    if (e.type === 'run.failed') {
      state.textContent = 'Run failed: ' + e.error;
      state.className = 'run-state failed';
      return true;
    }
    return false;
  }, viewAbort.signal);
}

function showApprovals() {
  show('approvals-view');
  sse('/v1/approvals/stream', (ev) => {
    if (ev.event === 'approvals') renderApprovals(JSON.parse(ev.data));
    return false;
  }, viewAbort.signal);
}

// ---- sessions ----------------------------------------------------------

let cursor = '';

async function loadSessions(more) {
  const list = $('sessions-list');
  if (!more) { list.replaceChildren(); cursor = ''; }
  const status = $('status-filter').value;
  let q = '/v1/sessions?limit=50';
  if (status) q += '&status=' + encodeURIComponent(status);
  if (more && cursor) q += '&cursor=' + encodeURIComponent(cursor);
  try {
    const page = await api('GET', q);
    for (const s of page.sessions) {
      const a = el('a', { href: '#/sessions/' + encodeURIComponent(s.id) }, s.title || s.id);
      list.append(el('li', {}, a, ' ', el('span', { class: 'badge' }, s.status), el('span', { class: 'muted' },
        ' ' + s.totals.turns + ' turns · ' + fmtUSD(s.totals.cost_usd) + ' · ' + new Date(s.updated).toLocaleString())));
    }
    cursor = page.next_cursor || '';
    $('sessions-more').hidden = !cursor;
    if (!more && page.sessions.length === 0) list.append(el('li', { class: 'muted' }, 'No sessions.'));
  } catch (e) {
    list.append(el('li', { class: 'error' }, 'Cannot list sessions: ' + e.message));
  }
}

// fmtDuration rounds a Go duration string ("422.248µs", "1m2.5s") to
// what a person reads: "0.4 ms", "12 ms", "1.2 s", "1 min 3 s".
function fmtDuration(d) {
  if (typeof d !== 'string' || !d) return '';
  const unit = { h: 3600e3, m: 60e3, s: 1e3, ms: 1, 'µs': 1e-3, 'μs': 1e-3, us: 1e-3, ns: 1e-6 };
  let ms = 0;
  let matched = false;
  for (const [, n, u] of d.matchAll(/([0-9.]+)(h|ms|m|s|µs|μs|us|ns)/g)) { ms += parseFloat(n) * unit[u]; matched = true; }
  if (!matched) return d;
  if (ms < 1) return ms.toFixed(1) + ' ms';
  if (ms < 1000) return Math.round(ms) + ' ms';
  if (ms < 60e3) return (ms / 1000).toFixed(1) + ' s';
  return Math.floor(ms / 60e3) + ' min ' + Math.round((ms % 60e3) / 1000) + ' s';
}

function fmtUSD(v) { return '$' + (v || 0).toFixed(4); }
function fmtUsage(u) { return u ? (u.input_tokens || 0) + ' in / ' + (u.output_tokens || 0) + ' out tokens' : ''; }

// transcriptRenderer returns a function that adds one event to list.
function transcriptRenderer(list) {
  let text = null; // the assistant item being streamed
  const add = (cls, ...children) => { const li = el('li', { class: cls }, ...children); list.append(li); return li; };
  return (e) => {
    switch (e.type) {
      case 'run.started':
        add('user', el('strong', {}, e.resumed ? 'Run resumed' : 'Prompt'), e.prompt ? el('pre', {}, e.prompt) : null);
        break;
      case 'steer.delivered':
        add('user', el('strong', {}, 'Steering message'), el('pre', {}, e.text));
        break;
      case 'message.delta':
        if (!text) { text = add('assistant', el('strong', {}, 'Model'), el('pre', {}, '')); }
        text.querySelector('pre').textContent += e.text;
        break;
      case 'message.completed': {
        const li = text || add('assistant', el('strong', {}, 'Model'), el('pre', {}, ''));
        li.querySelector('pre').textContent = e.message.content || '';
        if (e.message.tool_calls && e.message.tool_calls.length) li.append(el('div', { class: 'muted' }, 'asks for ' + e.message.tool_calls.map((c) => c.name).join(', ')));
        li.append(el('div', { class: 'muted' }, 'turn ' + e.turn + ' · ' + fmtUsage(e.usage) + ' · ' + fmtUSD(e.cost_usd)));
        text = null;
        break;
      }
      case 'tool.started':
        add('tool', el('strong', {}, 'Tool ' + e.tool), argsBlock(e.args));
        break;
      case 'policy.decision':
        add('policy', el('strong', {}, 'Policy: ' + e.decision.effect), ' ' + (e.decision.rules || []).join(', ') + (e.decision.message ? ' — ' + e.decision.message : ''));
        break;
      case 'tool.completed':
        add('tool', el('strong', {}, e.tool + ' → ' + e.outcome), ' in ' + fmtDuration(e.duration) + (e.error ? ' — ' + e.error : ''));
        break;
      case 'approval.required':
        add('policy', el('strong', {}, 'Waiting for approval'), ' ' + e.approval.call.name + ': ' + (e.approval.message || ''));
        break;
      case 'approval.resolved':
        add('policy', el('strong', {}, e.approved ? 'Approved' : 'Rejected'), (e.by ? ' by ' + e.by : '') + (e.note ? ': ' + e.note : ''));
        break;
      case 'run.completed':
        add('end', el('strong', {}, 'Run ended: ' + e.stop_reason), ' · ' + e.turns + ' turns · ' + fmtUsage(e.usage) + ' · ' + fmtUSD(e.cost_usd));
        break;
      case 'run.failed':
        add('fail', el('strong', {}, 'Run failed'), ' ' + e.error);
        break;
      case 'budget.warning': case 'budget.exceeded':
        add('policy', el('strong', {}, e.type), ' ' + (e.message || e.id || ''));
        break;
      case 'turn.started': case 'model.request': case 'reasoning.delta': case 'tool.progress':
        break;
      default:
        add('', el('span', { class: 'badge' }, e.type));
    }
  };
}

// The session page: its messages as a transcript (prompts, answers, tool
// calls with their arguments, tool results), each tool call with its
// policy decision and outcome and each answer with its tokens and cost,
// from the session's events; refreshed live as events arrive.
async function showSession(id, atSeq) {
  show('session-view');
  const facts = $('session-facts');
  const list = $('transcript');
  facts.replaceChildren();
  list.replaceChildren();
  const sid = encodeURIComponent(id);
  const info = { decision: new Map(), outcome: new Map(), usage: new Map() };
  const refreshFacts = async () => {
    const s = await api('GET', '/v1/sessions/' + sid);
    $('session-title').textContent = 'Session: ' + (s.title || s.id);
    facts.replaceChildren();
    const fact = (k, v) => facts.append(el('dt', {}, k), el('dd', {}, v));
    fact('id', s.id);
    fact('status', s.status);
    fact('model', s.model || '-');
    fact('runs / turns', s.totals.runs + ' / ' + s.totals.turns);
    fact('tokens', fmtUsage(s.totals.usage));
    fact('cost', fmtUSD(s.totals.cost_usd));
    if (s.pending_approval) fact('waiting for', s.pending_approval.tool + ' (see Approvals)');
  };
  const render = async () => {
    await refreshFacts();
    const out = [];
    let after = 0;
    for (;;) {
      const page = await api('GET', '/v1/sessions/' + sid + '/messages?limit=1000&after=' + after);
      out.push(...page.messages);
      if (page.messages.length < 1000) break;
      after = page.messages[page.messages.length - 1].seq;
    }
    list.replaceChildren(...out.map((m) => messageItem(m, info)));
  };
  try {
    await render();
  } catch (e) {
    facts.append(el('dd', { class: 'error' }, e.message));
    return;
  }
  if (atSeq) {
    const at = list.querySelector('li[data-seq="' + CSS.escape(atSeq) + '"]');
    if (at) { at.classList.add('target'); at.setAttribute('tabindex', '-1'); at.scrollIntoView({ block: 'start' }); at.focus(); }
  }
  let pending = null;
  const later = () => { if (!pending) pending = setTimeout(() => { pending = null; render().catch(() => {}); }, 150); };
  sse('/v1/sessions/' + sid + '/events', (ev) => {
    let e;
    try { e = JSON.parse(ev.data); } catch (x) { return false; }
    switch (e.type) {
      case 'policy.decision': info.decision.set(e.call_id, e.decision); break;
      case 'tool.completed': info.outcome.set(e.call_id, e); later(); break;
      case 'message.completed': info.usage.set(e.message.seq, e); later(); break;
      case 'run.completed': case 'run.failed': case 'approval.required': case 'approval.resolved': case 'steer.delivered': later(); break;
    }
    return false;
  }, viewAbort.signal);
}

// messageItem renders one stored message of the transcript.
function messageItem(m, info) {
  switch (m.role) {
    case 'user':
      return el('li', { class: 'user', 'data-seq': String(m.seq) }, el('strong', {}, 'User'), el('pre', {}, m.content || ''));
    case 'assistant': {
      const li = el('li', { class: 'assistant', 'data-seq': String(m.seq) }, el('strong', {}, m.failed ? 'No answer' : 'Model'));
      if (m.content) li.append(el('pre', {}, m.content));
      if (m.failed) li.append(el('p', { class: 'error' }, m.failed));
      for (const c of m.tool_calls || []) {
        li.append(el('div', { class: 'calls' }, 'calls ' + c.name), argsBlock(c.arguments));
      }
      const u = info.usage.get(m.seq);
      if (u) li.append(el('div', { class: 'muted' }, 'turn ' + u.turn + ' · ' + fmtUsage(u.usage) + ' · ' + fmtUSD(u.cost_usd)));
      return li;
    }
    case 'tool': {
      const li = el('li', { class: 'tool', 'data-seq': String(m.seq) });
      const o = info.outcome.get(m.tool_call_id);
      li.append(el('strong', {}, (m.tool_name || 'tool') + ' → ' + (o ? o.outcome : (m.is_error ? 'error' : 'ok'))), o ? ' in ' + fmtDuration(o.duration) : '');
      const d = info.decision.get(m.tool_call_id);
      if (d) li.append(el('div', { class: 'policy' }, 'policy: ' + d.effect + ((d.rules || []).length ? ' (' + d.rules.join(', ') + ')' : '') + (d.message ? ' — ' + d.message : '')));
      if (m.approval) li.append(el('div', { class: 'policy' }, (m.approval.approved ? 'approved' : 'rejected') + (m.approval.by ? ' by ' + m.approval.by : '') + (m.approval.note ? ': ' + m.approval.note : '')));
      li.append(el('pre', { class: 'result' }, m.content || ''));
      if (m.child) li.append(childTurns(m.child));
      return li;
    }
    default:
      return el('li', { 'data-seq': String(m.seq) }, el('span', { class: 'badge' }, m.role), el('pre', {}, m.content || ''));
  }
}

// childTurns nests the turns of the child session that answered an agent
// call (or a pipeline step) under the call's result: its messages, read
// from the API (a child session is readable by its parent's owner).
function childTurns(c) {
  const list = el('ol', { class: 'child-transcript' });
  const box = el('details', { class: 'child', open: '' },
    el('summary', {}, 'agent ' + c.agent + ' · session ' + c.session_id + (c.stop_reason ? ' · ' + c.stop_reason : '') + (c.usage ? ' · ' + fmtUsage(c.usage) : '')),
    list);
  api('GET', '/v1/sessions/' + encodeURIComponent(c.session_id) + '/messages?limit=1000')
    .then((page) => {
      const info = { decision: new Map(), outcome: new Map(), usage: new Map() };
      list.replaceChildren(...page.messages.map((m) => messageItem(m, info)));
    })
    .catch((e) => list.replaceChildren(el('li', { class: 'error' }, 'the agent\'s turns: ' + e.message)));
  return box;
}

// ---- routing -------------------------------------------------------------

async function route() {
  if (viewAbort) viewAbort.abort();
  viewAbort = new AbortController();
  cards.clear();
  $('approvals-list').replaceChildren();
  if (!key) { show('signin-view'); $('key-input').focus(); return; }
  const h = location.hash || '#/approvals';
  if (h.startsWith('#/sessions/')) {
    // #/sessions/ID, or #/sessions/ID/SEQ: the transcript at message SEQ.
    const [id, seq] = h.slice('#/sessions/'.length).split('/');
    return showSession(decodeURIComponent(id), seq ? decodeURIComponent(seq) : '');
  }
  if (h === '#/sessions') { show('sessions-view'); return loadSessions(false); }
  return showApprovals();
}

document.addEventListener('DOMContentLoaded', () => {
  $('signin-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    key = $('key-input').value.trim();
    $('key-input').value = '';
    try {
      me = await api('GET', '/v1/whoami');
      sessionStorage.setItem(KEY, key);
      $('who').textContent = 'signed in as ' + me.name;
      $('signin-error').textContent = '';
      if (!location.hash) location.hash = '#/approvals';
      route();
    } catch (e) {
      key = '';
      $('signin-error').textContent = 'Sign-in failed: ' + e.message;
    }
  });
  $('signout').addEventListener('click', () => signOut(''));
  $('status-filter').addEventListener('change', () => loadSessions(false));
  $('sessions-more').addEventListener('click', () => loadSessions(true));
  window.addEventListener('hashchange', route);
  if (key) {
    api('GET', '/v1/whoami').then((m) => { me = m; $('who').textContent = 'signed in as ' + me.name; route(); }).catch(() => signOut('Sign in again.'));
  } else {
    route();
  }
});
